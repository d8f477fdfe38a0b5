"""BuildFreezer: a build sandbox gets no CPU while a judge times, by cgroup or by signals, and its time
limit does not run meanwhile."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from evalkit.sandbox.cgroup import FREEZER_ROOTS, remove_run_cgroups
from evalkit.sandbox.freezer import LOOSE, BuildFreezer
from evalkit.sandbox.launcher import MARKER_VARIABLE, Limits, UntrustedProcess
from process_helpers import children

# Two spinning processes, the sandbox and a child, started once told to: like a build, which runs no code of
# its own before it is registered (a fork before that would leave the child outside the freezer's cgroup).
SPIN = "import os, sys\nsys.stdin.readline()\nos.fork()\nwhile True: pass\n"


def _cpu_ticks(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total


@pytest.mark.parametrize("use_cgroup", [True, False], ids=["cgroup-if-available", "signals"])
def test_a_spinning_build_gets_no_cpu_while_a_judge_times(use_cgroup):
    freezer = BuildFreezer(f"test-{uuid.uuid4().hex[:8]}", use_cgroup=use_cgroup)
    marker = f"{MARKER_VARIABLE}=test.{uuid.uuid4().hex}"
    with freezer.launching():
        proc = subprocess.Popen([sys.executable, "-c", SPIN], start_new_session=True, stdin=subprocess.PIPE,
                                env={**os.environ, **dict([marker.split("=", 1)])})
        freezer.register(proc.pid, marker)
    proc.stdin.write(b"go\n")
    proc.stdin.flush()
    try:
        time.sleep(0.3)
        pids = [proc.pid, *children(proc.pid)]
        assert len(pids) == 2
        with freezer.timing():
            before = _cpu_ticks(pids)
            time.sleep(0.5)
            frozen = _cpu_ticks(pids) - before
        time.sleep(0.5)
        thawed = _cpu_ticks(pids) - before - frozen
        assert frozen == 0, f"{freezer.mechanism}: the build ran {frozen} ticks while frozen"
        assert thawed > 0, "the build never resumed"
        assert freezer.paused_s() == pytest.approx(0.5, abs=0.2)
    finally:
        for pid in pids:
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        proc.wait()
        freezer.close()


def test_a_new_build_waits_until_timing_ends():
    freezer = BuildFreezer(f"test-{uuid.uuid4().hex[:8]}", use_cgroup=False)
    started: list[float] = []

    def launch() -> None:
        with freezer.launching():
            started.append(time.monotonic())

    with freezer.timing():
        thread = threading.Thread(target=launch)
        thread.start()
        time.sleep(0.3)
        assert not started
        ended = time.monotonic()
    thread.join(5)
    assert started and started[0] >= ended
    freezer.close()


def test_a_timing_that_outlives_the_runs_clean_up_ends_without_error():
    # A stop signal closes the freezer (removing its cgroup) while a judge thread may still be timing: leaving
    # the timing then must not raise (it did, and the judge thread's error aborted the interpreter at exit).
    freezer = BuildFreezer(f"test-{uuid.uuid4().hex[:8]}")
    with freezer.timing():
        freezer.close()
    assert freezer.paused_s() >= 0.0


# A build that counts at import, and a child that left its session and its environment (and so the sandbox's marker):
# each writes its count into the build's extension folder, where the test reads it.
COUNT = "import os, sys\nfd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)\ncount = 0\n" \
        "while True:\n    count += 1\n    os.pwrite(fd, b'%20d' % count, 0)\n"
ESCAPING_BUILD = f"""
import os, sys
folder = os.environ["TORCH_EXTENSIONS_DIR"]
os.makedirs(folder, exist_ok=True)
if os.fork() == 0:
    os.setsid()
    os.execve(sys.executable, [sys.executable, "-c", {COUNT!r}, folder + "/escaped"], {{}})
