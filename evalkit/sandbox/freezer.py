"""Trusted side: keeping build sandboxes off the machine while a judge times.

Builds import submissions, so a build is untrusted code; left running beside a timing it can slow the
judge's calls or the baselines (or spin every core on purpose). ``BuildFreezer.timing()`` keeps them off
the measurement for as long as any judge is timing, in one of two ways (``isolation`` says which):

- **partition** (``partition(cpus)``, chosen by the engine for GPU judges): the run's build cgroup is
  confined to the build cores by the kernel (cgroup v2 ``cpuset.cpus``), which no process inside can undo,
  and the builds cannot open or drive the GPU (their Landlock rules, ``evalkit.sandbox.untrusted.worker``).
  Builds then keep running while a judge times on its own cores and its own GPU.
- **freeze**, everywhere else: every build sandbox is stopped for the duration, and new builds are held
  back until it ends.

How a sandbox is frozen, best first (``mechanism`` says which one a run used):

- ``cgroup2`` / ``cgroup1``: one freezer cgroup of the run holds every build sandbox, frozen as a whole: each
  sandbox's own cgroup (v2), or its own freezer cgroup (v1 controllers; ``cgroup.SandboxCgroup``), is made beneath
  it before the sandbox runs any code, else the sandbox is put in it (v2: in its ``LOOSE``
  leaf, never in the run's cgroup itself). A process cannot leave its cgroup: that needs
  a write to ``/sys/fs/cgroup``, which its Landlock rules deny, and every child it forks is born inside.
- ``signals`` (no writable cgroup): SIGSTOP to every process of the sandbox (its process group, its session,
  anything carrying its marker, and its cgroup's members where it has a cgroup without a freezer), looked for again
  until none is new. A process that both left the session and dropped its marker (exec with a clean environment)
  escapes it where the sandbox has no cgroup: ``docs/hostile.md`` lists this limit.

A frozen build's own time limit does not run while it is frozen (``paused_s``).
"""

from __future__ import annotations

import logging
import threading
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Iterator

from evalkit.sandbox.cgroup import FREEZE_WAIT_S, CgroupFreezer, SandboxCgroup
from evalkit.sandbox.host_timing import POLL_S, Token, open_registry
from evalkit.sandbox.processes import ProcessTable, continue_all, stop_all
from evalkit.sandbox.untrusted.landlock import LANDLOCK_ABI_FOR_DEVICES, abi_version

logger = logging.getLogger(__name__)
STOP_SETTLE_S = 0.5  # how long a freeze by signals waits for its SIGSTOPs to land before the judge may time

THAWED, PARTIAL, FROZEN = "thawed", "partial", "frozen"  # partial: partitioned, only sandboxes outside the cgroup stopped
# v2: the leaf that holds the processes registered without a freezer of their own beneath this group (torch's header
# compiles, a sandbox whose own cgroup could not be made or sits elsewhere). Never the run's cgroup itself: v2 lets a
# cgroup hold processes or hand controllers to children, not both, so a process there made every later sandbox's
# cgroup fail (EBUSY enabling memory and pids), and once a sandbox's cgroup enabled them, a process added there failed.
LOOSE = "loose"


class _Cgroup(CgroupFreezer):
    """The freezer cgroup holding every build sandbox of a run (``CgroupFreezer.create`` picks v2 or v1), which can also
    confine them to the build cores."""

    @classmethod
    def create(cls, name: str, parent: Path | None = None) -> "_Cgroup | None":
        made = super().create(name, parent)
        return made if isinstance(made, _Cgroup) else None

    def add(self, pid: int) -> None:
        """Put ``pid`` under this cgroup (v2: in its ``LOOSE`` leaf), where a freeze of it reaches."""
        target = self.path
        if self.kind == "cgroup2":
            target = self.path / LOOSE
            target.mkdir(exist_ok=True)
        (target / "cgroup.procs").write_text(f"{pid}\n")

    def set_frozen(self, frozen: bool) -> None:
        if not frozen:
            self.thaw()
        elif not self.freeze(FREEZE_WAIT_S):
            logger.warning("builds of %s: not every process froze within %g s", self.path, FREEZE_WAIT_S)

    def confine(self, cpus: tuple[int, ...]) -> bool:
        """Keep every process of this cgroup on ``cpus`` (cgroup v2 cpuset); True when the kernel enforces
        exactly that set."""
        if self.kind != "cgroup2":
            return False
        try:
            (self.path / "cpuset.cpus").write_text(",".join(map(str, sorted(cpus))) + "\n")
            effective = parse_cpu_list((self.path / "cpuset.cpus.effective").read_text())
        except OSError as err:  # no cpuset controller delegated here, or cores outside the parent's set
            logger.debug("cgroup %s: cannot confine to cores %s: %s", self.path, cpus, err)
            return False
        return effective == set(cpus)

    def remove(self) -> None:
        if (self.path / LOOSE).is_dir():
            try:
                (self.path / LOOSE).rmdir()
            except OSError:
                pass  # still holds a process: the base removal says so
        super().remove()


