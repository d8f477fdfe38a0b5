"""Builds running at once take the CPU oldest first: each started gets a higher nice value than the youngest running
(``backend.BUILD_NICE_STEP``), so they end one after another and the judge starts on the first while the rest
build; a sandbox's nice value reaches its processes, its session's autogroup and its cgroup's CPU weight."""

from __future__ import annotations

import os
import threading
import uuid
from pathlib import Path

import pytest

from evalkit.judge.builder import BuildOutcome
from evalkit.sandbox.launcher import Limits, UntrustedProcess
from evalkit.schedule import backend as backend_module
from evalkit.schedule.backend import BUILD_NICE_STEP, LocalBackend


def test_each_build_started_gets_a_nice_value_a_step_above_the_youngest_running(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started: dict[str, int] = {}
    release = {name: threading.Event() for name in "abcde"}
    changed = threading.Condition()

    def fake_build(code: str, *args: object, **kwargs: object) -> BuildOutcome:
        limits = args[3]
        assert isinstance(limits, Limits)
        with changed:
            started[code] = limits.nice
            changed.notify_all()
        release[code].wait(60)
        return BuildOutcome("ok", 0.0)

    def wait_started(count: int) -> None:
        with changed:
            assert changed.wait_for(lambda: len(started) == count, 60), started

    monkeypatch.setattr(backend_module, "build", fake_build)
    local = LocalBackend(build_jobs=3)
    start = [lambda code=code: local.start_build(code, tmp_path, "cpu", 60.0, Limits(), None, None) for code in "abcde"]
    futures = {code: start[i]() for i, code in enumerate("abc")}
    wait_started(3)
    assert [started[code] for code in "abc"] == [0, BUILD_NICE_STEP, 2 * BUILD_NICE_STEP]
    assert local.sizes["running_builds"] == 3
    release["a"].set()  # the oldest ends: the next goes below the youngest still running, never above it
    futures["a"].result(60)
    futures["d"] = start[3]()
    wait_started(4)
    assert started["d"] == 3 * BUILD_NICE_STEP
    for code in "bcd":
        release[code].set()
        futures[code].result(60)
    futures["e"] = start[4]()  # none running: the next build has the CPU first again
    wait_started(5)
    assert started["e"] == 0
    release["e"].set()
    futures["e"].result(60)
    assert local.sizes["running_builds"] == 0
    local.close()


def test_a_sandboxs_nice_value_reaches_its_process_and_its_cgroups_cpu_weight(tmp_path: Path) -> None:
    worker = UntrustedProcess(tmp_path, Limits(group=f"test-{uuid.uuid4().hex[:8]}", nice=6))
    try:
        assert os.getpriority(os.PRIO_PROCESS, worker.pid) == 6
        if Path("/proc/sys/kernel/sched_autogroup_enabled").exists():  # its session's share, beside other sessions
            assert Path(f"/proc/{worker.pid}/autogroup").read_text().split()[-1] == "6"
        cgroup = worker.cgroup
        if cgroup is None or "cpu" not in cgroup.paths:
            return  # no cpu controller here: the nice value alone orders the builds
        path = cgroup.paths["cpu"]
        if cgroup.kind == "cgroup2":
            assert (path / "cpu.weight").read_text().strip() == str(round(100 * 1.25 ** -6))
        else:
            assert (path / "cpu.shares").read_text().strip() == str(round(1024 * 1.25 ** -6))
    finally:
        worker.close()


def test_a_sandbox_at_nice_zero_keeps_the_default_share(tmp_path: Path) -> None:
    worker = UntrustedProcess(tmp_path, Limits(group=f"test-{uuid.uuid4().hex[:8]}"))
    try:
        assert os.getpriority(os.PRIO_PROCESS, worker.pid) == os.getpriority(os.PRIO_PROCESS, 0)
        cgroup = worker.cgroup
        if cgroup is not None and "cpu" in cgroup.paths and cgroup.kind == "cgroup1":
            assert (cgroup.paths["cpu"] / "cpu.shares").read_text().strip() == "1024"
    finally:
        worker.close()
