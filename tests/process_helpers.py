"""Helpers for tests that start `evalkit score` as a process and watch its sandboxes from outside."""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

from evalkit.sandbox.launcher import MARKER_VARIABLE


def sandboxes(group: str | None = None, parent: int | None = None) -> dict[int, str]:
    """Live (not zombie) processes carrying a sandbox marker: pid -> marker value; only ``group``'s, or
    only children of ``parent``, when given."""
    found = {}
    needle = f"{MARKER_VARIABLE}=".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            environ = (entry / "environ").read_bytes().split(b"\0")
        except (OSError, IndexError):
            continue
        marker = next((v[len(needle):].decode() for v in environ if v.startswith(needle)), None)
        if marker is None or fields[0] == "Z" or (parent is not None and int(fields[1]) != parent):
            continue
        if group is None or marker.startswith(f"{group}."):
            found[int(entry.name)] = marker
    return found


class Tail(threading.Thread):
    """Reads a pipe to its end, keeping everything (tqdm writes progress without newlines)."""

    def __init__(self, stream) -> None:
        super().__init__(daemon=True)
        self.stream, self.data = stream, bytearray()
        self.start()

    def run(self) -> None:
        for chunk in iter(lambda: self.stream.read1(65536), b""):
            self.data += chunk

    def text(self) -> str:
        return self.data.decode(errors="replace")


def wait_for(condition, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def children(pid: int) -> set[int]:
    """The processes whose parent is ``pid`` (a judge process, a build's watcher, a worker)."""
    return {int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit() and parent(int(entry.name)) == pid}


def alive(pid: int) -> bool:
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def parent(pid: int) -> int:
    try:
        return int((Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def descends_from(pid: int, ancestor: int) -> bool:
    while pid > 1:
        pid = parent(pid)
        if pid == ancestor:
            return True
    return False


def stop_with(proc: subprocess.Popen, signum: int, stdout: Tail, stderr: Tail, timeout_s: float) -> tuple[int, str]:
    """Send ``signum`` to ``proc`` and wait for it (killed if it outlives ``timeout_s``): its exit code and
    everything it printed."""
    try:
        proc.send_signal(signum)
        code = proc.wait(timeout=timeout_s)
    finally:
        if proc.poll() is None:
            proc.kill()
    stdout.join(timeout=5)
    stderr.join(timeout=5)
    return code, stdout.text() + stderr.text()