def parse_cpu_list(text: str) -> set[int]:
    """The cores of a kernel CPU list (``0-3,8,10-11``)."""
    cores: set[int] = set()
    for part in text.strip().split(","):
        if part:
            low, _, high = part.partition("-")
            cores.update(range(int(low), int(high or low) + 1))
    return cores


class BuildFreezer:
    """Freezes a run's build sandboxes while any judge times; thread-safe, re-entrant across judges.

    ``host_wide`` (the default): also while a judge of any other evalkit process of the host times, and a judge's
    timing waits until every other process's builds are frozen (``evalkit.sandbox.host_timing``)."""

    def __init__(self, name: str, use_cgroup: bool = True, host_wide: bool = True) -> None:
        self._cgroup = _Cgroup.create(f"evalkit-{name}-builds") if use_cgroup else None
        self.mechanism = self._cgroup.kind if self._cgroup else "signals"
        self._lock = threading.Condition()
        self._timers = 0
        # session leader pid -> marker and cgroup (if any), of the sandboxes frozen by signals
        self._sandboxes: dict[int, tuple[str, SandboxCgroup | None]] = {}
        self._stopped: set[int] = set()
        self._frozen_since: float | None = None
        self._paused_total_s = 0.0
        self.partitioned = False
        self._state = THAWED
        self._cgroup_frozen = False
        self._host = open_registry() if host_wide else None
        self._foreign = False  # a judge of another freezer of the host is timing
        self._builds: set[int] = set()  # every registered build sandbox, however it is frozen
        self._launching = 0
        self._tokens: dict[str, Token] = {}  # "timing", "running": this freezer's live tokens in the host registry
        self._closed = threading.Event()
        self._watcher: threading.Thread | None = None
        if self._host is not None:
            self._watcher = threading.Thread(target=self._watch, name="evalkit-host-timing", daemon=True)
            self._watcher.start()

    @property
    def isolation(self) -> str:
        """How builds are kept off a timing: ``partition (cpuset)`` or ``freeze (<mechanism>)``."""
        return "partition (cpuset)" if self.partitioned else f"freeze ({self.mechanism})"

    @property
    def host_folder(self) -> Path | None:
        """The host-wide registry this freezer shares with every evalkit process of the host; None: its own run only."""
        return self._host.folder if self._host is not None else None

    def partition(self, cpus: tuple[int, ...]) -> bool:
        """Confine every build to ``cpus`` in a way no build can undo, so that a timing need not freeze them.
        Call it before any build starts; False (and builds are frozen as before) where the kernel cannot.
        Another process's timing still freezes them (its judge may time on these cores)."""
        if self._cgroup is not None and cpus and self._cgroup.confine(cpus):
            self.partitioned = True
        return self.partitioned

    @contextmanager
    def launching(self) -> Iterator[None]:
        """Hold a new build back while any judge is timing, unless builds are partitioned off and no other process
        times (call it around starting the sandbox)."""
        with self._lock:
            while True:
                self._lock.wait_for(self._may_launch)
                self._launching += 1
                self._apply()  # announced as running before it starts, unless another process started timing
                if self._may_launch():
                    break
                self._launching -= 1
                self._apply()
            try:
                yield
            finally:
                self._launching -= 1
                self._apply()

    def cgroup_parent(self) -> Path | None:
        """The freezer cgroup every build sandbox is frozen with: a build's own cgroup is made beneath it (v2), or its
        own freezer is (v1 controllers: ``SandboxCgroup.create``); None where there is none."""
        return self._cgroup.path if self._cgroup is not None else None

    def register(self, pid: int, marker: str, cgroup: SandboxCgroup | None = None) -> None:
        """A new build sandbox, before it runs any untrusted code (inside ``launching``). ``cgroup``: its own, if it has
        one: when its freezer lies beneath ``cgroup_parent()``, this group's freeze reaches it; else it is put in this
        group, or, where that fails, frozen by signals (its cgroup's members among them)."""
        self._builds.add(pid)
        if self._cgroup is not None and cgroup is not None and cgroup.freezer is not None \
                and cgroup.freezer.path.parent == self._cgroup.path:
            return
        if self._cgroup is not None:
            try:
                self._cgroup.add(pid)
                return
            except OSError as err:
                logger.warning("could not put build sandbox %d in %s (%s): freezing it by signals", pid,
                               self._cgroup.path, err)
        self._sandboxes[pid] = (marker, cgroup)

    def unregister(self, pid: int) -> None:
        with self._lock:
            self._sandboxes.pop(pid, None)
            self._builds.discard(pid)
            self._apply()

    @contextmanager
    def timing(self, device: str | None = None) -> Iterator[None]:
        """Every build sandbox kept off the measurement for the duration: stopped, or (partitioned) confined to
        its cores, where only a sandbox that could not be put in the cgroup is stopped. Nested or concurrent
        uses share one freeze. Host-wide, every other evalkit process's builds are frozen before it starts, and
        ``device`` (a GPU's ``CUDA_VISIBLE_DEVICES`` entry) is first waited for until no other process times on it."""
        with self._host.device_turn(device) if self._host is not None and device else nullcontext():
            with self._lock:
                self._timers += 1
                if self._timers == 1:
                    self._hold_token("timing", True)
                self._apply()
            if self._host is not None:
                self._host.wait_until_others_frozen(FREEZE_WAIT_S)
            try:
                yield
            finally:
                with self._lock:
                    self._timers -= 1
                    if self._timers == 0:
                        self._hold_token("timing", False)
                        self._apply()
                        self._lock.notify_all()

    def wait_while_frozen(self) -> None:
        """Block the calling thread (a build's watcher in the judge's process) while any judge times, so it
        takes no CPU, and no interpreter lock, from that judge (partitioned builds run on meanwhile)."""
        with self._lock:
            self._lock.wait_for(lambda: self._timers == 0 and not self._foreign)

    def paused_s(self) -> float:
        """Seconds builds have spent frozen so far (a build's time limit excludes them)."""
        with self._lock:
            running = time.monotonic() - self._frozen_since if self._frozen_since is not None else 0.0
            return self._paused_total_s + running

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            self._lock.notify_all()
        if self._watcher is not None and self._watcher is not threading.current_thread():
            self._watcher.join()
        with self._lock:
            for kind in list(self._tokens):
                self._hold_token(kind, False)
        if self._cgroup is not None:
            self._cgroup.remove()

    def _may_launch(self) -> bool:
        return not self._foreign and (self._timers == 0 or self.partitioned)

    def _wanted(self) -> str:
        if self._foreign or (self._timers and not self.partitioned):
            return FROZEN
        return PARTIAL if self._timers else THAWED

    def _apply(self) -> None:
        """Bring the builds to the state wanted now (call it holding the lock). Before builds may run again, this
        freezer says so host-wide and only then looks for another process's timing: one that began before is
        seen, one that begins after waits for this freezer to freeze them (``HostTiming.wait_until_others_frozen``)."""
        may_run = self._builds or self._launching
        if self._host is not None and self._wanted() != FROZEN and may_run and not self._closed.is_set():
            self._hold_token("running", True)
            self._foreign = self._foreign or self._host.others_timing()
        wanted = self._wanted()
        if wanted != THAWED and self._state == THAWED:
            # only sandboxes outside the cgroup, when there is one; a judge must not begin timing before they stop
            self._stopped, _ = stop_all(list(self._sandboxes), self._members, STOP_SETTLE_S)
        if self._cgroup is not None and (wanted == FROZEN) != self._cgroup_frozen:
            self._cgroup.set_frozen(wanted == FROZEN)
            self._cgroup_frozen = wanted == FROZEN
        if wanted == THAWED and self._state != THAWED:
            continue_all(list(self._sandboxes), self._stopped)
            self._stopped = set()
        self._count_pause(wanted == FROZEN or (wanted == PARTIAL and bool(self._stopped)))
        self._state = wanted
        if wanted == FROZEN or not may_run:
            self._hold_token("running", False)

    def _count_pause(self, paused: bool) -> None:
        if paused and self._frozen_since is None:
            self._frozen_since = time.monotonic()
        elif not paused and self._frozen_since is not None:
            self._paused_total_s += time.monotonic() - self._frozen_since
            self._frozen_since = None

    def _hold_token(self, kind: str, held: bool) -> None:
        if self._host is None or held == (kind in self._tokens):
            return
        if held:
            token = self._host.announce(kind)
            if token is not None:
                self._tokens[kind] = token
        else:
            self._tokens.pop(kind).release()

    def _watch(self) -> None:
        """Follow the other processes' timings (every ``POLL_S``); idle while this run's own freeze holds anyway."""
        while not self._closed.wait(POLL_S):
            with self._lock:
                self._lock.wait_for(lambda: self._closed.is_set() or not (self._timers and not self.partitioned))
            foreign = self._host.others_timing()
            with self._lock:
                if foreign != self._foreign and not self._closed.is_set():
                    self._foreign = foreign
                    self._apply()
                    self._lock.notify_all()

    def _members(self) -> set[int]:
        """Every live process of the sandboxes frozen by signals: their sessions, markers and cgroups, read now."""
        found: set[int] = set()
        reading = ProcessTable(max_age_s=0.0)  # one fresh reading of /proc for every sandbox
        for pid, (marker, cgroup) in self._sandboxes.items():
            found.update(reading.members(pid, marker))
            found |= cgroup.pids() if cgroup is not None else set()
        return found


def partition_builds(freezer: BuildFreezer, device: str, build_cpus: tuple[int, ...]) -> None:
    """Let builds run on while a GPU judge times, where the kernel keeps them off its cores (a cpuset) and off its
    GPU (Landlock ABI 5+ denies them the device files and their ioctls). A CPU judge's timed work shares the
    memory system with the builds, so there they are always frozen (above)."""
    if device == "cuda" and build_cpus and abi_version() >= LANDLOCK_ABI_FOR_DEVICES:
        freezer.partition(build_cpus)
    logger.info("builds are kept off timings by %s", freezer.isolation)
