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
import signal
import threading
import time
from pathlib import Path
from typing import Callable, Iterator

logger = logging.getLogger(__name__)

MARKER_VARIABLE = "EVALKIT_SANDBOX_ID"
_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")
_MARKER_PREFIX = f"{MARKER_VARIABLE}=".encode()
_TICKS_PER_S = os.sysconf("SC_CLK_TCK")  # the unit of a process's start time in /proc/<pid>/stat
UNMARKED_AFTER_S = 5.0


class ProcessTable:
    """A shared, thread-safe reading of which process carries which marker, refreshed on demand."""

    def __init__(self, max_age_s: float) -> None:
        self.max_age_s = max_age_s
        self._lock = threading.Lock()
        self._taken_at = float("-inf")
        self._live: list[tuple[int, int, tuple[bytes, ...]]] = []  # (pid, session, markers), zombies left out
        # The markers found in each process's environment, by (pid, start time): a process keeps its marker through
        # exec unless it clears its environment, and a marked process stays a member even if it then does. One found
        # without a marker is read again until it is UNMARKED_AFTER_S old (a process started with a marker shows
        # its parent's environment until its exec), then taken as unmarked for good: only sandboxes' processes carry
        # one, and a child is born with its parent's. So a scan reads the environment of young processes only.
        self._markers: dict[tuple[int, str], tuple[bytes, ...]] = {}

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
        live, known = [], {}
        settled = _ticks_since_boot() - UNMARKED_AFTER_S * _TICKS_PER_S  # processes started before are settled
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                fields = stat_fields(int(name))
                if fields[0] == "Z":
                    continue
                key = (int(name), fields[19])  # field 22 of stat: the start time, which tells a reused pid apart
                markers = self._markers[key] if key in self._markers else _environment_markers(int(name))
            except (OSError, IndexError, ValueError):
                continue
            if markers or int(fields[19]) < settled:
                known[key] = markers
            live.append((int(name), int(fields[3]), markers))
        self._markers = known
        return live


def _ticks_since_boot() -> float:
    with open("/proc/uptime") as uptime:
        return float(uptime.read().split()[0]) * _TICKS_PER_S


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
    fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
    try:
        return os.read(fd, 4096).decode(errors="replace").rsplit(")", 1)[1].split()
    finally:
        os.close(fd)


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


def until_stopped(pids: list[int], within_s: float) -> bool:
    """Wait (up to ``within_s``) until every one of ``pids`` is stopped or gone: SIGSTOP lands when the kernel next
    schedules the process, which on a loaded machine is not at once. Whether they all were in time."""
    return _until_in(pids, STOPPED_STATES, within_s)


def until_gone(pids: list[int], within_s: float) -> None:
    """Wait (up to ``within_s``) until every one of ``pids`` is dead or gone: SIGKILL too lands only when the kernel
    next schedules the process, and one in uninterruptible sleep (reading its imports from disk) only once it wakes."""
    _until_in(pids, GONE_STATES, within_s)


def _until_in(pids: list[int], states: tuple[str, ...], within_s: float) -> bool:
    deadline, pause = time.monotonic() + within_s, pauses()
    while any(process_state(pid) not in states for pid in pids):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        rest(min(next(pause), remaining))
    return True


# Looks without a sleep between them, first: a sleep overshoots by about 50 us (the timer slack), and sleeps that
# grow turn a freeze of 150 us into one of 300 or 620 us as the judge's clock reads it, a step that differs from one
# worker to another and so between the two sides of a ratio (docs/judge.md, What is subtracted).
SPIN_S = 0.002


def pauses(first_s: float = 20e-6, most_s: float = 1e-3, spin_s: float = SPIN_S) -> Iterator[float]:
    """How long to sleep between two looks at something the kernel does for another process (a stop, a freeze, an
    exit): not at all for the first ``spin_s``, as it is most often done by then, then 20 us doubling to 1 ms, so
    a long wait costs few looks."""
    spin_until = time.monotonic() + spin_s
    while time.monotonic() < spin_until:
        yield 0.0
    pause = first_s
    while True:
        yield pause
        pause = min(2 * pause, most_s)


def rest(pause_s: float) -> None:
    """Sleep ``pause_s``, a pause of ``pauses``; a pause of 0 only lets another process have the CPU, if one waits for
    it (on a loaded machine, the very process being waited for)."""
    if pause_s > 0:
        time.sleep(pause_s)
    else:
        os.sched_yield()


STOP_LOOKS = 16  # looks for processes forked before their parent stopped (each look's new ones are stopped first)


def stop_all(leaders: list[int], members: Callable[[], set[int]], within_s: float) -> tuple[set[int], bool]:
    """SIGSTOP the process groups ``leaders`` lead (processes the caller started: their pids cannot have been reused),
    wait until they are stopped, then look for the others ``members()`` finds, stop those and look again until a look
    finds none new: a process forked before its parent stopped is found by the next look, and none is forked once all
    are stopped. One look when every process is in the leaders' groups. The processes stopped (to be continued:
    ``continue_all``), and whether all stopped within ``within_s``."""
    for leader in leaders:
        signal_group(leader, signal.SIGSTOP)
    stopped, deadline = set(leaders), time.monotonic() + within_s
    for _ in range(STOP_LOOKS):
        if not until_stopped(sorted(stopped), max(deadline - time.monotonic(), 0.0)):
            return stopped, False
        new = members() - stopped
        if not new:
            return stopped, True
        for pid in new:
            _signal(pid, signal.SIGSTOP)
        stopped |= new
    return stopped, False


def continue_all(leaders: list[int], stopped: set[int]) -> None:
    """SIGCONT what ``stop_all`` stopped."""
    for leader in leaders:
        signal_group(leader, signal.SIGCONT)
    for pid in stopped:
        _signal(pid, signal.SIGCONT)


def signal_group(leader: int, signum: int) -> None:
    """Send ``signum`` to the process group ``leader`` leads, if it is still there."""
    try:
        os.killpg(leader, signum)
    except (ProcessLookupError, PermissionError):
        pass


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


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


def pin_threads(pid: int, cpus: tuple[int, ...]) -> None:
    """Move every thread of process ``pid`` onto ``cpus``: an affinity is each thread's own, and ``pin`` sets the
    first thread's only, which a started worker's later threads inherit (those it has already keep theirs).
    Advisory, as ``pin``."""
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:  # already gone
        return
    for thread in threads:
        try:
            os.sched_setaffinity(int(thread), cpus)
        except OSError as err:  # the thread ended meanwhile, or cores this machine does not have
            logger.debug("could not pin thread %s of %d to cores %s: %s", thread, pid, cpus, err)


def pin(pid: int, cpus: tuple[int, ...] | None) -> None:
    """Start the sandbox on ``cpus``: keeps it off a judge's cores. Advisory only, since a process may change its
    own affinity: what enforces isolation while a judge times is the build cgroup's cpuset or the freeze
    (``freezer``), and SIGSTOP."""
    if cpus:
        try:
            os.sched_setaffinity(pid, cpus)
        except OSError as err:  # already gone, or cores this machine does not have
            logger.debug("could not pin sandbox %d to cores %s: %s", pid, cpus, err)
