"""Scores against hand-computed values (``evalkit.report.scoring``, pure)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evalkit.report import scoring
from evalkit.records import VERDICT_ORDER

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "reports" / "results.jsonl"


def row(run: str, problem: str, sample: str, verdict: str, eager: float | None = None,
        compile: float | None = None, flags: tuple[str, ...] = (), build: str | None = None) -> dict[str, Any]:
    return {"run": run, "problem": problem, "sample": sample, "verdict": verdict, "speedup_vs_eager": eager,
            "speedup_vs_compile": compile, "flags": list(flags), "sha256": f"{run}{problem}{sample}",
            "build": {"status": build} if build else None}


def fixture_rows() -> list[dict[str, Any]]:
    return [json.loads(line) for line in FIXTURE.read_text().splitlines()]


@pytest.mark.parametrize(("n", "c", "k", "expected"), [
    (3, 2, 1, 2 / 3),
    (5, 1, 2, 1 - 6 / 10),          # 1 - C(4,2)/C(5,2)
    (10, 3, 5, 1 - 21 / 252),       # 1 - C(7,5)/C(10,5)
    (4, 0, 1, 0.0),
    (3, 3, 2, 1.0),
    (4, 3, 2, 1.0),                 # n - c < k: every draw of 2 holds a good one
    (2, 1, 5, 1.0),                 # k clamped to n
    (0, 0, 1, 0.0),                 # no submission is a failure
])
def test_pass_at_k_is_the_unbiased_estimator(n: int, c: int, k: int, expected: float) -> None:
    assert scoring.pass_at_k(n, c, k) == pytest.approx(expected)


def test_fast_p_counts_strictly_greater_and_problems_without_submissions() -> None:
    rows = [row("m", "p1", "0", "correct", 1.5, 0.9), row("m", "p2", "0", "correct", 1.0, 2.0),
            row("m", "p3", "0", "incorrect")]
    scores = scoring.score_all(rows, known_problems=["p4"])
    assert scores["problem_set"]["problems"] == ["p1", "p2", "p3", "p4"]
    assert scores["problem_set"]["without_submissions"] == ["p4"]
    fast = scores["overall"]["fast_p"]
    # p4 has no submission: it is in overall's denominator and never fast.
    assert fast["eager"] == {"0": 0.5, "0.5": 0.5, "0.8": 0.5, "1": 0.25, "1.5": 0.0, "2": 0.0}
    # speedup exactly 1.0 (p2 vs eager) is not > 1; exactly 2.0 (p2 vs compile) is not > 2.
    assert fast["compile"] == {"0": 0.5, "0.5": 0.5, "0.8": 0.5, "1": 0.25, "1.5": 0.25, "2": 0.0}
    # The run is scored over the three problems it answered.
    assert scores["runs"]["m"]["problems_scored"] == 3 and scores["overall"]["problems_scored"] == 4
    assert scores["runs"]["m"]["fast_p"]["compile"] == pytest.approx({"0": 2 / 3, "0.5": 2 / 3, "0.8": 2 / 3,
                                                                      "1": 1 / 3, "1.5": 1 / 3, "2": 0.0})


def test_a_run_is_scored_over_the_problems_it_answered_and_overall_over_the_set() -> None:
    """One run answering one problem of nine, two of its three samples correct: its pass@1 is 2/3 beside its correct
    rate of 2/3 (not 2/27, as when a run was scored over every problem of the folder); overall keeps all nine."""
    rows = [row("m", "p1", "0", "correct", 1.5), row("m", "p1", "1", "correct", 0.5), row("m", "p1", "2", "incorrect")]
    scores = scoring.score_all(rows, known_problems=[f"p{i}" for i in range(1, 10)])
    run, overall = scores["runs"]["m"], scores["overall"]
    assert run["problems_scored"] == 1 and overall["problems_scored"] == 9
    assert run["rates"]["correct"] == pytest.approx(2 / 3) and run["pass_at_k"]["1"] == pytest.approx(2 / 3)
    assert run["fast_p"]["eager"]["1"] == 1.0 and run["fast_p_at_k"]["eager"]["1"]["1"] == pytest.approx(1 / 3)
    assert overall["pass_at_k"]["1"] == pytest.approx(2 / 27) and overall["fast_p"]["eager"]["1"] == pytest.approx(1 / 9)


def test_no_correct_submission_scores_zero_not_missing() -> None:
    rows = [row("m", "p1", "0", "incorrect"), row("m", "p2", "0", "compile_error", build="compile_error"),
            row("m", "p2", "1", "no_code")]
    s = scoring.score_all(rows)["runs"]["m"]
    assert all(v == 0.0 for b in scoring.BASELINES for v in s["fast_p"][b].values())
    assert s["geomean_speedup"] == {"eager": {"value": None, "n": 0}, "compile": {"value": None, "n": 0}}
    assert s["pass_at_k"] == {"1": 0.0, "2": 0.0}
    assert s["counts"]["correct"] == 0 and s["rates"]["correct"] == 0.0
    assert s["counts"]["code_extracted"] == 2 and s["counts"]["compiled"] == 1


def test_flagged_rows_are_never_fast_and_left_out_of_geomeans() -> None:
    rows = [row("m", "p1", "0", "correct", 50.0, 40.0, flags=("implausible_speedup",)),
            row("m", "p1", "1", "correct", 1.2, 0.6),
            row("m", "p2", "0", "correct", 3.0, 3.0, flags=("timing_mismatch",)),
            row("m", "p3", "0", "correct", 2.0, 1.5, flags=("no_custom_kernel",))]  # other flags do not exclude
    s = scoring.score_all(rows)["runs"]["m"]
    assert s["fast_p"]["eager"]["1"] == pytest.approx(2 / 3)   # p1 via its unflagged sample, p3; not p2
    assert s["fast_p"]["eager"]["1.5"] == pytest.approx(1 / 3)  # only p3 (p1's 50x is flagged)
    assert s["fast_p"]["compile"]["1"] == pytest.approx(1 / 3)
    assert s["geomean_speedup"]["eager"] == {"value": pytest.approx((1.2 * 2.0) ** 0.5), "n": 2}
    assert s["counts"]["flagged"] == 2 and s["counts"]["correct"] == 4
    # pass@k ignores speed flags: all four samples are correct.
    assert s["pass_at_k"]["1"] == 1.0
    # fast_1@1 for p1: one of its two samples is fast -> 1/2; p2 -> 0; p3 -> 1.
    assert s["fast_p_at_k"]["eager"]["1"]["1"] == pytest.approx((0.5 + 0 + 1) / 3)


def test_best_sample_decides_fast_p_and_ties_keep_the_first() -> None:
    rows = [row("m", "p1", "a", "incorrect"), row("m", "p1", "b", "correct", 1.4, 1.1),
            row("m", "p1", "c", "correct", 1.4, 0.7), row("m", "p1", "d", "runtime_error")]
    scores = scoring.score_all(rows)
    assert scores["runs"]["m"]["fast_p"]["eager"]["1"] == 1.0
    cell = scores["per_problem"][0]["runs"]["m"]
    assert cell["sample"] == "b" and cell["speedup_vs_eager"] == 1.4 and cell["speedup_vs_compile"] == 1.1
    assert (cell["samples"], cell["correct"]) == (4, 2)
    assert scores["runs"]["m"]["ks"] == [1, 4]
    assert scores["runs"]["m"]["pass_at_k"] == {"1": 0.5, "4": 1.0}
    assert scores["runs"]["m"]["fast_p_at_k"]["eager"]["1"]["1"] == 0.5
    assert scores["runs"]["m"]["fast_p_at_k"]["compile"]["1"]["1"] == 0.25


def test_best_row_without_a_correct_one_is_the_furthest_in_the_pipeline() -> None:
    assert scoring.best_row([row("m", "p", "0", "compile_error"), row("m", "p", "1", "timeout"),
                             row("m", "p", "2", "no_code")])["sample"] == "1"
    # skipped happens right after the syntax check: an interface error got further.
    assert scoring.best_row([row("m", "p", "0", "skipped"), row("m", "p", "1", "interface_error")])["sample"] == "1"
    assert scoring.best_row([row("m", "p", "0", "syntax_error"), row("m", "p", "1", "skipped")])["sample"] == "1"
    # a correct but flagged row loses to a correct unflagged one, even a slower one.
    assert scoring.best_row([row("m", "p", "0", "correct", 9.0, flags=("implausible_speedup",)),
                             row("m", "p", "1", "correct", 1.1)])["sample"] == "1"
    assert scoring.best_row([]) is None
    assert set(scoring.PIPELINE_RANK) == set(VERDICT_ORDER)


def test_compiled_means_past_the_build_stage() -> None:
    compiled = {v: scoring.is_compiled(row("m", "p", "0", v, build="ok")) for v in VERDICT_ORDER}
    assert [v for v, ok in compiled.items() if ok] == ["interface_error", "runtime_error", "crash", "timeout",
                                                      "incorrect", "correct"]
    assert not scoring.is_compiled(row("m", "p", "0", "crash", build="crash"))     # crashed while building
    assert not scoring.is_compiled(row("m", "p", "0", "timeout", build="timeout"))
    assert not scoring.is_compiled(row("m", "p", "0", "timeout"))                   # no build record


def test_geomean_speedup() -> None:
    rows = [row("m", "p1", "0", "correct", 4.0, 2.0), row("m", "p2", "0", "correct", 1.0, 0.5),
            row("m", "p3", "0", "correct", None, None), row("m", "p4", "0", "incorrect", 100.0, 100.0)]
    geo = scoring.score_all(rows)["runs"]["m"]["geomean_speedup"]
    assert geo["eager"] == {"value": pytest.approx(2.0), "n": 2}
    assert geo["compile"] == {"value": pytest.approx(1.0), "n": 2}


def test_later_rows_replace_earlier_ones_with_the_same_key() -> None:
    rows = [row("m", "p1", "0", "incorrect"), row("m", "p2", "0", "no_code"), row("m", "p1", "0", "correct", 2.0)]
    kept = scoring.dedupe(rows)
    assert [(r["problem"], r["verdict"]) for r in kept] == [("p1", "correct"), ("p2", "no_code")]
    assert scoring.score_all(rows)["runs"]["m"]["submissions"] == 2


def test_overall_pools_every_run_but_curated() -> None:
    rows = [row("a", "p1", "0", "correct", 2.0), row("b", "p2", "0", "correct", 3.0),
            row("curated", "p3", "ref", "correct", 5.0)]
    scores = scoring.score_all(rows)
    assert list(scores["runs"]) == ["a", "b", "curated"]
    assert scores["overall"]["submissions"] == 2
    assert scores["overall"]["fast_p"]["eager"]["1"] == pytest.approx(2 / 3)
    assert scores["per_problem"][2]["curated"]["speedup_vs_eager"] == 5.0
    assert scores["per_problem"][2]["runs"] == {"a": None, "b": None}
    assert scores["problem_set"]["without_submissions"] == ["p3"]


def test_no_rows_at_all() -> None:
    scores = scoring.score_all([], known_problems=["p1"])
    assert scores["overall"]["submissions"] == 0
    assert scores["overall"]["rates"]["correct"] is None
    assert scores["overall"]["fast_p"]["eager"]["0"] == 0.0
    assert scoring.score_all([])["overall"]["fast_p"]["eager"]["0"] is None  # no problems: undefined


def test_unusable_speedups_count_as_none() -> None:
    for bad in (None, 0, -1.0, float("nan"), float("inf"), "2.0", True):
        assert scoring.speedup_of({"speedup_vs_eager": bad}, "eager") is None
    assert scoring.speedup_of({"speedup_vs_eager": 2}, "eager") == 2.0


def test_fixture_scores_by_hand() -> None:
    scores = scoring.score_all(fixture_rows(), known_problems=["6_extra"])
    assert scores["problem_set"]["count"] == 6
    a, b, cur = scores["runs"]["model-a"], scores["runs"]["model-b"], scores["runs"]["curated"]
    assert (a["submissions"], b["submissions"], cur["submissions"]) == (6, 7, 5)
    assert a["counts"] == {"code_extracted": 5, "compiled": 3, "correct": 2, "skipped": 0, "flagged": 0}
    # model-b: interface, runtime, correct x2 and the timeout (build ok) compiled; the build crash did not.
    assert b["counts"] == {"code_extracted": 7, "compiled": 5, "correct": 2, "skipped": 1, "flagged": 1}
    assert sum(scores["overall"]["verdicts"].values()) == 13
    assert all(scores["overall"]["verdicts"][v] >= 1 for v in VERDICT_ORDER)
    # Each run over the problems it answered: model-a 4 (1_matmul to 4_conv2d), model-b and curated 5.
    assert (a["problems_scored"], b["problems_scored"], cur["problems_scored"]) == (4, 5, 5)
    assert scores["overall"]["problems_scored"] == 6
    # model-a, 1_matmul: samples at 1.5x and exactly 0.8x (not > 0.8) vs eager; 1.0x (not > 1) vs compile.
    assert a["fast_p"]["eager"] == pytest.approx({"0": 1 / 4, "0.5": 1 / 4, "0.8": 1 / 4, "1": 1 / 4, "1.5": 0, "2": 0})
    assert a["fast_p"]["compile"]["1"] == 0.0
    assert a["pass_at_k"] == pytest.approx({"1": (2 / 3) / 4, "3": 1 / 4})
    assert a["fast_p_at_k"]["eager"]["1"]["0.8"] == pytest.approx((1 / 3) / 4)
    # model-b: 50x on 1_matmul is flagged; 1.2x on 3_softmax counts.
    assert b["fast_p"]["eager"]["1"] == pytest.approx(1 / 5)
    assert b["geomean_speedup"]["eager"] == {"value": pytest.approx(1.2), "n": 1}
    # curated: 3.0, 1.0 (not > 1), 2.0 flagged timing_mismatch, 1.5, 2.0.
    assert cur["fast_p"]["eager"]["1"] == pytest.approx(3 / 5)
    assert cur["fast_p"]["eager"]["1.5"] == pytest.approx(2 / 5)
    assert cur["fast_p"]["compile"]["1"] == pytest.approx(2 / 5)  # 4_conv2d's compile baseline failed
    # overall pools model-a and model-b over all six problems, 6_extra (no submission) a failure
    assert scores["overall"]["fast_p"]["eager"]["1"] == pytest.approx(2 / 6)
    table = {e["problem"]: e for e in scores["per_problem"]}
    assert table["1_matmul"]["runs"]["model-a"]["sample"] == "0"
    assert table["4_conv2d"]["runs"]["model-b"]["verdict"] == "crash"
    assert table["4_conv2d"]["baselines"] == {"eager_ms": 6.0, "compile_ms": None}
    assert table["6_extra"]["runs"] == {"model-a": None, "model-b": None} and table["6_extra"]["curated"] is None
    assert scores["settings"]["atol"] == [0.01] and scores["settings"]["trials"] == [5]
    assert scores["baselines"]["4_conv2d"]["compile"] == {"error": "RuntimeError: inductor failed"}


def leveled(r: dict[str, Any], level: int | None) -> dict[str, Any]:
    return {**r, "problem_level": level} if level is not None else r


def test_fast_p_per_level_is_over_that_levels_problems_only() -> None:
    rows = [leveled(row("m", "p1", "0", "correct", 1.5, 1.2), 1), leveled(row("m", "p2", "0", "incorrect"), 1),
            leveled(row("m", "p3", "0", "correct", 2.5, 0.9), 2), row("m", "p4", "0", "correct", 3.0, 3.0),
            leveled(row("curated", "p5", "ref", "correct", 1.1, 1.1), 2)]
    scores = scoring.score_all(rows, known_problems=["p6"])
    assert scores["problem_set"]["levels"] == {"1": ["p1", "p2"], "2": ["p3", "p5"]}  # p4, p6: no level
    levels = scores["runs"]["m"]["by_level"]
    assert list(levels) == ["1", "2"]
    assert levels["1"]["problems"] == 2 and levels["1"]["problems_correct"] == 1
    assert levels["1"]["fast_p"]["eager"]["1"] == 0.5 and levels["1"]["fast_p"]["compile"]["1"] == 0.5
    # level 2 of m: p3 alone (2.5x eager, 0.9x compile); p5, which only curated answered, is not m's
    assert levels["2"]["problems"] == 1
    assert levels["2"]["fast_p"]["eager"]["2"] == 1.0 and levels["2"]["fast_p"]["compile"]["0.8"] == 1.0
    # overall's level 2 holds p5 too: a failure in its denominator
    assert scores["overall"]["by_level"]["2"]["problems_correct"] == 1
    assert scores["overall"]["by_level"]["2"]["fast_p"]["eager"]["2"] == 0.5
    assert scores["runs"]["curated"]["by_level"]["2"]["fast_p"]["eager"]["1"] == 1.0  # p5 alone, 1.1x
    assert {e["problem"]: e["level"] for e in scores["per_problem"]} == {"p1": 1, "p2": 1, "p3": 2, "p4": None,
                                                                       "p5": 2, "p6": None}


def test_no_levels_means_empty_level_fields() -> None:
    scores = scoring.score_all([row("m", "p1", "0", "correct", 1.5, 1.2)])
    assert scores["problem_set"]["levels"] == {} and scores["runs"]["m"]["by_level"] == {}
    assert scoring.problem_levels([{"problem": "p", "problem_level": True}, {"problem": "q", "problem_level": "2"}]) == {}


def timed(r: dict[str, Any], *kinds: str) -> dict[str, Any]:
    """The row as judged with ``--baselines`` = ``kinds``: a baselines record, speedups only against those."""
    record = {"device_name": "cpu", **{k: {"median_ms": 1.0} for k in kinds}}
    return {**r, "baselines": record, **{f"speedup_vs_{b}": r[f"speedup_vs_{b}"] if b in kinds else None
                                         for b in scoring.BASELINES}}


def test_a_baseline_never_timed_is_not_measured_not_zero() -> None:
    rows = [timed(row("m", "p1", "0", "correct", 1.5, 1.5), "eager"), timed(row("m", "p2", "0", "incorrect"), "eager")]
    s = scoring.score_all(rows)["runs"]["m"]
    assert s["baselines_not_measured"] == ["compile"]
    assert set(s["fast_p"]["compile"].values()) == {None} and s["fast_p"]["eager"]["1"] == 0.5
    assert s["fast_p_at_k"]["compile"]["1"]["1"] is None and s["fast_p_at_k"]["eager"]["1"]["1"] == 0.5
    assert s["geomean_speedup"]["compile"] == {"value": None, "n": 0}
    none = scoring.score_all([timed(row("m", "p1", "0", "correct", 1.5, 1.5))])["runs"]["m"]
    assert none["baselines_not_measured"] == ["eager", "compile"]
    assert none["fast_p"]["eager"]["0"] is None


def test_a_failed_baseline_is_measured_and_nothing_correct_is_zero() -> None:
    failed = timed(row("m", "p1", "0", "correct", 1.5, None), "eager")
    failed["baselines"]["compile"] = {"error": "RuntimeError: inductor failed"}
    s = scoring.score_all([failed])["runs"]["m"]
    assert s["baselines_not_measured"] == [] and s["fast_p"]["compile"]["1"] == 0.0
    # without a correct row nothing can be fast, whatever was timed: 0, not "not measured"
    s = scoring.score_all([row("m", "p1", "0", "no_code")])["runs"]["m"]
    assert s["baselines_not_measured"] == [] and s["fast_p"]["compile"]["1"] == 0.0


def test_fast_p_counts_a_speedup_only_once_its_interval_clears_p_and_keeps_the_point_count_beside_it() -> None:
    clear = {**row("m", "p1", "0", "correct", 1.20), "speedup_vs_eager_ci": [1.10, 1.30]}
    unsure = {**row("m", "p2", "0", "correct", 1.04), "speedup_vs_eager_ci": [0.98, 1.09]}
    earlier_schema = row("m", "p3", "0", "correct", 1.05)  # no interval: counted by its point estimate
    scores = scoring.score_all([clear, unsure, earlier_schema])["runs"]["m"]
    assert scores["fast_p"]["eager"]["1"] == pytest.approx(2 / 3)
    assert scores["fast_p_point"]["eager"]["1"] == pytest.approx(1.0)
    assert scores["fast_p"]["eager"]["0"] == pytest.approx(1.0)
    assert scoring.is_fast(unsure, "eager", 1.0, point=True) and not scoring.is_fast(unsure, "eager", 1.0)
