"""Trusted side: which live processes belong to which sandbox, read from ``/proc``.

A sandbox's processes are its session plus anything carrying its marker (an environment variable every
descendant inherits, so a process that left the session with ``setsid`` is still found). Reading every
process's ``environ`` costs milliseconds of Python per scan, and a run's judge process watches one sandbox
per running build: scanned separately, fifteen builds held the interpreter lock for most of each second and
slowed the judge beside them. A ``ProcessTable`` is one reading shared by every watcher that holds it, taken
at most once per ``max_age_s``; a kill or an end-of-sandbox check asks for a fresh one. Also: waiting for a
sandbox's processes to stop or end, and pinning its first process to cores.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

logger = logging.getLogger(__name__)

MARKER_VARIABLE = "EVALKIT_SANDBOX_ID"
_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")
_MARKER_PREFIX = f"{MARKER_VARIABLE}=".encode()


class ProcessTable:
    """A shared, thread-safe reading of which process carries which marker, refreshed on demand."""

    def __init__(self, max_age_s: float) -> None:
        self.max_age_s = max_age_s
        self._lock = threading.Lock()
        self._taken_at = float("-inf")
        self._live: list[tuple[int, int, tuple[bytes, ...]]] = []  # (pid, session, markers), zombies left out
        # Markers found in a process's environment, by (pid, start time): a process keeps its marker through
        # exec unless it clears its environment, and a marked process stays a member even if it then does.
        self._marked: dict[tuple[int, str], tuple[bytes, ...]] = {}

    def members(self, sid: int, marker: str, fresh: bool = False) -> list[int]:
        """PIDs of every live process of one sandbox: session ``sid``, or a marker starting with ``marker``
        (``EVALKIT_SANDBOX_ID=<value>``). ``fresh``: read /proc now rather than reuse a recent reading."""
        if not marker.startswith(MARKER_VARIABLE + "="):
            raise ValueError(f"not a sandbox marker: {marker!r}")
        needle = marker.encode()[len(_MARKER_PREFIX):]
        live = self._reading(0.0 if fresh else self.max_age_s)
        return [pid for pid, session, markers in live if session == sid or any(m.startswith(needle) for m in markers)]

    def _reading(self, max_age_s: float) -> list[tuple[int, int, tuple[bytes, ...]]]:
        asked_at = time.monotonic()
        with self._lock:  # a thread arriving during a refresh waits for it instead of scanning again
            if self._taken_at < asked_at - max_age_s:
                self._live = self._scan()
                self._taken_at = time.monotonic()
            return self._live

    def _scan(self) -> list[tuple[int, int, tuple[bytes, ...]]]:
        live, seen = [], set()
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                fields = stat_fields(int(name))
                if fields[0] == "Z":
                    continue
                key = (int(name), fields[19])  # field 22 of stat: the start time, which tells a reused pid apart
                markers = self._marked.get(key) or _environment_markers(int(name))
            except (OSError, IndexError, ValueError):
                continue
            if markers:
                self._marked[key] = markers
                seen.add(key)
            live.append((int(name), int(fields[3]), markers))
        self._marked = {key: markers for key, markers in self._marked.items() if key in seen}
        return live


def _environment_markers(pid: int) -> tuple[bytes, ...]:
    environ = Path(f"/proc/{pid}/environ").read_bytes()
    if _MARKER_PREFIX not in environ:
        return ()
    return tuple(item[len(_MARKER_PREFIX):] for item in environ.split(b"\0") if item.startswith(_MARKER_PREFIX))


def sandbox_members(sid: int, marker: str) -> list[int]:
    """PIDs of every live process of one sandbox, read from /proc now (one-off: a watcher keeps a table)."""
    return ProcessTable(0.0).members(sid, marker, fresh=True)


def stat_fields(pid: int) -> list[str]:
    """The fields of ``/proc/<pid>/stat`` after the command name (state first), which may hold spaces and ")"."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def process_state(pid: int) -> str:
    """The state letter of ``pid`` in /proc ("R", "S", "T" stopped, ...); "" when it is gone."""
    try:
        return stat_fields(pid)[0]
    except (OSError, IndexError):
        return ""


def resident_bytes(pid: int) -> int:
    """The process's resident memory (0 when it is gone)."""
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * _PAGE_BYTES
    except (OSError, IndexError, ValueError):
        return 0


STOPPED_STATES = ("T", "t", "", "Z", "X")  # stopped, traced, gone, zombie, dead: a SIGSTOP has landed or never will
GONE_STATES = ("", "Z", "X")  # gone, zombie, dead: a SIGKILL has landed


def until_stopped(pids: list[int], within_s: float) -> None:
    """Wait (up to ``within_s``) until every one of ``pids`` is stopped or gone: SIGSTOP lands when the kernel next
    schedules the process, which on a loaded machine is not at once."""
    _until_in(pids, STOPPED_STATES, within_s)


def until_gone(pids: list[int], within_s: float) -> None:
    """Wait (up to ``within_s``) until every one of ``pids`` is dead or gone: SIGKILL too lands only when the kernel
    next schedules the process, and one in uninterruptible sleep (reading its imports from disk) only once it wakes."""
    _until_in(pids, GONE_STATES, within_s)


SPIN_S = 0.005  # a signal usually lands within this: until then look again after yielding the core, not sleeping


def _until_in(pids: list[int], states: tuple[str, ...], within_s: float) -> None:
    """Wait until each of ``pids`` is in one of ``states``: a timed request waits so for its worker's stop, so the
    first few milliseconds only yield the core (the process to be stopped may need it) rather than sleep."""
    began = time.monotonic()
    deadline = began + within_s
    while any(process_state(pid) not in states for pid in pids) and time.monotonic() < deadline:
        if time.monotonic() - began > SPIN_S:
            time.sleep(0.0005)
        else:
            os.sched_yield()


# What a build runs while it compiles (torch's extension builder: ninja, the host compiler, nvcc and its stages).
COMPILERS = frozenset({"ninja", "c++", "g++", "gcc", "cc", "cc1", "cc1plus", "clang", "clang++", "as", "ld",
                       "collect2", "nvcc", "cicc", "ptxas", "fatbinary", "nvlink", "cudafe++", "hipcc"})


def compiling(pids: set[int] | list[int]) -> bool:
    """Whether any of ``pids`` is a compiler (its /proc ``comm``)."""
    for pid in pids:
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() in COMPILERS:
                return True
        except OSError:
            continue
    return False


def pin(pid: int, cpus: tuple[int, ...] | None) -> None:
    """Start the sandbox on ``cpus``: keeps it off a judge's cores. Advisory only, since a process may change its
    own affinity: what enforces isolation while a judge times is the build cgroup's cpuset or the freeze
    (``freezer``), and SIGSTOP."""
    if cpus:
        try:
            os.sched_setaffinity(pid, cpus)
        except OSError as err:  # already gone, or cores this machine does not have
            logger.debug("could not pin sandbox %d to cores %s: %s", pid, cpus, err)
