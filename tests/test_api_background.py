"""The Python API's work behind the caller's back: what a new ``Evaluator`` starts ahead of its first answer,
``prepare_baselines`` taking its turn with the answers on the judges, and an evaluator's containers staying bounded
however many answers pass through it."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import FIXTURES
from evalkit import Evaluator

PROBLEMS = FIXTURES / "judge_problems"
ANSWERS = FIXTURES / "judge_submissions" / "fixtures" / "linear_relu"
SETTINGS = dict(device="cpu", baselines=("eager",), timing_trials=5, warmup=1, seed=3)
WAIT_S = 300.0  # a loaded CI machine times three problems' eager baselines well within this


def _answer(name: str) -> str:
    return next(ANSWERS.glob(f"{name}.*")).read_text()


def _timed_baselines(cache: Path) -> int:
    """How many problems the cache's baseline file holds an eager timing for."""
    path = cache / "baselines.json"
    entries = json.loads(path.read_text()) if path.exists() else {}
    return sum(isinstance(entry.get("eager"), dict) and "error" not in entry["eager"] for entry in entries.values())


@pytest.mark.slow  # an Evaluator of its own that times its problems' baselines
def test_a_new_evaluator_starts_its_judge_and_times_its_known_problems_baselines_before_any_call(warm_cache: Path):
    with Evaluator(problems=PROBLEMS, cache_dir=warm_cache, **SETTINGS) as ev:
        known = len(ev.problems)
        deadline = time.monotonic() + WAIT_S
        while _timed_baselines(warm_cache) < known and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _timed_baselines(warm_cache) == known, "the known problems' baselines were not timed ahead"
        station = ev._engine.stations[0]
        assert station._running(), "the judge was not started ahead of its first answer"
        assert station._server.device_judge._spare._spares, "the judge's first worker was not started ahead"
        row = ev.judge("linear_relu", _answer("correct_cpp"))
        assert row["verdict"] == "correct" and row["stage_seconds"]["setup_s"] < row["stage_seconds"]["build_s"] + 60


@pytest.mark.slow  # an Evaluator of its own that times its problems' baselines
def test_prepare_baselines_waits_its_turn_beside_a_judge_call_of_another_thread(warm_cache: Path):
    with Evaluator(problems=PROBLEMS, cache_dir=warm_cache, **SETTINGS) as ev:
        station = ev._engine.stations[0]
        overlaps, judging = _count_overlaps(station)
        rows: list[dict[str, Any]] = []
        caller = threading.Thread(target=lambda: rows.append(ev.judge("linear_relu", _answer("correct_cpp"))))
        caller.start()
        assert judging.wait(WAIT_S), "the answer never reached its judge"
        ev.prepare_baselines(["matmul", "scale_rows", "linear_relu"])  # while that answer is being judged
        caller.join(WAIT_S)
        assert not caller.is_alive() and rows and rows[0]["verdict"] == "correct", rows
        assert rows[0]["speedup_vs_eager"] is not None, rows[0]
        assert not any("speedup" in warning for warning in rows[0]["warnings"]), rows[0]["warnings"]
        assert {"matmul", "scale_rows", "linear_relu"} <= ev._engine.prepared
        assert overlaps == [], "the judge prepared baselines while it judged an answer"


def _count_overlaps(station: Any) -> tuple[list[str], threading.Event]:
    """Wrap ``station``'s requests: each one that starts while another is in progress is listed; the event is set
    once an answer's request has started."""
    overlaps: list[str] = []
    judging = threading.Event()
    busy = threading.Lock()

    def guarded(name: str, request: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            if not busy.acquire(blocking=False):
                overlaps.append(name)
                return request(*args, **kwargs)
            try:
                if name == "judge":
                    judging.set()
                    time.sleep(1.0)  # long enough for the other thread's prepare_baselines to arrive meanwhile
                return request(*args, **kwargs)
            finally:
                busy.release()
        return call

    station.judge_answer = guarded("judge", station.judge_answer)
    station.prepare = guarded("prepare", station.prepare)
    return overlaps, judging


def test_an_evaluators_containers_stay_bounded_over_many_answers(warm_cache: Path):
    with Evaluator(problems=PROBLEMS, cache_dir=warm_cache, **SETTINGS) as ev:
        for _ in range(3):
            rows = list(ev.judge_many([("linear_relu", "no code, round " + str(n)) for n in range(500)] +
                                      [("linear_relu", "```python\ndef broken(:\n```")] * 500))
            assert len(rows) == 1000
        judged = [ev.judge("linear_relu", _answer(name))["verdict"] for name in ("correct_cpp", "incorrect") * 2]
        assert judged == ["correct", "incorrect"] * 2
        sizes = ev._engine.sizes
    assert sizes["builds"] <= 1, f"the build futures of finished answers are kept: {sizes}"
    assert {key: sizes[key] for key in ("items", "preparations", "idle", "in_hand", "busy")} == dict.fromkeys(
        ("items", "preparations", "idle", "in_hand", "busy"), 0), sizes
    assert max(sizes["problem_locks"], sizes["problems_ahead"], sizes["ahead"]) <= len(ev.problems), sizes
