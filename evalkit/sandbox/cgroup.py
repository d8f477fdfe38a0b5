"""Trusted side: a cgroup of its own for every sandbox, where the machine allows one (cgroup v2 or v1, written by
root or a delegated user).

The kernel counts every process of a sandbox in its cgroup, whatever it does: a process that re-executes itself
with a clean environment and ``setsid`` (and so escapes the marker sweep) is still a member, and is killed with
it. Its memory is counted and bounded by the kernel, page cache and shared memory included: a ``memfd`` written
and never mapped (which the resident-size poll misses) counts against ``memory.max``. Its tasks are bounded too
(``pids.max``: a fork bomb stops at the kernel, not at the next poll). The /proc sweep and the resident-size poll
stay, as the fallback where no cgroup can be made; ``SandboxCgroup.walls`` says which held. Its CPU time is bounded
too, where the cpu controller is there: at most as many cores' worth as the cores it was pinned to (``cpu.max``,
v1 ``cpu.cfs_quota_us``), which honest code pinned there never reaches, but a process that widens its own affinity
cannot pass either. Builds are also frozen while a judge times (``freezer``).

Every sandbox with a cgroup also has a freezer (``CgroupFreezer``): the judge stops a worker between its requests by
freezing it, which stops every process of the sandbox whatever its process group, session or environment, and its
children are born frozen. v2: the sandbox's own cgroup (``cgroup.freeze``); where the controllers are v1, a cgroup of
its own in the v2 tree mounted beside them (``/sys/fs/cgroup/unified``), else in v1's ``freezer`` hierarchy.

v2: ``<root>/evalkit-<group>-sandboxes/<sandbox>`` (memory and pids enabled for the children of the run's group;
a build's cgroup sits instead under the run's build freezer group, so freezing that freezes it). v1: one cgroup
``evalkit-<group>-<sandbox>`` per sandbox in the ``memory`` and ``pids`` hierarchies, and ``cpu`` where it is mounted,
and its freezer of that name (a build's: ``<sandbox>`` under the run's build freezer group).
"""

from __future__ import annotations

import errno
import logging
import os
import signal
import time
from pathlib import Path

from evalkit.sandbox.processes import pauses, rest

logger = logging.getLogger(__name__)

V2_ROOT, V1_ROOT = Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup")
# Where a freezer-only cgroup can be made, best first: the v2 tree (alone, or beside v1 controllers), v1's freezer.
FREEZER_ROOTS = (("cgroup2", V2_ROOT), ("cgroup2", V2_ROOT / "unified"), ("cgroup1", V1_ROOT / "freezer"))
FREEZE_WAIT_S = 5.0  # how long a freeze waits for every process to stop (one in uninterruptible sleep stops on waking)
TASKS_PER_PROCESS = 64  # pids.max counts threads: a torch worker runs dozens (OpenMP, CUDA)
CPU_PERIOD_US = 100_000
# A sandbox whose memory the kernel cannot reclaim (anonymous and shared: no swap) is this share of its limit while
# it presses on it can only thrash, reclaiming the few pages it still runs from, until the kernel's OOM kill comes,
# which on a loaded host may outlast its stage's limit (a memory hog once came back "timeout" in CI). The watchdog
# kills it at once (``SandboxCgroup.cornered``).
CORNERED_SHARE, AT_LIMIT_SHARE = 0.9, 0.98


def removed(err: OSError) -> bool:
    """Whether ``err`` says the cgroup was removed meanwhile: its files gone (ENOENT), or going while another thread
    removes it (ENODEV: a run's clean-up thawed a sandbox's freezer as the sandbox's own kill removed it)."""
    return err.errno in (errno.ENOENT, errno.ENODEV)


