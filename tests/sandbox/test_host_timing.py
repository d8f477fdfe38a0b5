"""Host-wide build isolation (evalkit/sandbox/host_timing.py): a judge timing in one process keeps the builds of
another process frozen, two processes never time on one GPU at once, and a process that dies while timing leaves
nothing frozen. Every check waits for a state it can observe (a process's /proc state, a line from a process),
bounded only so that a broken feature fails rather than hangs."""

from __future__ import annotations

import fcntl
import os
import struct
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from evalkit.sandbox.freezer import BuildFreezer
from evalkit.sandbox.host_timing import FOLDER_ENV, HostTiming, open_registry
from evalkit.sandbox.launcher import MARKER_VARIABLE
from evalkit.sandbox.processes import process_state
from process_helpers import children

ROOT = Path(__file__).resolve().parents[2]
BOUND_S = 60.0  # how long a state that must come may take (on a loaded machine); reached only when broken
QUIET_S = 1.0  # how long a state that must not come is given to come anyway

# Another evalkit process: its freezer times (on GPU "0" with "gpu") while told to, saying when it is timing. It waits
# for other processes' builds to freeze as long as any state that must come may take here (BOUND_S), not the judge's
# 5 s: on a loaded machine that bound is a race (the builds froze late, the timer had gone on), not the feature.
TIMER = """
import sys
from evalkit.sandbox import freezer as freezing
freezing.FREEZE_WAIT_S = %r
freezer = freezing.BuildFreezer("host-test-timer", use_cgroup=False)
device = "0" if "gpu" in sys.argv else None
print("asking", flush=True)
with freezer.timing(device=device):
    print("timing", flush=True)
    sys.stdin.readline()
print("done", flush=True)
freezer.close()
"""
SPIN = "import os, sys\nsys.stdin.readline()\nos.fork()\nwhile True: pass\n"


