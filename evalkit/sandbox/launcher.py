"""Trusted side: launching untrusted code, one fresh process per submission and stage.

The process runs ``python -m evalkit.sandbox.untrusted.worker`` in its own temporary directory, session and process
group, with a scrubbed environment, bounded captured output, resource limits (set by the worker on itself before it
imports any submission code) and a watchdog that kills the whole sandbox on timeout, memory or process-count excess.

Requests go to the worker pickled (trusted -> untrusted); replies come back as JSON only, read through
``evalkit.sandbox.protocol``: nothing a submission sends runs code in the judge; a reply off the protocol kills it.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from contextlib import AbstractContextManager, nullcontext, suppress
from dataclasses import asdict, dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Callable

from evalkit.sandbox.capture import BoundedCapture
from evalkit.sandbox.cgroup import FREEZE_WAIT_S, SandboxCgroup, host_oom_kills, sigkill_from_outside
from evalkit.sandbox.frames import FrameTimeout, FrameTooLarge, read_frame, readable
from evalkit.sandbox.identity import hand_over, scrubbed_env
from evalkit.sandbox.processes import (MARKER_VARIABLE, ProcessTable, compiling, continue_all, pin,
                                      resident_bytes, signal_group, stop_all, until_gone)
from evalkit.sandbox.programs import ANSWER_WORKER, SETUP_REQUESTS, Program
from evalkit.sandbox.protocol import ARMED_FILE, MAX_REPLY_BYTES, ProtocolViolation
from evalkit.sandbox.remains import entry_lock, files_under, folder_usage, remove_added, remove_shared_memory
from evalkit.sandbox.shared_buffers import receive_fds, send_fds
from evalkit.sandbox.uid_pool import UidLease

logger = logging.getLogger(__name__)

WATCHDOG_PERIOD_S = 0.25
ENDED_WAIT_S = 2.0  # how long a closed worker's killed processes get to finish exiting
KILL_SETTLE_S = 2.0  # how long one round of SIGKILLs gets to land before the sandbox is looked at again


@dataclass(frozen=True)
class Limits:
    """Resource limits for one untrusted process (its whole session counts)."""

    memory_bytes: int = 16 * 1024**3
    address_space_bytes: int | None = None  # RLIMIT_AS; None on CUDA, whose driver maps huge ranges
    file_size_bytes: int = 2 * 1024**3
    disk_bytes: int = 8 * 1024**3  # all it may hold in its folders together (its own, its extensions')
    max_files: int = 100_000  # and in how many files
    open_files: int = 4096
    max_processes: int = 64
    output_bytes: int = 64 * 1024  # head and tail each kept from stdout and stderr
    group: str = ""  # the sandboxes of one run share it, so ``kill_group`` can end them all at once
    run_as: tuple[int, int] | None = None  # (uid, gid) a worker started by root becomes (``unprivileged_identity``)
    cpus: tuple[int, ...] | None = None  # the cores the sandbox starts on (its judge's, or the builds'); None: any

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class WorkerGone(Exception):
    """The untrusted process stopped answering: it died, timed out, or was killed by the watchdog."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind  # "crash" or "timeout"