class CgroupFreezer:
    """The freezer of one cgroup (v2 ``cgroup.freeze``, v1 ``freezer.state``): every process in it and in the cgroups
    beneath it stopped, or let run, as one. A frozen v2 process still dies of SIGKILL; a frozen v1 one only once
    thawed (``SandboxCgroup.kill`` thaws after killing)."""

    def __init__(self, kind: str, path: Path) -> None:
        self.kind, self.path = kind, path

    @classmethod
    def create(cls, name: str, parent: Path | None = None) -> "CgroupFreezer | None":
        """A new cgroup ``name`` with a freezer: beneath ``parent`` (a freezer cgroup: frozen with it) when given, else
        in the first of ``FREEZER_ROOTS`` that is mounted and writable; None where there is none."""
        if parent is not None:
            kind = "cgroup2" if (parent / "cgroup.freeze").exists() else "cgroup1"
            places = [(kind, parent / name)] if (parent / ("cgroup.freeze" if kind == "cgroup2" else "freezer.state")
                                                 ).exists() else []
        else:
            places = [(kind, root / name) for kind, root in FREEZER_ROOTS
                      if (root / "cgroup.procs").exists() and os.access(root, os.W_OK)]
        for kind, path in places:
            try:
                path.mkdir(parents=True, exist_ok=True)
            except OSError as err:
                logger.debug("no freezer cgroup %s: %s", path, err)
                continue
            made = cls(kind, path)
            if (path / made._control).exists():
                return made
            made.remove()
        return None

    @property
    def _control(self) -> str:
        return "cgroup.freeze" if self.kind == "cgroup2" else "freezer.state"

    def add(self, pid: int) -> None:
        (self.path / "cgroup.procs").write_text(f"{pid}\n")

    def freeze(self, wait_s: float = FREEZE_WAIT_S) -> bool:
        """Freeze the cgroup and return once the kernel says every process in it is frozen: True, or False after
        ``wait_s`` (a process in uninterruptible sleep freezes only once it wakes). A cgroup removed (with its sandbox,
        or by a run's clean-up) holds nothing left to run: True."""
        try:
            (self.path / self._control).write_text("1\n" if self.kind == "cgroup2" else "FROZEN\n")
            return self._wait_until_frozen(wait_s)
        except OSError as err:
            if not removed(err):
                raise
            return True

    def thaw(self) -> None:
        """Let the cgroup run again (at once: the kernel wakes its processes as it returns)."""
        try:
            (self.path / self._control).write_text("0\n" if self.kind == "cgroup2" else "THAWED\n")
        except OSError as err:  # removed: nothing left to thaw
            if not removed(err):
                raise

    def frozen(self) -> bool:
        """Whether the kernel says every process of the cgroup is frozen now."""
        try:
            return self._wait_until_frozen(0.0)
        except OSError:
            return False

    def _wait_until_frozen(self, wait_s: float) -> bool:
        """Until ``cgroup.events`` says ``frozen 1`` (v2), or ``freezer.state`` ``FROZEN`` (v1: ``FREEZING`` until every
        task is), read again after ``processes.pauses`` (at once for 2 ms, then 20 us growing to 1 ms): a poll on
        ``cgroup.events`` would wait up to 10 ms, the kernel's least interval between two notifications of one file."""
        wanted = b"frozen 1" if self.kind == "cgroup2" else b"FROZEN\n"
        deadline, pause = time.monotonic() + wait_s, pauses()
        fd = os.open(self.path / ("cgroup.events" if self.kind == "cgroup2" else "freezer.state"), os.O_RDONLY)
        try:
            while wanted not in os.pread(fd, 4096, 0):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                rest(min(next(pause), remaining))
            return True
        finally:
            os.close(fd)

    def remove(self) -> None:
        """Thaw and remove the cgroup (it goes only once empty; one beneath it keeps it)."""
        self.thaw()
        try:
            self.path.rmdir()
        except OSError as err:
            logger.debug("freezer cgroup %s not removed: %s", self.path, err)