sys.argv = ["build", folder + "/build"]
exec({COUNT!r})
"""


def _running_with(argument: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and argument.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            pass
    return found


def _counts(cache: Path) -> dict[str, int]:
    found = {}
    for path in cache.glob("*/extensions/*"):
        try:
            found[path.name] = int(path.read_bytes() or b"0")
        except (OSError, ValueError):
            pass
    return found


@pytest.mark.parametrize("use_cgroup", [True, False], ids=["cgroup-if-available", "signals"])
def test_a_build_and_a_child_that_left_its_session_and_marker_make_no_progress_while_a_judge_times(tmp_path,
                                                                                                    use_cgroup):
    # Through the build stage itself, so the build sandbox is registered as a run registers it (its own cgroup made
    # for the freezer's group): on a host whose controllers are v1 beside a v2 tree, builds were never frozen at all.
    from evalkit.judge import builder
    from evalkit.sandbox.cgroup import SandboxCgroup
    from evalkit.sandbox.launcher import Limits
    from process_helpers import sandboxes, wait_for

    probe = SandboxCgroup.create("probe", f"test-freezer-probe-{uuid.uuid4().hex[:8]}", 2**30, 8)
    if probe is None:
        pytest.skip("no cgroup can be made here: a process that left the session and the marker escapes signals")
    probe.remove()
    freezer = BuildFreezer(f"test-{uuid.uuid4().hex[:8]}", use_cgroup=use_cgroup, host_wide=False)
    limits = Limits(group=f"test-freezer-{uuid.uuid4().hex[:8]}")
    cache = tmp_path / "cache"
    build = threading.Thread(target=builder.build, args=(ESCAPING_BUILD, cache, "cpu", 120, limits),
                             kwargs={"freezer": freezer})
    build.start()
    try:
        wait_for(lambda: len(_counts(cache)) == 2 and all(_counts(cache).values()), 60, "the build and its child")
        for _ in range(2):
            with freezer.timing():
                frozen = _counts(cache)
                time.sleep(0.3)
                assert _counts(cache) == frozen, f"{freezer.mechanism}: the build counted on while frozen"
            wait_for(lambda: all(_counts(cache)[name] > frozen[name] for name in frozen), 30, "both to count again")
    finally:  # the build's worker, and the child holding its socket: then the build sees it end
        for pid in [*sandboxes(limits.group), *_running_with(f"{cache}/")]:
            os.kill(pid, 9)
        build.join(60)
        freezer.close()
    assert not build.is_alive()
    settled = _counts(cache)
    time.sleep(0.3)
    assert _counts(cache) == settled, "a process of the build outlived it"


def _cgroup_lines(pid: int) -> list[str]:
    """``/proc/<pid>/cgroup``: one ``id:controllers:path`` line per hierarchy the process is in."""
    return Path(f"/proc/{pid}/cgroup").read_text().splitlines()


def _under(freezer: BuildFreezer, pid: int) -> bool:
    """Whether ``pid`` sits in the freezer's cgroup or beneath it (where a freeze of that cgroup reaches)."""
    folder = freezer._cgroup.path  # noqa: SLF001 - the cgroup the freeze writes to
    v1 = freezer.mechanism == "cgroup1"
    root = max((root for kind, root in FREEZER_ROOTS if kind == freezer.mechanism and folder.is_relative_to(root)),
               key=lambda root: len(root.parts))  # /sys/fs/cgroup/unified, not /sys/fs/cgroup, on a hybrid host
    wanted = "/" + str(folder.relative_to(root))
    for line in _cgroup_lines(pid):
        _, controllers, path = line.split(":", 2)
        if ("freezer" in controllers.split(",") if v1 else controllers == "") and \
                (path == wanted or path.startswith(wanted + "/")):
            return True
    return False


def test_a_build_sandbox_is_frozen_with_the_run_whatever_hierarchy_its_own_cgroup_is_in(tmp_path):
    # A host with v1 controllers and a v2 hierarchy beside them (this project's machines): the sandbox's own
    # cgroup is v1 (memory, pids), the run's freezer v2. Registered as being in a cgroup of its own, it was left
    # outside the freezer's, so no timing ever froze a build there.
    freezer = BuildFreezer(f"test-{uuid.uuid4().hex[:8]}", host_wide=False)
    if freezer.mechanism == "signals":
        freezer.close()
        pytest.skip("no writable freezer cgroup on this machine")
    group = f"test-{uuid.uuid4().hex[:8]}"
    try:
        with freezer.launching():
            worker = UntrustedProcess(tmp_path, Limits(group=group), {}, freezer=freezer)
            freezer.register(worker.pid, worker.marker, worker.cgroup)
        try:
            assert _under(freezer, worker.pid), _cgroup_lines(worker.pid)
        finally:
            worker.close()
    finally:
        freezer.close()
        remove_run_cgroups(group)


def test_a_process_without_a_cgroup_of_its_own_never_sits_in_the_runs_v2_cgroup_itself():
    # v2 lets a cgroup hold processes or give its children controllers, not both: torch's header compiles, put in
    # the run's build cgroup itself, failed with EBUSY once a build's own cgroup had enabled memory and pids there
    # (and, put there first, would have made every later build's cgroup fail).
    freezer = BuildFreezer(f"test-{uuid.uuid4().hex[:8]}", host_wide=False)
    if freezer.mechanism != "cgroup2":
        freezer.close()
        pytest.skip(f"the run's freezer here is {freezer.mechanism}, not a v2 cgroup")
    marker = f"{MARKER_VARIABLE}=test.{uuid.uuid4().hex}"
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.readline()"], stdin=subprocess.PIPE,
                            start_new_session=True)
    own = freezer._cgroup.path  # noqa: SLF001 - the run's build cgroup
    try:
        with freezer.launching():
            freezer.register(proc.pid, marker)
        assert (own / "cgroup.procs").read_text().split() == []
        assert _under(freezer, proc.pid), _cgroup_lines(proc.pid)
        with freezer.timing():
            assert "frozen 1" in (own / LOOSE / "cgroup.events").read_text()
    finally:
        proc.kill()
        proc.wait()
        freezer.unregister(proc.pid)
        freezer.close()
    assert not own.exists(), "the run's cgroup (and its leaf) removed with the freezer"
