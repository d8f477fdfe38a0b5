"""A GPU's gate, host-wide (evalkit/sandbox/gpu_gate.py): non-timed work shares the GPU, a timing has it alone.

GPUs here are names only (no GPU is touched). Each check waits for a state it can observe (a token in the registry,
a line from a process, an event), bounded only so that a broken feature fails rather than hangs; none compares a
duration with a figure. Gates of one process stand for judges of different processes: each has its own registry
id, as a judge process has, and the registry's write locks are per open file, not per process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Iterator

import pytest

from evalkit.sandbox import gpu_gate
from evalkit.sandbox.freezer import BuildFreezer
from evalkit.sandbox.gpu_gate import GpuGate
from evalkit.sandbox.host_timing import FOLDER_ENV, HostTiming
from evalkit.sandbox.remains import entry_lock
from process_helpers import wait_for

ROOT = Path(__file__).resolve().parents[2]
BOUND_S = 60.0  # how long a state that must come may take (on a loaded machine); reached only when broken
QUIET_S = 0.5  # how long a state that must not come is given to come anyway
GPU = "GPU-7f/0"

# A judge of its own process: ROUNDS rounds of non-timed work ("use") or of timings ("time", each through its run's
# freezer, as a judge process's Hold reaches the scheduler's), logging enter and leave with CLOCK_MONOTONIC, which
# every process of the host shares. Its gate may wait for uses as long as it takes: a timing beside a use is a bug here.
JUDGE = """
import sys, time
from functools import partial
from evalkit.sandbox import gpu_gate
from evalkit.sandbox.freezer import BuildFreezer
gpu_gate.USE_WAIT_S = 600.0
kind, rounds, log = sys.argv[1], int(sys.argv[2]), open(sys.argv[3], "w")
gate = gpu_gate.GpuGate.open(sys.argv[4])
freezer = BuildFreezer("gate-test", use_cgroup=False) if kind == "time" else None
for _ in range(rounds):
    with (gate.exclusive(partial(freezer.timing, device=sys.argv[4])) if freezer else gate.use()):
        print(kind, "enter", time.monotonic(), file=log, flush=True)
        time.sleep(0.01)
        print(kind, "leave", time.monotonic(), file=log, flush=True)
if freezer:
    freezer.close()
"""
# A judge of its own process that takes a use of GPU argv[1], says so, then waits to be killed.
HOLDER = """
import sys, time
from evalkit.sandbox.gpu_gate import GpuGate
with GpuGate.open(sys.argv[1]).use():
    print("held", flush=True)
    time.sleep(3600)