class SandboxCgroup:
    """One sandbox's cgroup(s): v2, one folder; v1, one per hierarchy (memory, pids, and cpu where mounted); and its
    freezer (``freezer``; None where none could be made)."""

    def __init__(self, kind: str, paths: dict[str, Path], freezer: CgroupFreezer | None = None) -> None:
        self.kind, self.paths, self.freezer = kind, paths, freezer

    @classmethod
    def create(cls, name: str, group: str, memory_bytes: int, max_processes: int,
               parent: Path | None = None, cpu_cores: int | None = None) -> "SandboxCgroup | None":
        """A cgroup for sandbox ``name`` of the run ``group`` with its limits and its freezer, or None where none can be
        made. ``parent``: the freezer cgroup of the run's builds (``freezer.BuildFreezer.cgroup_parent``), which the
        sandbox is frozen with: on v2 its cgroup is made beneath it, elsewhere its freezer. ``cpu_cores``: the cores'
        worth of CPU time it may use (default: every core of the machine)."""
        try:
            if (V2_ROOT / "cgroup.controllers").exists():
                made = cls._create_v2(parent or V2_ROOT / f"evalkit-{group}-sandboxes", name, memory_bytes,
                                      max_processes)
            else:
                made = cls._create_v1(f"evalkit-{group}-{name}", memory_bytes, max_processes)
                if made is not None:
                    made.freezer = CgroupFreezer.create(name, parent) if parent is not None else \
                        CgroupFreezer.create(f"evalkit-{group}-{name}")  # named as its v1 cgroups are
        except OSError as err:
            logger.debug("no cgroup for sandbox %s: %s", name, err)
            return None
        if made is not None:
            made._bound_cpu(cpu_cores or os.cpu_count() or 1)
        return made

    @classmethod
    def _create_v2(cls, parent: Path, name: str, memory_bytes: int, max_processes: int) -> "SandboxCgroup | None":
        parent.mkdir(exist_ok=True)
        wanted = {"memory", "pids"}
        enabled = set((parent / "cgroup.subtree_control").read_text().split())
        if not wanted <= enabled:
            (parent / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in sorted(wanted - enabled)))
        if "cpu" not in enabled:  # optional: a parent may not have it to hand down
            _write_if_there(parent / "cgroup.subtree_control", "+cpu")
        path = parent / name
        path.mkdir()
        group = cls("cgroup2", {"memory": path, "pids": path, **({"cpu": path} if (path / "cpu.max").exists() else {})},
                    CgroupFreezer("cgroup2", path) if (path / "cgroup.freeze").exists() else None)
        group._limit(memory_bytes, max_processes)
        return group

    @classmethod
    def _create_v1(cls, name: str, memory_bytes: int, max_processes: int) -> "SandboxCgroup | None":
        paths = {}
        for controller in ("memory", "pids"):
            hierarchy = V1_ROOT / controller
            if not (hierarchy / "cgroup.procs").exists():
                return None
            paths[controller] = hierarchy / name
        if (V1_ROOT / "cpu" / "cgroup.procs").exists():
            paths["cpu"] = V1_ROOT / "cpu" / name
        group = cls("cgroup1", paths)
        for path in paths.values():
            path.mkdir()
        group._limit(memory_bytes, max_processes)
        return group

    def _limit(self, memory_bytes: int, max_processes: int) -> None:
        memory, pids = self.paths["memory"], self.paths["pids"]
        (pids / "pids.max").write_text(f"{max_processes * TASKS_PER_PROCESS}\n")
        if self.kind == "cgroup2":
            (memory / "memory.max").write_text(f"{memory_bytes}\n")
            _write_if_there(memory / "memory.swap.max", "0\n")
        else:
            (memory / "memory.limit_in_bytes").write_text(f"{memory_bytes}\n")
            _write_if_there(memory / "memory.memsw.limit_in_bytes", f"{memory_bytes}\n")

    def _bound_cpu(self, cores: int) -> None:
        """At most ``cores`` cores' worth of CPU time, where the cpu controller is there (else no CPU bound)."""
        path = self.paths.get("cpu")
        if path is None:
            return
        quota = cores * CPU_PERIOD_US
        try:
            if self.kind == "cgroup2":
                (path / "cpu.max").write_text(f"{quota} {CPU_PERIOD_US}\n")
            else:
                (path / "cpu.cfs_period_us").write_text(f"{CPU_PERIOD_US}\n")
                (path / "cpu.cfs_quota_us").write_text(f"{quota}\n")
        except OSError as err:
            logger.debug("no CPU bound for cgroup %s: %s", path, err)
            del self.paths["cpu"]

    @property
    def walls(self) -> str:
        frozen_by = "; frozen by signals" if self.freezer is None else \
            ", freezer" if self.freezer.path == self.paths["pids"] else f"; freezer: {self.freezer.kind}"
        return f"{self.kind} (memory, tasks{', cpu time' if 'cpu' in self.paths else ''}{frozen_by})"

    def add(self, pid: int) -> None:
        """Put ``pid`` in the sandbox's cgroup(s): before it runs anything untrusted; its children are born inside."""
        for path in set(self.paths.values()) | ({self.freezer.path} if self.freezer else set()):
            (path / "cgroup.procs").write_text(f"{pid}\n")

    def pids(self) -> set[int]:
        """Every live process of the sandbox, wherever it moved its session or environment."""
        try:
            return {int(line) for line in (self.paths["pids"] / "cgroup.procs").read_text().split()}
        except (OSError, ValueError):
            return set()

    def memory_bytes(self) -> int:
        """What the kernel charges the sandbox: anonymous memory, page cache and shared memory (memfd) alike."""
        name = "memory.current" if self.kind == "cgroup2" else "memory.usage_in_bytes"
        try:
            return int((self.paths["memory"] / name).read_text())
        except (OSError, ValueError):
            return 0

    def cornered(self, charged_bytes: int, limit_bytes: int) -> bool:
        """Whether the sandbox presses on its memory limit (``charged_bytes``, its ``memory_bytes``, within
        ``AT_LIMIT_SHARE`` of ``limit_bytes``) while the memory it cannot reclaim is ``CORNERED_SHARE`` of it: it can
        go on only by thrashing. (Not the limit's fail counts: a v1 cgroup held at its limit counted none on kernel
        6.18.)"""
        if charged_bytes < AT_LIMIT_SHARE * limit_bytes:
            return False
        stat = self._stat("memory.stat")
        own = stat.get("anon" if self.kind == "cgroup2" else "rss", 0) + stat.get("shmem", 0)
        return own >= CORNERED_SHARE * limit_bytes

    def _stat(self, name: str) -> dict[str, int]:
        """A memory file's "key value" lines as numbers; {} where it cannot be read."""
        try:
            lines = (self.paths["memory"] / name).read_text().splitlines()
        except OSError:
            return {}
        found = {}
        for line in lines:
            key, _, value = line.partition(" ")
            if value.isdigit():
                found[key] = int(value)
        return found

    def out_of_memory(self) -> bool:
        """Whether the kernel killed a process of the sandbox for going over its memory limit."""
        return self._stat("memory.events" if self.kind == "cgroup2" else "memory.oom_control").get("oom_kill", 0) > 0

    def kill(self) -> None:
        """SIGKILL every process of the sandbox (v2: ``cgroup.kill`` where the kernel has it, 5.14+)."""
        if self.kind == "cgroup2" and (self.paths["pids"] / "cgroup.kill").exists():
            _write_if_there(self.paths["pids"] / "cgroup.kill", "1\n")
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if self.freezer is not None:  # a frozen v1 process dies only once thawed; killed first, it runs nothing more
            self.freezer.thaw()

    def remove(self, wait_s: float = 2.0) -> None:
        """Kill what is left and remove the cgroup(s) (a cgroup goes only once empty)."""
        self.kill()
        deadline = time.monotonic() + wait_s
        while self.pids() and time.monotonic() < deadline:
            time.sleep(0.01)
        for path in set(self.paths.values()):
            try:
                path.rmdir()
            except OSError as err:
                logger.debug("cgroup %s not removed: %s", path, err)
        if self.freezer is not None and self.freezer.path not in self.paths.values():
            self.freezer.remove()


