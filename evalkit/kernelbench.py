"""Trusted side: KernelBench's own call, judged by evalkit, so code written against KernelBench switches with one
import:

    from evalkit.kernelbench import eval_kernel_against_ref   # was: from src.eval import eval_kernel_against_ref
    result = eval_kernel_against_ref(original_model_src, custom_model_src, num_correct_trials=5,
                                     num_perf_trials=100, measure_performance=True)
    result.compiled, result.correctness, result.runtime, result.ref_runtime, result.metadata

The answer is built and run in evalkit's sandbox, checked against a float64 reference on fresh inputs and timed by
the judge's own clock (``docs/judge.md``), not in the caller's process; the reference, given as text, runs in a
sandbox of its own too (``Problem.from_source``). KernelBench's arguments that choose how it
times or where it builds (``timing_method``, ``build_dir``, ``verbose``) have no counterpart and are ignored;
``precision`` (``torch.bfloat16`` or ``"bf16"``, ...) becomes the problem's precision (``docs/problems.md``,
Precision: evalkit's tolerances against float64, not KernelBench's against PyTorch in that dtype); a ``backend``
evalkit does not judge yet is refused. Each call without an
``evaluator=`` starts judges of its own and ends them; pass one ``Evaluator`` to many calls to keep its judges,
builds and baselines (``evalkit.Evaluator``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from evalkit.records import VERDICT_INFO
from evalkit.row_parts import baseline_entry, part

RUNTIME_UNKNOWN = -1.0  # KernelBench's value for a time not measured
# Got through the build, or failed after it (crash, timeout): what KernelBench counts as compiled
COMPILED_VERDICTS = tuple(v.value for v, info in VERDICT_INFO.items() if info.compiled is not False)
_PROBLEM_KEYS = {v.value: info.kernelbench for v, info in VERDICT_INFO.items()
                 if info.kernelbench in ("compilation_error", "runtime_error", "correctness_issue")}


@dataclass
class KernelExecResult:
    """KernelBench's result fields; times in milliseconds; ``metadata["evalkit_row"]`` is evalkit's whole row."""

    compiled: bool = False
    correctness: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)
    runtime: float = RUNTIME_UNKNOWN
    runtime_stats: dict[str, Any] = field(default_factory=dict)
    ref_runtime: float = RUNTIME_UNKNOWN
    ref_runtime_stats: dict[str, Any] = field(default_factory=dict)


def eval_kernel_against_ref(original_model_src: str, custom_model_src: str, seed_num: int = 42,
                            num_correct_trials: int = 1, num_perf_trials: int = 10, measure_performance: bool = False,
                            timing_method: str = "cuda_event", verbose: bool = False, build_dir: Any = None,
                            device: Any = None, backend: str = "cuda", precision: Any = None,
                            check_for_excessive_speedup: bool = True, excessive_speedup_threshold: float = 10,
                            *, evaluator: Any = None) -> KernelExecResult:
    """KernelBench's ``eval_kernel_against_ref``, judged by evalkit (the module's docstring says what differs)."""
    from evalkit.schedule.evaluator import Evaluator
    from evalkit.sources.problems import Problem

    _refuse_unjudged(backend)
    problem = Problem.from_source(original_model_src, correctness_trials=int(num_correct_trials),
                                  timing_trials=max(int(num_perf_trials), 1), precision=precision_name(precision))
    if evaluator is not None:
        row = evaluator.judge(problem, custom_model_src)
    else:
        baselines = ("eager",) if measure_performance else ()
        with Evaluator(device=_device(device), baselines=baselines,
                       seed=int(seed_num), **_gpus(device)) as own:
            row = own.judge(problem, custom_model_src)
    return result_of(row, measure_performance, check_for_excessive_speedup, excessive_speedup_threshold)


def result_of(row: dict[str, Any], measure_performance: bool = True, check_for_excessive_speedup: bool = True,
              excessive_speedup_threshold: float = 10) -> KernelExecResult:
    """A KernelExecResult from evalkit's row (a ``results.jsonl`` dict)."""
    verdict, timing = row["verdict"], part(row, "timing")
    eager = baseline_entry(row, "eager")
    metadata: dict[str, Any] = {"evalkit_verdict": verdict, "evalkit_reason": row.get("reason", ""),
                                "evalkit_flags": row.get("flags", []), "feedback": row.get("feedback"),
                                "device": row.get("device"), "hardware": part(row, "baselines").get("device_name"),
                                "evalkit_row": row}
    problem_key = _PROBLEM_KEYS.get(verdict)
    if problem_key:
        metadata[problem_key] = row.get("reason", "")
    result = KernelExecResult(compiled=verdict in COMPILED_VERDICTS, correctness=verdict == "correct",
                              metadata=metadata)
    if measure_performance and verdict == "correct" and timing.get("median_ms"):
        result.runtime, result.runtime_stats = timing["median_ms"], _stats(timing)
        if eager.get("median_ms"):
            result.ref_runtime, result.ref_runtime_stats = eager["median_ms"], _stats(eager)
        speedup = row.get("speedup_vs_eager")
        if check_for_excessive_speedup and speedup and speedup > excessive_speedup_threshold:
            metadata["excessive_speedup"] = True
    return result


def _stats(timing: Mapping[str, Any]) -> dict[str, Any]:
    """KernelBench's runtime_stats keys (mean, std, min, max, num_trials), plus evalkit's median and IQR."""
    return {"mean": timing.get("mean_ms"), "std": timing.get("std_ms"), "min": timing.get("min_ms"),
            "max": timing.get("max_ms"), "num_trials": timing.get("count"), "median": timing.get("median_ms"),
            "iqr": timing.get("iqr_ms")}


def _device(device: Any) -> str:
    if device is None:
        return "auto"
    text = str(device)
    return "cpu" if text == "cpu" else "cuda"


def _gpus(device: Any) -> dict[str, str]:
    """KernelBench's ``device`` (an index, ``cuda:N`` or a torch.device) as evalkit's ``gpus``."""
    text = str(device) if device is not None else ""
    index = text.rsplit(":", 1)[-1] if text.startswith("cuda:") else text if text.isdigit() else ""
    return {"gpus": f"{index},"} if index else {}  # a list of one index, not a count


def _refuse_unjudged(backend: str) -> None:
    from evalkit.sources.errors import ProblemError

    if backend not in ("cuda", "triton"):
        raise ProblemError(f"backend {backend!r}: evalkit judges CUDA (load_inline) and Triton answers through this "
                           f"call; others are not supported yet")


def precision_name(precision: Any) -> str:
    """KernelBench's ``precision`` (None, a torch dtype, or "fp32"/"float32"/"fp16"/"float16"/"bf16"/"bfloat16")
    as evalkit's precision name."""
    from evalkit.sources.errors import ProblemError
    from evalkit.sources.settings import PRECISION_DTYPES

    if precision is None:
        return "fp32"
    text = str(precision).removeprefix("torch.")
    for name, dtype in PRECISION_DTYPES.items():
        if text in (name, dtype):
            return name
    raise ProblemError(f"precision {precision!r}: evalkit judges {', '.join(PRECISION_DTYPES)} "
                       f"(or torch.float32, torch.float16, torch.bfloat16)")