class UntrustedProcess:
    """One sandboxed worker process and the judge's end of its connection."""

    def __init__(self, workdir: Path, limits: Limits, env_extra: dict[str, str] | None = None,
                 freezer: Any = None, processes: ProcessTable | None = None, idle_s: float | None = None,
                 program: Program = ANSWER_WORKER) -> None:
        self.workdir, self.limits, self.program = workdir, limits, program
        # A build: how long it may go on without any compiler running (frozen time excluded), once set up.
        self.idle_s, self._compiled_at = idle_s, float("inf")
        # Watchers of many sandboxes (a run's builds) share one table: one /proc reading per period for all.
        self._processes = processes or ProcessTable(WATCHDOG_PERIOD_S)
        # A build's ``BuildFreezer``: the time it spends frozen does not count against its limit, and while
        # frozen its watcher waits instead of scanning /proc beside a judge that is timing.
        self._paused_s: Callable[[], float] = freezer.paused_s if freezer else (lambda: 0.0)
        self._hold: Callable[[], None] = freezer.wait_while_frozen if freezer else (lambda: None)
        self.marker = f"{MARKER_VARIABLE}={limits.group}.{uuid.uuid4().hex}"
        env_extra = env_extra or {}
        # The extension folder may also be chosen after the start (a worker started ahead: ``sandbox.spare``).
        self.extensions_dir: Path | None = \
            Path(env_extra["TORCH_EXTENSIONS_DIR"]) if env_extra.get("TORCH_EXTENSIONS_DIR") else None
        self._uid = UidLease.take() if limits.run_as else None  # a uid of the pool, its own (``limits.run_as``: may)
        self.run_as = self._uid.identity if self._uid else None
        parent_sock, child_sock = socket.socketpair()
        self._conn = Connection(parent_sock.detach())
        child_fd = child_sock.detach()
        self._proc = subprocess.Popen(
            [sys.executable, "-m", program.module, str(child_fd), str(os.getpid())],
            cwd=workdir, env=scrubbed_env({**env_extra, **dict([self.marker.split("=", 1)])}, workdir),
            pass_fds=(child_fd,),
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
        )
        os.close(child_fd)
        self._host_oom_kills = host_oom_kills()  # to tell the kernel's OOM kills from other SIGKILLs (``_gone``)
        # Its cgroup before it runs anything untrusted: every process it starts is born inside (``sandbox.cgroup``).
        self.cgroup = SandboxCgroup.create(uuid.uuid4().hex[:12], limits.group, limits.memory_bytes,
                                           limits.max_processes, freezer.cgroup_parent() if freezer else None,
                                           cpu_cores=len(limits.cpus) if limits.cpus else None)
        self._join_cgroup()
        pin(self._proc.pid, limits.cpus)
        self._stdout = BoundedCapture(self._proc.stdout, limits.output_bytes)
        self._stderr = BoundedCapture(self._proc.stderr, limits.output_bytes)
        self.killed_because, self._last_watch = "", 0.0
        self._seen = {self._proc.pid}  # every process of the sandbox seen alive, for cleaning up after them
        self._stopped: set[int] = set()  # what a freeze by signals stopped, for its thaw
        self._none_left = False  # set once ``kill`` finds no process of the sandbox alive
        self._reclaim = False  # a build's folder goes back to evalkit's user when its worker is gone
        self._built: set[str] | None = None  # a judged worker's extension folder as its build left it
        self._entry: int | None = None  # the lock on that folder held while the worker lives (``entry_lock``)
        self.waiting_for_entry: Callable[[], AbstractContextManager[Any]] = nullcontext  # its judge's, around a wait

    def _folders(self) -> list[Path]:  # the worker's own, and its extension folder
        return [self.workdir] + ([self.extensions_dir] if self.extensions_dir else [])

    @property
    def pid(self) -> int:
        return self._proc.pid

    def _join_cgroup(self) -> None:
        if self.cgroup is None:
            return
        try:
            self.cgroup.add(self._proc.pid)
        except OSError as err:
            logger.warning("could not put sandbox %d in its cgroup (%s): the /proc sweep and the memory poll only",
                           self._proc.pid, err)
            self.cgroup.remove()
            self.cgroup = None

    def _members(self, fresh: bool = False) -> set[int]:
        """The sandbox's live processes: its cgroup's, and what the /proc sweep finds (session, marker)."""
        found = set(self._processes.members(self._proc.pid, self.marker, fresh=fresh))
        return found | (self.cgroup.pids() if self.cgroup else set())

    def send(self, message: Any) -> None:
        if isinstance(message, SETUP_REQUESTS):
            message = self._hand_over(message)
        try:
            self._conn.send(message)
        except (BrokenPipeError, ConnectionResetError, OSError) as err:
            raise self._gone(f"could not send to the worker ({err})") from err

    def _hand_over(self, message: Any) -> Any:
        """The setup request completed with what is the launcher's to decide: the worker's folders become the
        sandbox user's (only now: until its answer comes, a worker started ahead owns nothing another sandbox
        could reach), its extension folder, and the identity it runs as. A judged worker's extension folder is its
        build's cache entry, which another judge (of this process or another) may be judging the same answer from:
        the worker holds it alone (``entry_lock``) until it is gone, and what it adds there goes with it."""
        self._compiled_at = time.monotonic() - self._paused_s()
        if message.mode == "judge" and self.extensions_dir:
            self._entry = entry_lock(self.extensions_dir, self.waiting_for_entry)
            self._built = files_under(self.extensions_dir)
        self._reclaim = message.mode == "build" and self.run_as is not None and self.extensions_dir is not None
        for folder in self._folders():  # under a folder closed to its uid, the worker opens the way (``mounts``)
            hand_over(folder, self.run_as)
        return message.completed(str(self.extensions_dir) if self.extensions_dir else "", self.run_as)

    def armed(self, wait_s: float) -> bool:
        """Whether the worker has armed its parent-death signal (waiting up to ``wait_s`` for it): only then may it
        be stopped with no risk of outliving a judge that dies meanwhile."""
        deadline = time.monotonic() + wait_s
        while not (self.workdir / ARMED_FILE).exists():
            if not self.alive() or time.monotonic() > deadline:
                return False
            time.sleep(0.005)
        return True

    def alive(self) -> bool:
        """Whether the process still runs and was not killed (a started-ahead worker can be, by the run's clean-up)."""
        return self._proc.poll() is None and not self.killed_because

    def send_fds(self, fds: list[int]) -> None:
        """Hand the worker file descriptors (the judge's anonymous buffers), right after the request naming them."""
        try:
            send_fds(self._conn.fileno(), fds)
        except OSError as err:
            raise self._gone(f"could not send to the worker ({err})") from err

    def receive_fds(self, count: int, timeout_s: float) -> list[int]:
        """``count`` file descriptors the worker hands over (a CPU worker's own memory, after its setup)."""
        if readable(self._conn, timeout_s, spin=False):
            try:
                return receive_fds(self._conn.fileno(), count)
            except (OSError, ValueError) as err:
                raise self._gone(f"the worker's descriptors did not arrive ({err})") from err
        raise self._gone(self.killed_because or f"the worker handed over no descriptor within {timeout_s:g} s")

    def receive(self, timeout_s: float, stage: str, spin: bool = False,
                arrived: Callable[[], None] | None = None) -> Any:
        """The worker's next reply; ``WorkerGone`` on death, timeout or watchdog kill, ``ProtocolViolation`` (the
        worker killed) when it breaks the protocol. ``spin``: wait without sleeping (a timed request on a GPU: a core
        that slept through milliseconds takes longer to wake). ``arrived`` is called once the reply is in whole,
        before it is decoded (a timed request's clock stops there)."""
        deadline = time.monotonic() + timeout_s - self._paused_s()  # pushed back by any time spent frozen
        left = lambda: deadline + self._paused_s() - time.monotonic()  # noqa: E731
        while True:
            if readable(self._conn, max(min(left(), WATCHDOG_PERIOD_S), 0), spin):
                raw = self._read_frame(stage, timeout_s, left)  # whole, before anything stops the worker
                if arrived is not None:
                    arrived()
                return self._decode(raw, stage)  # no watchdog here: it would land inside timed calls
            self._hold()
            self._watchdog(force=True)
            if self.killed_because:
                raise self._gone(self.killed_because)
            if deadline + self._paused_s() - time.monotonic() <= 0:
                self.kill(f"timeout: stage '{stage}' exceeded its {timeout_s:g} s limit")
                raise WorkerGone("timeout", self.killed_because)

    def _read_frame(self, stage: str, timeout_s: float, left: Callable[[], float]) -> bytes:  # whole: ``frames``
        try:
            return read_frame(self._conn.fileno(), MAX_REPLY_BYTES, left, WATCHDOG_PERIOD_S)
        except (EOFError, ConnectionResetError) as err:
            self._wait_briefly()
            raise self._gone(f"the process ended during stage '{stage}' without replying whole") from err
        except FrameTooLarge:
            self.kill()
            raise ProtocolViolation(f"during stage '{stage}': a reply over the {MAX_REPLY_BYTES}-byte limit") from None
        except FrameTimeout:
            self.kill(f"timeout: stage '{stage}' exceeded its {timeout_s:g} s limit with its reply unfinished")
            raise WorkerGone("timeout", self.killed_because) from None

    def _decode(self, raw: bytes, stage: str) -> Any:
        try:
            return self.program.decode(raw)
        except ProtocolViolation as violation:
            self.kill()
            raise ProtocolViolation(f"during stage '{stage}': {violation}") from None

    def _wait_briefly(self) -> None:
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill("killed: it closed its connection but did not exit")

    def watch(self) -> None:
        """The watchdog's check (process count, memory), at most once a period: the judge calls it between
        calls, outside any timed span, since scanning /proc costs milliseconds."""
        self._watchdog(force=False)
        if self.killed_because:
            raise self._gone(self.killed_because)

    def _watchdog(self, force: bool) -> None:
        now = time.monotonic()
        if self.killed_because or self._proc.poll() is not None or (not force and now - self._last_watch < WATCHDOG_PERIOD_S):
            return
        self._last_watch = now
        members = self._members()
        self._seen.update(members)
        if len(members) > self.limits.max_processes:
            self.kill(f"killed: {len(members)} processes exceed the limit of {self.limits.max_processes}")
            return
        charged = self.cgroup.memory_bytes() if self.cgroup else 0
        rss = max(sum(resident_bytes(pid) for pid in members), charged)
        held = self.cgroup is not None and self.cgroup.cornered(charged, self.limits.memory_bytes)  # its own, at it
        if rss > self.limits.memory_bytes or held:
            self.kill(f"killed: host memory {rss / 2**30:.1f} GiB {'held at' if held else 'exceeds'} the limit of "
                      f"{self.limits.memory_bytes / 2**30:.1f} GiB")
            return
        used, files = folder_usage(self._folders(), self.limits.max_files)
        if used > self.limits.disk_bytes or files > self.limits.max_files:
            self.kill(f"killed: its folders hold {used / 2**30:.1f} GiB in {files} file(s), over the limit of "
                      f"{self.limits.disk_bytes / 2**30:.1f} GiB in {self.limits.max_files} files")
        elif self.idle_s is not None:
            self._check_compiling(members)

    def _check_compiling(self, members: set[int]) -> None:
        """A build past ``idle_s`` without a compiler running hangs (in an import or ``ModelNew()``): the
        judging stage, where nothing compiles, would give it no more than its load limit either."""
        now = time.monotonic() - self._paused_s()
        if compiling(members):
            self._compiled_at = now
        elif now - self._compiled_at > self.idle_s:
            self.kill(f"timeout: the build ran {self.idle_s:g} s without compiling anything: its import or "
                      f"ModelNew(*get_init_inputs()) does not finish")

    def _gone(self, message: str) -> WorkerGone:
        code = self._proc.poll()
        if self.cgroup is not None and self.cgroup.out_of_memory() and not self.killed_because:
            message += (f" (killed by the kernel: its memory, page cache and shared memory included, went over the "
                        f"limit of {self.limits.memory_bytes / 2**30:.1f} GiB)")
        elif code is not None and code < 0 and not self.killed_because:
            who = sigkill_from_outside(self._host_oom_kills) if code == -signal.SIGKILL else ""
            message += f" (killed by signal {signal.Signals(-code).name}{who})"
        elif code is not None and not self.killed_because:
            message += f" (exit code {code})"
        return WorkerGone("timeout" if self.killed_because.startswith("timeout") else "crash", message)

    @property
    def freezing(self) -> str:  # how the sandbox is frozen: ``cgroup2`` or ``cgroup1`` (its cgroup's), else ``signals``
        return self.cgroup.freezer.kind if self.cgroup is not None and self.cgroup.freezer is not None else "signals"

    def freeze(self) -> None:
        """Stop every process of the sandbox (its cgroup's freezer, else SIGSTOP to each); return once each is. One
        still running after ``FREEZE_WAIT_S`` (asleep in the kernel) gets the sandbox killed: ``WorkerGone``."""
        if self.cgroup is not None and self.cgroup.freezer is not None:
            frozen = self.cgroup.freezer.freeze()
        else:
            stopped, frozen = stop_all([self._proc.pid], lambda: self._members(fresh=True), FREEZE_WAIT_S)
            self._stopped |= stopped
        if not frozen:  # it could read what the judge lends next, or rewrite what it reads: judged no further
            self.kill(f"timeout: not every process of its sandbox stopped within {FREEZE_WAIT_S:g} s of a freeze")
            raise WorkerGone("timeout", self.killed_because)

    def thaw(self) -> None:
        if self.cgroup is not None and self.cgroup.freezer is not None:
            return self.cgroup.freezer.thaw()
        continue_all([self._proc.pid], self._stopped)
        self._stopped = set()

    def cancel(self, reason: str) -> None:
        """Kill the worker's group from another thread or a signal handler, taking no lock: the thread driving it
        finds it gone and cleans up (``kill``, ``close``) as after any death."""
        if not self.killed_because:
            self.killed_because = reason
        if self.cgroup is not None:
            self.cgroup.kill()
        signal_group(self._proc.pid, signal.SIGKILL)

    def kill(self, reason: str = "") -> None:
        """Kill the worker's whole session: its group and any child that left the group."""
        if reason and not self.killed_because:
            self.killed_because = reason
        if self.cgroup is not None:
            self.cgroup.kill()
        for _ in range(3):
            targets = self._members(fresh=True)
            signal_group(self._proc.pid, signal.SIGKILL)
            for pid in targets:
                with suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            self._seen.update(targets)
            if not targets:
                self._none_left = True  # nothing of the sandbox was alive to start anything new
                break
            until_gone(targets, KILL_SETTLE_S)  # else a loaded machine's next look finds them still dying
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            logger.warning("worker %s did not exit after SIGKILL", self._proc.pid)
        if self._none_left:
            self._give_uid_back()
            if self.cgroup is not None:
                self.cgroup.remove()
        remove_shared_memory(sorted(self._seen))

    def close(self) -> tuple[str, str]:
        """Stop the worker (politely, then by force) and return its captured stdout and stderr."""
        if self._proc.poll() is None:
            self.thaw()
            try:
                self._conn.send(self.program.exit_request())
                self._proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()
        self._conn.close()
        if self._built is not None and self.extensions_dir and self._none_left:
            remove_added(self.extensions_dir, self._built)
        if self._reclaim and self.extensions_dir and self._none_left:
            hand_over(self.extensions_dir, (os.geteuid(), os.getegid()))  # the cache entry: no pool uid's to write
        if self._entry is not None:
            os.close(self._entry)  # releases the entry for the next judge
            self._entry = None
        return self._stdout.text(), self._stderr.text()

    def ended(self, wait_s: float = ENDED_WAIT_S) -> bool:
        """True once the worker has exited and no process of its sandbox is left (after ``close``, within
        ``wait_s``: a killed process takes a moment to finish exiting)."""
        deadline = time.monotonic() + wait_s
        if self._none_left and self._proc.poll() is not None:
            return True  # ``kill`` found no process of it left: scanning /proc again would find none either
        while self._proc.poll() is None or self._members(fresh=True):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        self._give_uid_back()
        return True

    def _give_uid_back(self) -> None:
        """Release this sandbox's uid, once nothing of it is left (a process still running as it keeps it out of
        the pool anyway: ``UidLease.take`` skips uids in use)."""
        if self._uid is not None and self._proc.poll() is not None:
            self._uid.release()

    @property
    def returncode(self) -> int | None:
        return self._proc.poll()