def _write_if_there(path: Path, text: str) -> None:
    try:
        path.write_text(text)
    except OSError:  # no swap accounting, or an older kernel
        pass


def host_oom_kills() -> int:
    """How many processes the kernel's OOM killer has killed on this host since boot (``/proc/vmstat``); 0 unknown."""
    try:
        with open("/proc/vmstat", encoding="ascii") as vmstat:
            for line in vmstat:
                if line.startswith("oom_kill "):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def sigkill_from_outside(oom_kills_before: int) -> str:
    """Who sent a SIGKILL that no limit of evalkit's sent (those say why), given ``host_oom_kills()`` when the sandbox
    started: the kernel's OOM killer if it ran on the host meanwhile, else someone outside evalkit."""
    if host_oom_kills() > oom_kills_before:
        return (": the kernel's OOM killer ran on the host meanwhile, and this sandbox was under its own memory "
                "limit: the host ran out of memory")
    return ": no limit of evalkit's was reached (those kill saying why): another process, or the host's OOM daemon"


def remove_run_cgroups(group: str) -> None:
    """Remove what is left of the cgroups of the run ``group``'s sandboxes (each is removed with its sandbox;
    a judge killed mid-run leaves its own behind), and the run's v2 parent."""
    parents = [V2_ROOT / f"evalkit-{group}-sandboxes"] if (V2_ROOT / "cgroup.controllers").exists() else []
    leftovers = [child for parent in parents if parent.is_dir() for child in parent.iterdir() if child.is_dir()]
    leftovers += [path for controller in ("memory", "pids", "cpu") if (V1_ROOT / controller / "cgroup.procs").exists()
                  for path in (V1_ROOT / controller).glob(f"evalkit-{group}-*")]
    freezers = [CgroupFreezer(kind, path) for kind, root in FREEZER_ROOTS[1:]  # the freezers beside v1 controllers
                if (root / "cgroup.procs").exists() for path in root.glob(f"evalkit-{group}-*")
                if path.name != f"evalkit-{group}-builds"]  # the run's build freezer is its BuildFreezer's
    for freezer in freezers:  # a frozen v1 process dies only once thawed
        freezer.thaw()
    for path in leftovers + parents:
        SandboxCgroup("cgroup2" if path.parent in parents else "cgroup1", {"memory": path, "pids": path}).remove(0.5)
    for freezer in freezers:
        freezer.remove()


def sandbox_cgroups() -> str:
    """Whether each sandbox gets a cgroup of its own here, in words (for the report's environment)."""
    probe = SandboxCgroup.create("probe", f"probe-{os.getpid()}", 2**30, 1)
    if probe is None:
        return ("none (no writable cgroup): processes found by session and marker, memory by resident size, "
                "frozen by signals")
    probe.remove(0.5)
    remove_run_cgroups(f"probe-{os.getpid()}")
    return f"one per sandbox, {probe.walls}"
