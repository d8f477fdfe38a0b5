"""Helpers for tests that start a judge station (a judge process, or a Ray actor) and kill it mid-request (to wait
for it, `process_helpers.wait_for`)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from conftest import FIXTURES

JUDGE_PROBLEMS = FIXTURES / "judge_problems"


def cpu_station_spec(cache: Path, timing_trials: int = 5) -> Any:
    """A ``StationSpec`` of the fixture problems, judged on CPU with eager baselines only, no baseline files."""
    from evalkit.schedule.judge_messages import BaselineFiles, StationSpec
    from evalkit.schedule.options import JudgeOptions, default_limits
    from evalkit.sources.problems import discover_problems

    options = JudgeOptions(device="cpu", baselines=("eager",), cache_dir=cache,
                           overrides={"timing_trials": timing_trials, "warmup_trials": 1})
    problems = discover_problems(JUDGE_PROBLEMS)
    return StationSpec(problems, options.plans(problems), options.baselines, options.cache_dir, "cpu", 1,
                       default_limits("cpu", 2.0), BaselineFiles(None, None), None)


def prepare_in_background(station: Any, problem: str) -> tuple[threading.Thread, list[BaseException]]:
    """Start ``station.prepare(problem)`` in a thread; what it raises lands in the returned list."""
    failure: list[BaseException] = []

    def prepare() -> None:
        try:
            station.prepare(problem)
        except BaseException as err:  # noqa: BLE001 - the test inspects it
            failure.append(err)

    thread = threading.Thread(target=prepare)
    thread.start()
    return thread, failure

