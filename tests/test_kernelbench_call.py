"""KernelBench's own call, judged by evalkit: the same result fields, so code written against KernelBench switches
with one import; the answer runs in evalkit's sandbox, never in the caller's process."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import FIXTURES
from evalkit import Evaluator
from evalkit.kernelbench import KernelExecResult, eval_kernel_against_ref, result_of
from evalkit.sources.errors import ProblemError

REFERENCE = (FIXTURES / "judge_problems" / "linear_relu" / "reference.py").read_text()
ANSWERS = FIXTURES / "judge_submissions" / "fixtures" / "linear_relu"


def test_a_correct_kernel_and_a_wrong_one_read_as_kernelbench_reads_them(warm_cache: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALKIT_CACHE", str(warm_cache))
    # Eager only, as KernelBench's call itself asks (``ref_runtime`` is the eager time): on a CPU, the default's
    # torch.compile baselines of the three problems cost more than the rest of the test together.
    with Evaluator(problems=FIXTURES / "judge_problems", device="cpu", cache_dir=warm_cache, baselines=("eager",),
                   timing_trials=5, seed=3) as ev:
        good = eval_kernel_against_ref(REFERENCE, (ANSWERS / "correct_cpp.py").read_text(), num_correct_trials=2,
                                       measure_performance=True, evaluator=ev)
        bad = eval_kernel_against_ref(REFERENCE, (ANSWERS / "incorrect.py").read_text(), evaluator=ev)
    assert isinstance(good, KernelExecResult) and good.compiled and good.correctness, good.metadata["evalkit_reason"]
    assert good.runtime > 0 and good.ref_runtime > 0 and good.runtime_stats["num_trials"] >= 1
    assert good.metadata["evalkit_row"]["correctness"]["trials"] == 2, "num_correct_trials reached the judge"
    assert bad.compiled and not bad.correctness and "outside" in bad.metadata["correctness_issue"]
    assert bad.runtime == -1.0


def test_a_call_without_an_evaluator_starts_and_ends_its_own(warm_cache: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALKIT_CACHE", str(warm_cache))
    result = eval_kernel_against_ref(REFERENCE, (ANSWERS / "compile_error.py").read_text(), device="cpu")
    assert not result.compiled and not result.correctness and result.metadata["compilation_error"]


def test_what_evalkit_cannot_judge_yet_is_refused_not_misjudged() -> None:
    with pytest.raises(ProblemError, match="backend 'tilelang'"):
        eval_kernel_against_ref(REFERENCE, "x", backend="tilelang")
    with pytest.raises(ProblemError, match="precision 'fp8'"):
        eval_kernel_against_ref(REFERENCE, "x", precision="fp8")


def test_kernelbenchs_precisions_name_evalkits() -> None:
    import torch

    from evalkit.kernelbench import precision_name

    assert [precision_name(p) for p in (None, torch.float32, "fp16", torch.bfloat16, "bfloat16")] == [
        "fp32", "fp32", "fp16", "bf16", "bf16"]


def test_an_excessive_speedup_is_marked_as_kernelbench_marks_it() -> None:
    row = {"verdict": "correct", "timing": {"median_ms": 0.1, "count": 5}, "speedup_vs_eager": 30.0,
           "baselines": {"eager": {"median_ms": 3.0}}, "flags": [], "reason": "correct"}
    assert result_of(row).metadata["excessive_speedup"] is True
    assert "excessive_speedup" not in result_of(row, excessive_speedup_threshold=50).metadata