"""


@pytest.fixture
def registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "registry"
    monkeypatch.setenv(FOLDER_ENV, str(folder))
    return folder


def _tokens(registry: Path, kind: str) -> list[str]:
    return [path.name for path in registry.iterdir() if path.name.startswith(f"{kind}.")]


def _gate() -> GpuGate:
    gate = GpuGate.open(GPU)
    assert gate is not None
    return gate


@contextmanager
def _turn(host: HostTiming) -> Iterator[None]:
    """The GPU's turn as a run's freezer takes it for its judge: wanted first, then queued for."""
    with host.wanting(GPU), host.device_turn(GPU):
        yield


def _in_thread(work) -> tuple[threading.Thread, threading.Event]:
    done = threading.Event()

    def run() -> None:
        work()
        done.set()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, done


def test_no_use_overlaps_a_timing_and_no_two_timings_overlap_across_processes(registry, tmp_path):
    env = {**os.environ, FOLDER_ENV: str(registry), "PYTHONPATH": str(ROOT)}
    roles = ["time", "time", "use", "use", "use"]
    logs = [tmp_path / f"judge{number}.log" for number in range(len(roles))]
    procs = [subprocess.Popen([sys.executable, "-c", JUDGE, role, "12", str(log), GPU], env=env)
             for role, log in zip(roles, logs)]
    for proc in procs:
        assert proc.wait(timeout=300) == 0
    spans: list[tuple[str, float, float]] = []
    for log in logs:
        lines = [line.split() for line in log.read_text().splitlines()]
        spans += [(enter[0], float(enter[2]), float(leave[2])) for enter, leave in zip(lines[::2], lines[1::2])]
    assert sum(kind == "time" for kind, _, _ in spans) == 24 and len(spans) == 60
    timings = [span for span in spans if span[0] == "time"]
    for kind, start, end in spans:
        beside = [t for t in timings if t != (kind, start, end) and t[1] < end and start < t[2]]
        assert not beside, f"a {kind} from {start} to {end} overlapped a timing {beside[0]}"
    assert not list(registry.iterdir()), "a judge left a token behind"


def test_uses_share_the_gpu(registry):
    first, second, inside = _gate(), _gate(), threading.Event()

    def use_beside() -> None:
        with second.use():
            inside.set()
    with first.use():
        _in_thread(use_beside)
        assert inside.wait(BOUND_S), "a use waited for another use"


def test_once_a_timing_wants_the_gpu_no_new_use_starts_and_it_waits_for_those_in_progress(registry):
    holder, newcomer, timer = _gate(), _gate(), _gate()
    freezer = BuildFreezer("gate-test", use_cgroup=False)  # the timer's run, which takes the GPU's turn for it
    order: list[str] = []
    with holder.use():
        def time_it() -> None:
            with timer.exclusive(partial(freezer.timing, device=GPU)) as contended:
                order.append(f"timing beside {contended}")

        def use_it() -> None:
            with newcomer.use():
                order.append("new use")
        timing, timed = _in_thread(time_it)
        wait_for(lambda: _tokens(registry, "want"), BOUND_S, "the timing to say it wants the GPU")
        newcomer_thread, used = _in_thread(use_it)
        assert not timed.wait(QUIET_S), "the timing did not wait for the use in progress"
        assert not used.is_set(), "a new use started while a timing wanted the GPU"
        order.append("use in progress ends")
    assert timed.wait(BOUND_S) and used.wait(BOUND_S)
    freezer.close()
    assert order == ["use in progress ends", "timing beside []", "new use"]


def test_a_stage_stands_aside_for_a_timing_between_its_requests_and_goes_on_after_it(registry, monkeypatch):
    monkeypatch.setattr(gpu_gate, "USE_WAIT_S", BOUND_S * 10)  # the timing goes only when the stage stands aside
    stage_gate, timer, scheduler = _gate(), _gate(), HostTiming(registry)
    order: list[str] = []
    with stage_gate.use():  # a stage of another judge, a request of it done
        def time_it() -> None:
            with timer.exclusive(lambda: _turn(scheduler)) as contended:
                order.append(f"timing beside {contended}")
        timing, timed = _in_thread(time_it)
        wait_for(lambda: _tokens(registry, "want"), BOUND_S, "the timing to say it wants the GPU")
        assert not timed.wait(QUIET_S), "the timing did not wait for the request in progress"
        with stage_gate.use():  # its next request
            order.append("next request")
        assert len(_tokens(registry, "use")) == 1, "the stage's use was not taken back after the timing"
    assert timed.wait(BOUND_S)
    assert order == ["timing beside []", "next request"], "the stage's next request ran before the timing"


def test_a_judge_waiting_for_a_build_entry_another_judge_holds_stands_aside_for_that_judges_timing(
        registry, monkeypatch, tmp_path):
    """Judge X's worker holds the build-cache entry of an answer through X's timing (``remains.entry_lock``); judge
    Y, in a stage's use, waits for that entry to judge the same answer. Were Y's use kept while it waited, X's timing
    would wait for Y, which waits for X (on the H200 each such timing waited out ``USE_WAIT_S`` and was flagged
    ``contended_gpu``). Y waits aside: X's timing runs beside no use, and Y's use is back once it has the entry."""
    monkeypatch.setattr(gpu_gate, "USE_WAIT_S", BOUND_S * 10)  # the timing goes only when Y's use is dropped
    entry = tmp_path / "extensions"
    entry.mkdir()
    x_gate, y_gate, scheduler = _gate(), _gate(), HostTiming(registry)
    x_worker_holds = entry_lock(entry)
    y_has_entry: list[int] = []

    def y_stage() -> None:
        with y_gate.use():
            y_has_entry.append(entry_lock(entry, y_gate.aside))
            assert len(_tokens(registry, "use")) == 1, "Y's use was not taken back once it had the entry"
    y_thread, y_done = _in_thread(y_stage)
    wait_for(lambda: not _tokens(registry, "use"), BOUND_S, "Y to drop its use while it waits for the entry")
    contended: list[list[str]] = []

    def x_timing() -> None:
        with x_gate.exclusive(lambda: _turn(scheduler)) as beside:
            contended.append(beside)
    try:
        timing, timed = _in_thread(x_timing)
        assert timed.wait(BOUND_S), "X's timing waited for the use of a judge that waits for X"
        assert contended == [[]]
    finally:
        os.close(x_worker_holds)  # X's worker is gone once X has timed it
    assert y_done.wait(BOUND_S) and y_has_entry, "Y never got the entry"
    os.close(y_has_entry[0])


def test_an_entry_nobody_holds_is_taken_without_waiting_aside(tmp_path):
    entry = tmp_path / "extensions"
    entry.mkdir()
    asides: list[str] = []

    @contextmanager
    def aside() -> Iterator[None]:
        asides.append("aside")
        yield
    os.close(entry_lock(entry, aside))
    assert asides == [], "a judge stood aside for an entry nobody held"


def test_a_dead_holder_holds_nothing(registry, monkeypatch):
    env = {**os.environ, FOLDER_ENV: str(registry), "PYTHONPATH": str(ROOT)}
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, GPU], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        contended: list[list[str]] = []
        timer, scheduler = _gate(), HostTiming(registry)
        monkeypatch.setattr(gpu_gate, "USE_WAIT_S", BOUND_S * 10)  # the wait ends only when the use does

        def time_it() -> None:
            with timer.exclusive(lambda: _turn(scheduler)) as beside:
                contended.append(beside)
        thread, timed = _in_thread(time_it)
        assert not timed.wait(QUIET_S), "the timing did not wait for the live use"
        os.kill(holder.pid, signal.SIGKILL)
        assert timed.wait(BOUND_S), "the use of a killed process still held the GPU"
        assert contended == [[]]
    finally:
        holder.kill()
        holder.wait()


def test_a_use_that_outlasts_the_wait_is_timed_beside_and_named(registry, monkeypatch):
    monkeypatch.setattr(gpu_gate, "USE_WAIT_S", 0.2)
    hanging, timer, scheduler = _gate(), _gate(), HostTiming(registry)
    with hanging.use():
        with timer.exclusive(lambda: _turn(scheduler)) as contended:
            assert contended == _tokens(registry, "use") and len(contended) == 1
    with timer.exclusive(lambda: _turn(scheduler)) as contended:
        assert contended == []


def test_a_judge_never_waits_on_its_own_use_and_takes_it_back_after_its_timing(registry, monkeypatch):
    monkeypatch.setattr(gpu_gate, "USE_WAIT_S", BOUND_S * 10)
    judge, scheduler = _gate(), HostTiming(registry)

    def stage() -> None:
        with judge.use():  # a stage with a timing inside (the calibration), and GPU work inside that timing
            with judge.exclusive(lambda: _turn(scheduler)) as contended:
                assert contended == [] and not _tokens(registry, "use"), "its use was kept while it timed"
                with judge.use():
                    pass
            assert len(_tokens(registry, "use")) == 1, "its use was not taken back after the timing"
        with judge.exclusive(lambda: _turn(scheduler)):  # a timing's own GPU work, outside any stage's use
            with judge.use():
                pass
        assert not list(registry.iterdir())
    thread, done = _in_thread(stage)
    assert done.wait(BOUND_S), "a judge waited on its own use, or a use inside its timing waited on its turn"


def test_one_runs_judges_of_one_gpu_time_one_at_a_time_and_of_two_gpus_at_once(registry):
    for host_wide in (True, False):  # the run's own exclusion holds without the host's registry too
        freezer = BuildFreezer("gate-test", use_cgroup=False, host_wide=host_wide)
        try:
            release, order, other_gpu = threading.Event(), [], threading.Event()

            def first() -> None:
                with freezer.timing(device="0"):
                    order.append("first enters")
                    release.wait(BOUND_S)
                    order.append("first leaves")

            def second() -> None:
                with freezer.timing(device="0"):
                    order.append("second enters")
            _, first_in = _in_thread(first)
            wait_for(lambda: order == ["first enters"], BOUND_S, "the first timing")
            def on_another_gpu() -> None:
                with freezer.timing(device="1"):
                    other_gpu.set()
            _in_thread(on_another_gpu)
            assert other_gpu.wait(BOUND_S), "a timing of another GPU waited"
            _, second_done = _in_thread(second)
            assert not second_done.wait(QUIET_S), "two judges of one run timed on one GPU at once"
            release.set()
            assert second_done.wait(BOUND_S) and first_in.wait(BOUND_S)
            assert order == ["first enters", "first leaves", "second enters"]
        finally:
            release.set()
            freezer.close()
