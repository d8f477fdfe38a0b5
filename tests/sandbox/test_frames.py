"""A worker's reply is read whole, as it arrives, until the stage's deadline: a reply sent in parts is read, one left
unfinished is a timeout, never a judge that waits for ever (``Connection.recv_bytes`` waited without limit once a
message's first byte was in), and one over the limit is refused before it is read."""

from __future__ import annotations

import socket
import struct
import threading
import time
from multiprocessing.connection import Connection

import pytest

from evalkit.sandbox.frames import FrameTimeout, FrameTooLarge, read_frame, readable


def _pair() -> tuple[Connection, socket.socket]:
    judge_end, worker_end = socket.socketpair()
    return Connection(judge_end.detach()), worker_end


def _deadline(seconds: float):
    until = time.monotonic() + seconds
    return lambda: until - time.monotonic()


def test_a_message_sent_in_parts_is_read_whole():
    conn, worker = _pair()
    payload = b"x" * 100_000  # multiprocessing writes a message over 16 KB in two writes: header, then payload
    sender = threading.Thread(target=lambda: (worker.sendall(struct.pack("!i", len(payload))), time.sleep(0.05),
                                              worker.sendall(payload[:5000]), time.sleep(0.05),
                                              worker.sendall(payload[5000:])))
    sender.start()
    assert readable(conn, 5.0, spin=False)
    assert read_frame(conn.fileno(), 1 << 20, _deadline(5.0), 0.01) == payload
    sender.join()


def test_a_message_as_the_connection_writes_it_is_read_whole():
    conn, worker = _pair()
    Connection(worker.detach()).send_bytes(b"{}" * 20_000)
    assert read_frame(conn.fileno(), 1 << 20, _deadline(5.0), 0.01) == b"{}" * 20_000


def test_a_message_left_unfinished_ends_at_the_deadline_not_never():
    conn, worker = _pair()
    worker.sendall(struct.pack("!i", 1000) + b"only part of it")
    raised: list[BaseException] = []

    def read() -> None:
        try:
            read_frame(conn.fileno(), 1 << 20, _deadline(0.3), 0.01)
        except BaseException as err:  # noqa: BLE001 - what it raised is the test's to check
            raised.append(err)
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(60)  # a generous bound: what it catches is a wait without end, not a slow machine
    assert not reader.is_alive(), "the reader still waits for the rest of a message that never comes"
    assert len(raised) == 1 and isinstance(raised[0], FrameTimeout)


def test_a_message_longer_than_the_limit_is_refused_before_it_is_read():
    conn, worker = _pair()
    worker.sendall(struct.pack("!i", 5 << 20))
    with pytest.raises(FrameTooLarge):
        read_frame(conn.fileno(), 4 << 20, _deadline(5.0), 0.01)


def test_the_other_end_closing_mid_message_is_an_end_of_file():
    conn, worker = _pair()
    worker.sendall(struct.pack("!i", 100) + b"abc")
    worker.close()
    with pytest.raises(EOFError):
        read_frame(conn.fileno(), 1 << 20, _deadline(5.0), 0.01)