class Timer:
    """A process of its own whose judge times until ``stop()``."""

    def __init__(self, folder: Path, *args: str) -> None:
        env = {**os.environ, FOLDER_ENV: str(folder), "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen([sys.executable, "-c", TIMER % BOUND_S, *args], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=env)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.strip())

    def said(self, word: str, within_s: float = BOUND_S) -> bool:
        return _until(lambda: word in self.lines, within_s)

    def stop(self) -> None:
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()

    def end(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


class Build:
    """A spinning build sandbox (and a child) of ``freezer``, registered as a build is."""

    def __init__(self, freezer: BuildFreezer) -> None:
        marker = f"{MARKER_VARIABLE}=test.{uuid.uuid4().hex}"
        with freezer.launching():
            self.proc = subprocess.Popen([sys.executable, "-c", SPIN], start_new_session=True, stdin=subprocess.PIPE,
                                         env={**os.environ, **dict([marker.split("=", 1)])})
            freezer.register(self.proc.pid, marker)
        self.proc.stdin.write(b"go\n")
        self.proc.stdin.flush()
        assert _until(lambda: len(self.pids()) == 2, BOUND_S), "the build's child never started"

    def pids(self) -> list[int]:
        return [self.proc.pid, *children(self.proc.pid)]

    def stopped(self) -> bool:
        return all(process_state(pid) == "T" for pid in self.pids())

    def running(self) -> bool:
        return not any(process_state(pid) == "T" for pid in self.pids())

    def end(self) -> None:
        for pid in self.pids():
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        self.proc.wait()


def _until(condition, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


@pytest.fixture
def registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "registry"
    monkeypatch.setenv(FOLDER_ENV, str(folder))
    return folder


@pytest.fixture
def freezer(registry: Path):
    freezer = BuildFreezer(f"test-{uuid.uuid4().hex[:8]}", use_cgroup=False)
    assert freezer.host_folder == registry
    yield freezer
    freezer.close()


def test_another_processes_timing_freezes_this_processes_builds_before_it_starts(registry, freezer):
    build, timer = Build(freezer), Timer(registry)
    try:
        assert build.running()
        assert timer.said("timing")
        # Its timing began only once this process's builds were stopped: no wait here.
        assert build.stopped(), f"build states {[process_state(pid) for pid in build.pids()]} while another process times"
        timer.stop()
        assert timer.said("done")
        assert _until(build.running, BOUND_S), "the build stayed frozen after the other process's timing ended"
        assert freezer.paused_s() > 0.0
    finally:
        timer.end()
        build.end()


def test_a_process_killed_while_timing_leaves_no_build_frozen(registry, freezer):
    build, timer = Build(freezer), Timer(registry)
    try:
        assert timer.said("timing") and build.stopped()
        timer.proc.kill()
        timer.proc.wait()
        assert [path.name for path in registry.iterdir() if path.name.startswith("timing.")], \
            "the killed process's token file should be left behind (this test is about a stale one)"
        assert _until(build.running, BOUND_S), "a process killed while timing left the builds frozen"
        with freezer.timing():  # and this process's own timing neither waits for it nor fails
            assert build.stopped()
        assert _until(build.running, BOUND_S)
    finally:
        timer.end()
        build.end()


def test_a_new_build_waits_while_another_process_times(registry, freezer):
    timer = Timer(registry)
    started = threading.Event()

    def launch() -> None:
        with freezer.launching():
            started.set()

    try:
        assert timer.said("timing")
        thread = threading.Thread(target=launch)
        thread.start()
        assert not started.wait(QUIET_S), "a build started while another process was timing"
        timer.stop()
        assert started.wait(BOUND_S), "the build never started after the other process's timing ended"
        thread.join()
    finally:
        timer.end()


def test_two_processes_never_time_on_one_gpu_at_once(registry):
    first = Timer(registry, "gpu")
    second = None
    try:
        assert first.said("timing")
        second = Timer(registry, "gpu")
        assert second.said("asking")
        assert not second.said("timing", within_s=QUIET_S), "two processes timed on one GPU at once"
        first.stop()
        assert second.said("timing"), "the second process never got the GPU"
        second.stop()
        assert second.said("done")
    finally:
        first.end()
        if second is not None:
            second.end()


def test_judges_racing_for_one_gpu_take_turns(registry):
    registry.mkdir()
    inside, overlaps, turns = [0], [], []
    guard = threading.Lock()

    def judge(host: HostTiming) -> None:
        for _ in range(4):
            with host.device_turn("GPU-0f/1"):
                with guard:
                    inside[0] += 1
                    overlaps.append(inside[0])
                time.sleep(0.005)
                with guard:
                    inside[0] -= 1
                turns.append(host.id)

    threads = [threading.Thread(target=judge, args=(HostTiming(registry),)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(BOUND_S)
    assert len(turns) == 16, "some judge never got its turns"
    assert max(overlaps) == 1, "two judges held one GPU at once"
    assert not list(registry.iterdir()), "a turn left its token behind"


def test_a_token_nobody_write_locks_counts_for_nothing(registry):
    # A stale token (its maker died), and one a sandbox could reach: opened for reading, read-locked.
    registry.mkdir(mode=0o700)
    (registry / "timing.stale").write_text("")
    (registry / "running.stale").write_text("")
    with open(registry / "timing.stale") as held:
        fcntl.fcntl(held, fcntl.F_OFD_SETLK, struct.pack("hhqqi4x", fcntl.F_RDLCK, os.SEEK_SET, 0, 0, 0))
        host = HostTiming(registry)
        assert not host.others_timing()
        assert host.wait_until_others_frozen(0.0)
        token = HostTiming(registry).announce("timing")
        assert host.others_timing()
        token.release()
        assert not host.others_timing()


def test_a_staged_token_its_maker_left_is_removed_once_old_and_a_fresh_one_is_left_alone(registry):
    # A process that died between making a token's file and renaming it left it under the staged name, which no
    # scan counts; a scan removes it once it is older than a live token's maker could take to rename it.
    from evalkit.sandbox.host_timing import STAGED, STALE_S

    host = open_registry()
    assert host is not None
    old, fresh = registry / f"{STAGED}timing.dead", registry / f"{STAGED}timing.making"
    old.write_text("")
    fresh.write_text("")
    past = time.time() - 2 * STALE_S
    os.utime(old, (past, past))
    assert not host.others_timing()
    assert not old.exists() and fresh.exists()


def test_a_registry_other_users_could_tamper_with_is_refused(tmp_path, caplog):
    folder = tmp_path / "open"
    folder.mkdir()
    folder.chmod(0o777)  # writable by everyone, no sticky bit: anyone could remove a timing's token
    assert open_registry(folder) is None
    assert "sticky bit" in caplog.text and FOLDER_ENV in caplog.text
    folder.chmod(0o1777)
    assert open_registry(folder) is not None


def test_another_processes_timing_freezes_this_processes_build_cgroup(registry):
    freezer = BuildFreezer(f"test-{uuid.uuid4().hex[:8]}")
    if freezer.mechanism == "signals":
        freezer.close()
        pytest.skip("no writable cgroup here: the signals case is the tests above")
    state = (freezer._cgroup.path / ("cgroup.events" if freezer.mechanism == "cgroup2" else "freezer.state"))
    frozen = "frozen 1" if freezer.mechanism == "cgroup2" else "FROZEN"
    build, timer = Build(freezer), Timer(registry)
    try:
        assert frozen not in state.read_text()
        assert timer.said("timing")
        assert frozen in state.read_text(), f"{freezer.mechanism}: builds ran while another process timed"
        timer.stop()
        assert _until(lambda: frozen not in state.read_text(), BOUND_S), "the builds stayed frozen"
    finally:
        timer.end()
        build.end()
        freezer.close()


def test_a_token_takes_its_name_only_once_it_is_live(registry, monkeypatch):
    # A scan that found a timing's want made but not yet locked took it for none, and started a use beside the timing
    # (tests/sandbox/test_gpu_gate.py failed so on a loaded machine). A token is locked under a name no scan reads,
    # then renamed: its name never shows before it is live.
    from evalkit.sandbox import host_timing

    timing, scan = open_registry(), open_registry()
    assert timing is not None and scan is not None
    renames: list[tuple[bool, bool]] = []  # at each rename: whether the name was there, whether the file was live
    real_rename = os.rename

    def rename(source: Path, target: Path) -> None:
        renames.append((Path(target).exists(), scan._is_live(Path(source))))
        real_rename(source, target)

    monkeypatch.setattr(host_timing.os, "rename", rename)
    with timing.wanting("0"):
        assert renames == [(False, True)]
        assert scan.timing_wanted("0")
    assert not scan.timing_wanted("0") and not list(registry.iterdir())
