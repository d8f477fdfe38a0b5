"""KernelBench's own call, judged by evalkit: KernelBench's result fields with their meanings, so code written
against KernelBench switches with one import; the answer runs in evalkit's sandbox, never in the caller's process,
and calls share one evaluator of the process."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Iterator

import pytest
import torch

from conftest import FIXTURES
from evalkit import Evaluator, kernelbench
from evalkit.kernelbench import KernelExecResult, UnsupportedBackend, eval_kernel_against_ref, result_of
from evalkit.schedule import engine
from evalkit.sources.errors import ProblemError

REFERENCE = (FIXTURES / "judge_problems" / "linear_relu" / "reference.py").read_text()
ANSWERS = FIXTURES / "judge_submissions" / "fixtures" / "linear_relu"
# KernelBench's signature at 423217d (src/kernelbench/eval.py): each parameter's name, in order, and its default;
# ``device`` (the current CUDA device there) and ``precision`` (torch.float32 there, None meaning fp32 here) aside
KERNELBENCH_SIGNATURE = [("original_model_src", None), ("custom_model_src", None), ("seed_num", 42),
                         ("num_correct_trials", 1), ("num_perf_trials", 10), ("measure_performance", False),
                         ("timing_method", "cuda_event"), ("verbose", False), ("build_dir", None), ("device", ...),
                         ("backend", "cuda"), ("precision", ...), ("check_for_excessive_speedup", True),
                         ("excessive_speedup_threshold", 10)]
KERNELBENCH_FIELDS = {"compiled", "correctness", "metadata", "runtime", "runtime_stats", "ref_runtime",
                      "ref_runtime_stats"}


@pytest.fixture()
def shared_cache(warm_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The calls' shared evaluator on the warm test cache, ended after the test."""
    monkeypatch.setenv("EVALKIT_CACHE", str(warm_cache))
    kernelbench.close()
    yield warm_cache
    kernelbench.close()


def test_the_signature_is_kernelbenchs() -> None:
    parameters = list(inspect.signature(eval_kernel_against_ref).parameters.values())
    given = [(p.name, ... if p.name in ("device", "precision") else
              None if p.default is inspect.Parameter.empty else p.default) for p in parameters[:len(KERNELBENCH_SIGNATURE)]]
    assert given == KERNELBENCH_SIGNATURE
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in parameters[len(KERNELBENCH_SIGNATURE):])


def test_kernelbenchs_example_call_reads_as_kernelbench_reads_it(shared_cache: Path) -> None:
    # scripts/generate_and_eval_single_sample.py at 423217d, as it calls it (its config's defaults filled in)
    result = eval_kernel_against_ref(REFERENCE, (ANSWERS / "correct_python.md").read_text(), verbose=False,
                                     measure_performance=True, timing_method="cuda_event", num_correct_trials=5,
                                     num_perf_trials=100, backend="cuda", precision=torch.float32)
    assert isinstance(result, KernelExecResult) and result.compiled and result.correctness, result.metadata
    assert result.metadata["correctness_trials"] == "(5 / 5)"
    row = result.metadata["evalkit_row"]
    assert result.runtime == result.runtime_stats["mean"] == row["timing"]["mean_ms"]  # a mean, as KernelBench's
    assert result.runtime_stats["num_trials"] == row["timing"]["count"] >= 1
    assert result.ref_runtime == result.ref_runtime_stats["mean"] > 0  # the reference's mean, beside the answer
    assert {"mean", "std", "min", "max", "num_trials"} <= set(result.ref_runtime_stats)
    dumped = result.model_dump()
    assert set(dumped) == KERNELBENCH_FIELDS and dumped["runtime"] == result.runtime
    json.dumps(dumped, allow_nan=False)


