"""Trusted side: one whole message from a worker's socket, read as it arrives, until a deadline.

Messages are framed as ``multiprocessing.connection`` frames them: a 4-byte big-endian length (or -1, then 8
bytes), then the bytes. ``Connection.recv_bytes`` waits without limit for the rest of a message once its first byte
is in, so a worker that sent part of a reply and stopped (or was stopped) held the judge for ever: ``read_frame``
waits only until the deadline ``left`` gives.
"""

from __future__ import annotations

import os
import select
import struct
import time
from multiprocessing.connection import Connection
from typing import Callable


class FrameTimeout(Exception):
    """The deadline passed with the message unfinished."""


class FrameTooLarge(Exception):
    """The message says it is longer than the reader takes."""


def readable(conn: Connection, wait_s: float, spin: bool) -> bool:
    """Whether a message began to arrive within ``wait_s``: polled without sleeping with ``spin`` (a timed request
    on a GPU: a core that slept through milliseconds takes longer to wake), else slept on."""
    if not spin:
        return conn.poll(wait_s)
    until = time.monotonic() + wait_s
    while not conn.poll(0):
        if time.monotonic() >= until:
            return False
    return True


def read_frame(fd: int, most: int, left: Callable[[], float], poll_s: float) -> bytes:
    """One whole message from ``fd``, at most ``most`` bytes, waiting at most ``left()`` seconds for its parts
    (``EOFError`` when the other end closes first)."""
    size = struct.unpack("!i", _read_exact(fd, 4, left, poll_s))[0]
    if size == -1:
        size = struct.unpack("!Q", _read_exact(fd, 8, left, poll_s))[0]
    if not 0 <= size <= most:
        raise FrameTooLarge(f"a message of {size} bytes")
    return _read_exact(fd, size, left, poll_s)


def _read_exact(fd: int, count: int, left: Callable[[], float], poll_s: float) -> bytes:
    chunks: list[bytes] = []
    got = 0
    while got < count:
        if left() <= 0:
            raise FrameTimeout(f"{got} of {count} bytes")
        if not select.select([fd], [], [], max(min(left(), poll_s), 0))[0]:
            continue
        chunk = os.read(fd, count - got)
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)
