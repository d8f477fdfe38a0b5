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

from evalkit.sandbox.freezer import BuildFreezer
from evalkit.sandbox.launcher import MARKER_VARIABLE
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