def test_calls_share_one_evaluator_so_a_second_pays_no_judge_start(shared_cache: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    starts: list[object] = []
    start = engine.Engine.__init__

    def counted(self, *args, **kwargs) -> None:  # every judge pool (Engine) started
        starts.append(self)
        start(self, *args, **kwargs)
    monkeypatch.setattr(engine.Engine, "__init__", counted)
    wrong = eval_kernel_against_ref(REFERENCE, (ANSWERS / "incorrect.py").read_text(), num_correct_trials=3,
                                    device="cpu")
    assert len(starts) == 1, "the first call starts the shared evaluator"
    failing = eval_kernel_against_ref(REFERENCE, (ANSWERS / "runtime_error.py").read_text(), device="cpu")
    assert len(starts) == 1, "the second call started judges of its own"
    # what each says, in KernelBench's keys
    assert wrong.compiled and not wrong.correctness and wrong.runtime == -1.0
    assert wrong.metadata["correctness_trials"] == "(0 / 3)" and wrong.metadata["max_difference"] == ["0.100000"]
    assert wrong.metadata["avg_difference"] == ["0.100000"] and "outside" in wrong.metadata["correctness_issue"]
    assert failing.compiled and not failing.correctness
    assert failing.metadata["runtime_error_name"] == "builtins.NameError"
    assert "'F' is not defined" in failing.metadata["runtime_error"] and failing.metadata["device"] == "cpu"
    assert failing.metadata["runtime_error_traceback"] == ('  File "submission.py", line 11, in forward\n'
                                                          '    return F.relu(self.linear(x))\n')  # the answer's frames


def test_a_call_given_an_evaluator_judges_on_it(warm_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALKIT_CACHE", str(warm_cache))
    with Evaluator(problems=FIXTURES / "judge_problems", device="cpu", cache_dir=warm_cache, baselines=("eager",),
                   timing_trials=5, seed=3) as ev:
        built = eval_kernel_against_ref(REFERENCE, (ANSWERS / "compile_error.py").read_text(), evaluator=ev)
    assert not built.compiled and not built.correctness
    assert built.metadata["compilation_error_name"] == "builtins.RuntimeError"  # what a failed torch build raises
    assert "line 12 of the answer" in built.metadata["compilation_error"]


@pytest.mark.parametrize(("backend", "why"), [
    ("hip", "AMD GPUs"), ("tilelang", "no TileLang answer"), ("cute", "no CuTe DSL answer"),
    ("thunderkittens", "THUNDERKITTENS_ROOT"), ("HIP", "AMD GPUs"), ("opencl", "not one of KernelBench's")])
def test_each_backend_evalkit_does_not_judge_is_named_with_why(backend: str, why: str) -> None:
    with pytest.raises(UnsupportedBackend, match=f"backend '{backend}' .*{why}.*judges backend 'cuda' and 'triton'"):
        eval_kernel_against_ref(REFERENCE, "x", backend=backend)


def test_kernelbenchs_backend_names_are_taken_in_any_case_and_precisions_checked() -> None:
    for backend in ("cuda", "CUDA", "Triton"):
        kernelbench.refuse_unjudged(backend)
    with pytest.raises(ProblemError, match="precision 'fp8'"):
        eval_kernel_against_ref(REFERENCE, "x", precision="fp8")


def test_kernelbenchs_precisions_name_evalkits() -> None:
    from evalkit.kernelbench import precision_name

    assert [precision_name(p) for p in (None, torch.float32, "fp16", torch.bfloat16, "bfloat16")] == [
        "fp32", "fp32", "fp16", "bf16", "bf16"]


def test_an_excessive_speedup_is_marked_as_kernelbench_marks_it() -> None:
    row = {"verdict": "correct", "timing": {"mean_ms": 0.1, "median_ms": 0.1, "count": 5}, "speedup_vs_eager": 30.0,
           "baselines": {"eager": {"mean_ms": 3.0, "median_ms": 3.0, "count": 5}}, "flags": [], "reason": "correct",
           "correctness": {"trials": 5}}
    result = result_of(row)
    assert (result.runtime, result.ref_runtime) == (0.1, 3.0) and result.metadata["excessive_speedup"] is True
    assert "excessive_speedup" not in result_of(row, excessive_speedup_threshold=50).metadata
    assert result_of(row, measure_performance=False).runtime == -1.0
