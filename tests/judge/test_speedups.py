"""Speedups from one window: the median of the pairs' ratios, a distribution-free interval around it, and a second
baseline reached through the first. Pure: no worker, no clock."""

from __future__ import annotations

import math
import random

import pytest

from evalkit.judge.reference import input_seed
from evalkit.judge.speedups import Speedup, chained, paired_speedup, relative_half_width, speedups_against


def test_a_speedup_is_the_median_of_the_pairs_ratios_and_its_interval_holds_it():
    baseline = [10.0, 11.0, 10.5, 12.0, 10.2, 9.8, 10.1, 10.4, 10.0, 30.0, 10.3, 10.6]
    answer = [5.0, 5.5, 5.2, 6.0, 5.1, 4.9, 5.0, 5.2, 5.0, 5.1, 5.2, 5.3]
    found = paired_speedup(baseline, answer)
    ratios = sorted(b / a for b, a in zip(baseline, answer))
    assert found.value == pytest.approx((ratios[5] + ratios[6]) / 2)
    assert found.low <= found.value <= found.high and found.pairs == 12
    assert found.high < 3, "one outlier pair (30 ms) does not carry the interval with it"


def test_drift_shared_by_both_sides_of_each_pair_cancels():
    # The machine slows down 3x halfway through: medians taken apart would be off by 3x; the pairs are not.
    drift = [1.0] * 20 + [3.0] * 20
    found = paired_speedup([8.0 * d for d in drift], [4.0 * d for d in drift])
    assert found.value == pytest.approx(2.0) and found.low == pytest.approx(2.0) and found.high == pytest.approx(2.0)


def test_the_interval_narrows_with_more_pairs_and_covers_the_truth_about_95_percent_of_the_time():
    rng = random.Random(7)
    widths, covered = [], 0
    for trial in range(400):
        n = 20 if trial % 2 else 80
        pairs = [(2.0 * rng.lognormvariate(0, 0.05), rng.lognormvariate(0, 0.05)) for _ in range(n)]
        found = paired_speedup([b for b, _ in pairs], [a for _, a in pairs])
        covered += found.low <= 2.0 <= found.high
        widths.append((n, found.high - found.low))
    assert covered / 400 >= 0.93
    assert sum(w for n, w in widths if n == 80) < 0.7 * sum(w for n, w in widths if n == 20)


def test_a_second_baseline_is_reached_through_the_first_and_its_interval_widens():
    vs_eager = Speedup(2.0, 1.9, 2.1, 30)
    compile_over_eager = Speedup(1.25, 1.2, 1.3, 30)  # torch.compile 1.25x faster than eager
    vs_compile = chained(vs_eager, compile_over_eager.inverse())
    assert vs_compile.value == pytest.approx(1.6)
    assert vs_compile.low < 1.6 * 1.9 / 2.0 and vs_compile.high > 1.6 * 2.1 / 2.0
    below = math.hypot(math.log(2.0 / 1.9), math.log(1.3 / 1.25))
    assert vs_compile.low == pytest.approx(1.6 * math.exp(-below))


def test_a_rows_speedups_come_from_its_window_and_the_baselines_own():
    timing = {"speedup": {"vs": "eager", "value": 3.0, "ci": [2.9, 3.1], "pairs": 20}}
    baselines = {"eager": {"median_ms": 2.0},
                 "compile": {"median_ms": 1.0, "relative": {"to": "eager", "value": 2.0, "ci": [1.9, 2.1], "pairs": 20}}}
    found = speedups_against(timing, baselines, ("eager", "compile"))
    assert found["eager"].value == 3.0 and found["compile"].value == pytest.approx(1.5)
    assert speedups_against({}, baselines, ("eager", "compile")) == {}, "no window, no speedup: never medians apart"
    assert "compile" not in speedups_against(timing, {"compile": {"median_ms": 1.0}}, ("eager", "compile"))


def test_a_window_knows_its_precision_from_its_pairs():
    assert relative_half_width([2.0] * 10) == 0.0
    assert relative_half_width([1.0, 2.0, 3.0]) == pytest.approx(1 / 2 * (3.0 - 1.0) / 2.0)


def test_every_calls_input_seed_is_independent_of_every_other_calls():
    # Knowing one call's seed whole, and its number, tells nothing of the next call's without the secret: no affine
    # step between calls, no shared low bits (torch's CPU generator keeps only the low 32).
    secret = 123456789
    seeds = [input_seed(secret, call) for call in range(200)]
    steps = {(b - a) % 2**32 for a, b in zip(seeds, seeds[1:])}
    assert len(steps) == 199
    assert len({s % 2**32 for s in seeds}) == 200
    assert all(0 <= s < 2**63 for s in seeds)
    assert input_seed(secret + 1, 5) != seeds[5] and input_seed(secret, 5) == seeds[5]


def test_an_interval_also_holds_what_the_judge_cannot_resolve_of_a_call():
    # Every pair reads 2x, but the judge's own part of a request may be off by 0.05 ms a call: 1% of the answer's
    # 5 ms and 0.5% of the baseline's 10 ms, whatever the number of pairs.
    found = paired_speedup([10.0] * 50, [5.0] * 50, resolution_ms=0.05)
    unresolved = math.log1p(math.hypot(0.005, 0.01))
    assert found.value == 2.0
    assert found.low == pytest.approx(2.0 * math.exp(-unresolved)) and found.high == pytest.approx(2.0 * math.exp(unresolved))
    assert paired_speedup([10.0] * 50, [5.0] * 50).interval() == [2.0, 2.0]


def test_a_row_shows_only_the_baselines_its_run_asked_for(tmp_path):
    # The shared cache may hold a compiled baseline an earlier run timed; a run with --baselines eager shows none.
    from evalkit.intake.triage import triage
    from evalkit.judge.verdicts import Finding, Judgement, judged_row, new_row
    from evalkit.records import Submission

    text = "```python\nclass ModelNew:\n    pass\n```"
    early = triage(text)
    timing = {"median_ms": 1.0, "speedup": {"vs": "eager", "value": 3.0, "ci": [2.9, 3.1], "pairs": 20}}
    baselines = {"eager": {"median_ms": 3.0},
                 "compile": {"median_ms": 1.5, "relative": {"to": "eager", "value": 2.0, "ci": [1.9, 2.1], "pairs": 9}}}
    row = new_row(Submission("r", "p", "s", "s.py", text), "cpu", early)
    row = judged_row(row, Judgement(Finding.PASSED, "ok", timing=timing), early, baselines, (None, None), tmp_path,
                     kinds=("eager",))
    assert row.speedup_vs_eager == 3.0 and row.speedup_vs_compile is None and row.speedup_vs_compile_ci is None
    assert set(row.baselines) == {"eager"}
