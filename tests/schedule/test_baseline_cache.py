"""Baselines are measured once per machine and setting: a rescore into a new report times nothing again,
unless asked to; a failed baseline is retried in a new report but kept within one (so a resume compares
with what its earlier rows were compared with); kinds timed at different moments make one entry, and two
judges never time the same baseline at once."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from conftest import FIXTURES
from evalkit.judge.baselines import BaselineCache, cache_key
from evalkit.judge.reference import ReferenceProblem
from evalkit.sources.problems import load_problem


@pytest.fixture(scope="module")
def ref() -> ReferenceProblem:
    return ReferenceProblem(load_problem(FIXTURES / "judge_problems" / "linear_relu"), "cpu", init_seed=1)


class Timer:
    def __init__(self, fail: set[str] = frozenset()) -> None:
        self.calls: list[str] = []
        self.fail = fail

    def __call__(self, kind: str) -> dict:
        self.calls.append(kind)
        return {"error": "boom"} if kind in self.fail else {"median_ms": 1.0 + len(self.calls)}


def test_a_new_report_reuses_the_shared_baselines(tmp_path: Path, ref):
    shared = tmp_path / "cache" / "baselines.json"
    first, second = Timer(), Timer()
    a = BaselineCache(tmp_path / "a" / "baselines.json", shared).get_or_measure(ref, ("eager",), first)
    b = BaselineCache(tmp_path / "b" / "baselines.json", shared).get_or_measure(ref, ("eager",), second)
    assert first.calls == ["eager"] and second.calls == []
    assert a == b and (tmp_path / "b" / "baselines.json").exists()  # the report keeps what it used
    assert a["eager"]["judge_s"] >= 0  # what timing it cost the judge, for "where did the time go"


def test_remeasure_times_again_and_other_settings_never_share(tmp_path: Path, ref):
    shared = tmp_path / "cache" / "baselines.json"
    BaselineCache(tmp_path / "a.json", shared).get_or_measure(ref, ("eager",), Timer())
    again = Timer()
    BaselineCache(tmp_path / "b.json", shared, remeasure=True).get_or_measure(ref, ("eager",), again)
    other = Timer()
    BaselineCache(tmp_path / "c.json", shared).get_or_measure(ref, ("eager",), other,
                                                              cache_key(ref, "warmup 1 trials 7"))
    assert again.calls == ["eager"] and other.calls == ["eager"]
    assert cache_key(ref, "t", driver="550") != cache_key(ref, "t", driver="580")


def test_a_failed_baseline_is_kept_within_a_report_and_retried_in_a_new_one(tmp_path: Path, ref):
    shared = tmp_path / "cache" / "baselines.json"
    failing = Timer(fail={"compile"})
    BaselineCache(tmp_path / "a.json", shared).get_or_measure(ref, ("eager", "compile"), failing)
    resumed = Timer()
    BaselineCache(tmp_path / "a.json", shared).get_or_measure(ref, ("eager", "compile"), resumed)
    fresh = Timer()
    BaselineCache(tmp_path / "b.json", shared).get_or_measure(ref, ("eager", "compile"), fresh)
    # the new report retries only the failed kind: the eager baseline the cache holds is reused
    assert resumed.calls == [] and fresh.calls == ["compile"]
    assert "error" not in json.loads((tmp_path / "b.json").read_text())[cache_key(ref)]["compile"]


def test_kinds_timed_at_different_moments_make_one_entry(tmp_path: Path, ref):
    shared = tmp_path / "cache" / "baselines.json"
    first, second = Timer(), Timer()
    BaselineCache(tmp_path / "a.json", shared).get_or_measure(ref, ("eager",), first)
    both = BaselineCache(tmp_path / "a.json", shared).get_or_measure(ref, ("eager", "compile"), second)
    assert first.calls == ["eager"] and second.calls == ["compile"]
    assert {"eager", "compile"} <= set(both)
    for path in (tmp_path / "a.json", shared):
        assert {"eager", "compile"} <= set(json.loads(path.read_text())[cache_key(ref)])


def test_a_report_records_only_the_kinds_its_run_asked_for_from_a_fuller_shared_entry(tmp_path: Path, ref):
    shared = tmp_path / "cache" / "baselines.json"
    BaselineCache(tmp_path / "earlier.json", shared).get_or_measure(ref, ("eager", "compile"), Timer())
    timer = Timer()
    entry = BaselineCache(tmp_path / "eager_only.json", shared).get_or_measure(ref, ("eager",), timer)
    assert timer.calls == [] and "eager" in entry
    recorded = json.loads((tmp_path / "eager_only.json").read_text())[cache_key(ref)]
    assert "eager" in recorded and "compile" not in recorded
    assert "compile" in json.loads(shared.read_text())[cache_key(ref)]  # the shared cache keeps what it knows


def test_a_judge_waits_for_another_timing_the_same_baseline_and_uses_its_figures(tmp_path: Path, ref):
    shared = tmp_path / "cache" / "baselines.json"
    started, release = threading.Event(), threading.Event()

    def slow(kind: str) -> dict:
        started.set()
        release.wait(5)
        return {"median_ms": 1.0}

    first = threading.Thread(target=BaselineCache(tmp_path / "a.json", shared).get_or_measure,
                             args=(ref, ("eager",), slow))
    first.start()
    assert started.wait(5)
    second = Timer()
    waiting = threading.Thread(target=BaselineCache(tmp_path / "b.json", shared).get_or_measure,
                               args=(ref, ("eager",), second))
    waiting.start()
    time.sleep(0.3)
    assert waiting.is_alive()  # held by the first judge's lock, not timing on its own
    release.set()
    first.join(5)
    waiting.join(5)
    assert second.calls == []  # it used what the first one timed


def test_a_baselines_file_has_the_mode_of_the_reports_other_files(tmp_path):
    import stat

    from evalkit.judge.baselines import merge_entry

    merge_entry(tmp_path / "baselines.json", "key", {"eager": {"median_ms": 1.0}})
    (tmp_path / "results.jsonl").write_text("")
    mode = stat.S_IMODE((tmp_path / "baselines.json").stat().st_mode)
    assert mode == stat.S_IMODE((tmp_path / "results.jsonl").stat().st_mode) and mode & stat.S_IROTH
