"""A judge keeps the problems it loaded lately: going back to one loads nothing again (its reference, its
timed facts, its float64 outputs), within the bounds that drop the least recently used."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import FIXTURES
from evalkit import Evaluator
from evalkit.schedule import device_judge

PROBLEMS = FIXTURES / "judge_problems"
ANSWERS = FIXTURES / "judge_submissions" / "fixtures"
SETTINGS = dict(device="cpu", baselines=("eager",), timing_trials=5, warmup=1, seed=3)


def _answer(problem: str, name: str) -> str:
    return next((ANSWERS / problem).glob(f"{name}.*")).read_text()


def _loads_of_each_problem(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    """Judge a correct answer of linear_relu, one of scale_rows, then linear_relu's again; the problems loaded."""
    loaded: list[str] = []

    class CountedReference(device_judge.ReferenceProblem):
        def __init__(self, problem, *args, **kwargs):
            loaded.append(problem.id)
            super().__init__(problem, *args, **kwargs)

    monkeypatch.setattr(device_judge, "ReferenceProblem", CountedReference)
    with Evaluator(problems=PROBLEMS, cache_dir=tmp_path, **SETTINGS) as ev:
        rows = [ev.judge(problem, _answer(problem, name)) for problem, name in
                [("linear_relu", "correct_python"), ("scale_rows", "correct"), ("linear_relu", "correct_python")]]
    assert [row["verdict"] for row in rows] == ["correct"] * 3, [row["reason"] for row in rows]
    return loaded


@pytest.mark.slow  # a whole Evaluator, three answers judged: most of a minute on 2 cores
def test_going_back_to_a_kept_problem_loads_nothing_again(monkeypatch, tmp_path):
    assert _loads_of_each_problem(monkeypatch, tmp_path) == ["linear_relu", "scale_rows"]


@pytest.mark.slow  # a whole Evaluator, three answers judged: most of a minute on 2 cores
def test_the_least_recently_used_problem_goes_once_the_judge_keeps_its_most(monkeypatch, tmp_path):
    monkeypatch.setattr(device_judge, "KEPT_PROBLEMS", 1)
    assert _loads_of_each_problem(monkeypatch, tmp_path) == ["linear_relu", "scale_rows", "linear_relu"]


def test_a_judge_over_its_share_of_the_gpus_memory_unloads_the_least_recently_used_until_under_it(monkeypatch):
    judge = device_judge.DeviceJudge.__new__(device_judge.DeviceJudge)  # no worker, no problem: only its bounds
    judge.device, judge._kept = "cuda", device_judge.OrderedDict(old=None, recent=None, current=None)
    shares = iter([0.4, 0.2])  # measured before each drop
    monkeypatch.setattr(judge, "_memory_share", lambda: next(shares))
    monkeypatch.setattr(device_judge, "_free_garbage", lambda device: None)
    judge._make_room()
    assert judge.kept_problems == ["recent", "current"]
