"""Trusted side: a worker's stdout or stderr, read to its end with bounded memory (the launcher's).

A submission may print without end; only the first and last ``limit`` bytes are kept, with a count of those
skipped between them.
"""

from __future__ import annotations

import threading


class BoundedCapture(threading.Thread):
    """Reads a pipe to its end, keeping only the first and last ``limit`` bytes."""

    def __init__(self, stream, limit: int) -> None:
        super().__init__(daemon=True)
        self._stream, self._limit = stream, limit
        self.head, self.tail, self.total = bytearray(), bytearray(), 0
        self.start()

    def run(self) -> None:
        for chunk in iter(lambda: self._stream.read1(65536), b""):
            self.total += len(chunk)
            room = self._limit - len(self.head)
            if room > 0:
                self.head += chunk[:room]
                chunk = chunk[room:]
            self.tail = (self.tail + chunk)[-self._limit :]

    def text(self) -> str:
        self.join(timeout=2)
        skipped = self.total - len(self.head) - len(self.tail)
        middle = f"\n[... {skipped} bytes not kept ...]\n" if skipped > 0 else ""
        return (bytes(self.head).decode("utf-8", "replace") + middle + bytes(self.tail).decode("utf-8", "replace"))
