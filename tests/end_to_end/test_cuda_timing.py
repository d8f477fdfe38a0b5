"""On a CUDA GPU: times are the judge's own, stable under evalkit's own build load, and cannot be bent.

- honest answers of about 20 us, 1 ms and 100 ms a call, judged three times (the third beside a pool of
  real CUDA builds and a build spinning every core), are never flagged and read about 1x eager, since
  the baselines are the reference judged through the same path;
- a worker clock scaled by 0.88 earns nothing; predicted inputs are wrong; fp16 is flagged
  reduced_precision; cuDNN beside a custom kernel that does nothing is flagged library_dominated.

Run on the device (see docs/gpu-runs/); skipped on machines without a GPU.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import FIXTURES, ROOT
from evalkit.cli.main import main

pytestmark = pytest.mark.cuda

TIMING_FLAGS = {"noisy_timing", "implausible_speedup", "timing_mismatch"}
PROBLEMS = ("tiny_relu", "mid_matmul", "long_chain")
# An honest copy of the reference and the eager baseline are the same code timed the same way: their medians
# agree within 5%, or within the judge's resolution on a cross-process call (docs/judge.md) when that is more.
SAME_WITHIN, RESOLUTION_MS = 0.05, 0.25


def _score(submissions: Path, problems: Path, out: Path, cache: Path) -> dict[tuple[str, str], dict]:
    args = ["score", str(submissions), "--problems", str(problems), "--out", str(out), "--device", "cuda",
            "--baselines", "eager", "--timing-trials", "30", "--cache-dir", str(cache), "--jobs", "8"]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    _keep_for_the_record(out, rows)
    return {(r["problem"], r["sample"]): r for r in rows}


def _keep_for_the_record(out: Path, rows: list[dict]) -> None:
    """One line per timed row (and the report's baselines) in $EVALKIT_ARTIFACTS, for docs/gpu-runs."""
    artifacts = os.environ.get("EVALKIT_ARTIFACTS")
    if not artifacts:
        return
    keep = ("median_ms", "iqr_ms", "overhead_ms", "jitter_ms", "claimed_median_ms", "attempts", "below_resolution")
    with open(Path(artifacts) / "cuda_timing_rows.jsonl", "a") as sink:
        for row in rows:
            timing = row.get("timing") or {}
            eager = (row.get("baselines") or {}).get("eager") or {}
            sink.write(json.dumps({"report": out.name, "problem": row["problem"], "sample": row["sample"],
                                   "verdict": row["verdict"], "flags": row["flags"],
                                   "speedup_vs_eager": row.get("speedup_vs_eager"),
                                   "timing": {k: timing.get(k) for k in keep},
                                   "eager": {k: eager.get(k) for k in keep},
                                   "correctness": {k: (row.get("correctness") or {}).get(k) for k in (
                                       "rel_l2_err", "max_abs_err", "pytorch_own", "precision_class",
                                       "custom_time_share")}}) + "\n")


@pytest.fixture(scope="module")
def honest_runs(tmp_path_factory: pytest.TempPathFactory) -> list[dict[tuple[str, str], dict]]:
    base = tmp_path_factory.mktemp("timing")
    problems = FIXTURES / "timing_problems"
    runs = [_score(FIXTURES / "timing_submissions", problems, base / f"quiet{i}", base / "cache") for i in (1, 2)]
    loaded = base / "loaded_submissions"  # the honest answers plus real builds and a hostile one
    shutil.copytree(FIXTURES / "timing_submissions", loaded)
    shutil.copytree(FIXTURES / "timing_build_load", loaded, dirs_exist_ok=True)
    runs.append(_score(loaded, problems, base / "loaded", base / "fresh_cache"))
    return runs


@pytest.mark.parametrize("problem", PROBLEMS)
def test_honest_answers_are_never_flagged_and_read_1x_in_three_runs_one_under_build_load(honest_runs, problem):
    for run in honest_runs:
        row = run[(problem, "pytorch")]
        assert row["verdict"] == "correct", row["reason"]
        assert not TIMING_FLAGS & set(row["flags"]), (row["flags"], row["timing"])
        answer, eager = row["timing"]["median_ms"], row["baselines"]["eager"]["median_ms"]
        assert abs(answer - eager) <= max(SAME_WITHIN * eager, RESOLUTION_MS), (answer, eager)


def test_the_build_load_was_real(honest_runs):
    loaded = honest_runs[2]
    assert loaded[("tiny_relu", "a_spins_every_core_while_building")]["verdict"] == "correct"
    assert all(loaded[("tiny_relu", f"b_custom_relu_{v}")]["verdict"] == "correct" for v in (1, 2, 3, 4))


@pytest.fixture(scope="module")
def attacks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    base = tmp_path_factory.mktemp("attacks")
    rows = _score(FIXTURES / "cuda_attack_submissions", ROOT / "problems", base / "report", base / "cache")
    return {sample: row for (_, sample), row in rows.items()}


def test_a_scaled_worker_clock_earns_nothing(attacks):
    row = attacks["clock_scaled"]
    assert row["verdict"] == "correct", row["reason"]
    timing, eager = row["timing"], row["baselines"]["eager"]["median_ms"]
    # The worker's clock claimed less than the judge's own clock saw, and the speedup comes from the judge's.
    # (cuDNN against cuDNN reads about 1x, but two processes' medians of it differ by up to ~7% on a busy
    # host, docs/gpu-runs/2026-11-24-kept-problems-and-profiler-h200: a bound on that ratio would test noise.)
    # The speedup is the median of the window's paired ratios, near the judge's medians' ratio; what the claim would
    # have earned lies well above it.
    # Against the baseline's median in the same window (``timing.partner``): the baseline's record comes from its
    # own window, and on a busy host the two differed by 3.07% (docs/gpu-runs/2026-11-27-four-gpu-host-h200).
    partner = (timing.get("partner") or {}).get("median_ms") or eager
    assert timing["claimed_median_ms"] < 0.95 * timing["median_ms"], timing
    assert row["speedup_vs_eager"] == pytest.approx(partner / timing["median_ms"], rel=0.03), (timing, partner)
    assert row["speedup_vs_eager"] < 0.97 * partner / timing["claimed_median_ms"], (timing, partner)


def test_predicted_inputs_are_wrong(attacks):
    assert attacks["predicts_inputs"]["verdict"] == "incorrect", attacks["predicts_inputs"]["reason"]


def test_fp16_is_flagged_reduced_precision(attacks):
    row = attacks["fp16"]
    assert row["verdict"] == "correct", row["reason"]
    assert "reduced_precision" in row["flags"]
    assert row["correctness"]["precision_class"] in ("tf32_or_half", "lower")


def test_cudnn_beside_a_no_op_kernel_is_flagged_library_dominated(attacks):
    row = attacks["cudnn_noop"]
    assert row["verdict"] == "correct", row["reason"]
    assert "library_dominated" in row["flags"], row["correctness"].get("kernel_us")
    assert row["correctness"]["custom_time_share"] < 0.05
