"""Trusted side: KernelBench's own call, judged by evalkit, so code written against KernelBench switches with one
import:

    from evalkit.kernelbench import eval_kernel_against_ref   # was: from kernelbench.eval import eval_kernel_against_ref
    result = eval_kernel_against_ref(original_model_src, custom_model_src, num_correct_trials=5,
                                     num_perf_trials=100, measure_performance=True)
    result.compiled, result.correctness, result.runtime, result.ref_runtime, result.metadata, result.model_dump()

The result has KernelBench's ``KernelExecResult`` fields with their meanings (KernelBench at 423217d): ``runtime``
and ``ref_runtime`` are mean milliseconds per call, of the answer and of the reference (PyTorch eager, timed in the
same window as the answer), ``-1.0`` when not measured; ``runtime_stats`` hold mean, std, min, max and num_trials
(evalkit's median and interquartile range beside them); ``metadata`` holds KernelBench's keys for what happened
(``hardware``, ``device``, ``compilation_error`` / ``runtime_error`` / ``correctness_issue`` and their ``*_name``,
``runtime_error_traceback``, ``max_difference`` and ``avg_difference`` of the trial that failed,
``correctness_trials`` as ``"(passed / trials)"``, ``excessive_speedup``), plus evalkit's own (``evalkit_row``,
the whole row; ``feedback``). evalkit stops at the first wrong trial, so the trials after it count as not passed.

What differs from KernelBench: the answer is built and run in evalkit's sandbox, checked against a float64 reference
on fresh secret inputs and timed by the judge's own clock (``docs/judge.md``), never in the caller's process;
the reference, given as text, runs in a sandbox of its own too (``Problem.from_source``).
KernelBench's arguments that choose how it times or where it builds (``timing_method``, ``build_dir``, ``verbose``)
have no counterpart and are ignored; ``precision`` (``torch.bfloat16`` or ``"bf16"``, ...) becomes the problem's
precision (``docs/problems.md``, Precision: evalkit's tolerances against float64, not KernelBench's against PyTorch
in that dtype). A ``backend`` evalkit does not judge through this call is refused by name (``UnsupportedBackend``).

Every call without an ``evaluator=`` shares one ``Evaluator`` of this process (its judges, builds and baselines),
started by the first call and kept until the process ends or ``close()``; a call that needs other machine settings
(device, seed, or whether it measures performance) replaces it. Pass ``evaluator=`` to judge on one of your own.
"""

from __future__ import annotations

import logging
import os
import statistics
import threading
from dataclasses import asdict, dataclass, field
from typing import Any

from evalkit.records import VERDICT_INFO, EvalkitError
from evalkit.report.kernelbench_export import kernelbench_metadata, runtime_stats
from evalkit.row_parts import baseline_entry, part

logger = logging.getLogger(__name__)

RUNTIME_UNKNOWN = -1.0  # KernelBench's value for a time not measured
# Got through the build, or failed after it (crash, timeout): what KernelBench counts as compiled
COMPILED_VERDICTS = tuple(v.value for v, info in VERDICT_INFO.items() if info.compiled is not False)
JUDGED_BACKENDS = ("cuda", "triton")
# Why each other backend of KernelBench's is not judged through this call
UNJUDGED_BACKENDS = {
    "hip": "HIP kernels run on AMD GPUs (ROCm); evalkit judges on NVIDIA GPUs and CPUs only",
    "tilelang": "no TileLang answer has been judged on a GPU by evalkit yet (docs/gpu-runs/README.md), so none is "
                "judged through this call",
    "cute": "no CuTe DSL answer has been judged on a GPU by evalkit yet (docs/gpu-runs/README.md), so none is "
            "judged through this call",
    "thunderkittens": "a ThunderKittens answer builds against a ThunderKittens checkout ($THUNDERKITTENS_ROOT), "
                      "which evalkit's build sandbox does not provide",
}


class UnsupportedBackend(EvalkitError, ValueError):
    """A ``backend`` this call does not judge; the message names it, says why, and which ones it judges."""


@dataclass
class KernelExecResult:
    """KernelBench's result fields, with their meanings; times in milliseconds."""

    compiled: bool = False
    correctness: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)
    runtime: float = RUNTIME_UNKNOWN
    runtime_stats: dict[str, Any] = field(default_factory=dict)
    ref_runtime: float = RUNTIME_UNKNOWN
    ref_runtime_stats: dict[str, Any] = field(default_factory=dict)

    def model_dump(self) -> dict[str, Any]:
        """The fields as a dict of plain values (KernelBench's result is a pydantic model: its ``model_dump``)."""
        return asdict(self)


def eval_kernel_against_ref(original_model_src: str, custom_model_src: str, seed_num: int = 42,
                            num_correct_trials: int = 1, num_perf_trials: int = 10, measure_performance: bool = False,
                            timing_method: str = "cuda_event", verbose: bool = False, build_dir: Any = None,
                            device: Any = None, backend: str = "cuda", precision: Any = None,
                            check_for_excessive_speedup: bool = True, excessive_speedup_threshold: float = 10,
                            *, evaluator: Any = None) -> KernelExecResult:
    """KernelBench's ``eval_kernel_against_ref``, judged by evalkit (the module's docstring says what differs)."""
    from evalkit.sources.problems import Problem

    refuse_unjudged(backend)
    problem = Problem.from_source(original_model_src, correctness_trials=int(num_correct_trials),
                                  timing_trials=max(int(num_perf_trials), 1), precision=precision_name(precision))
    judge = evaluator if evaluator is not None else SHARED.evaluator(device, int(seed_num), measure_performance)
    row = judge.judge(problem, custom_model_src)
    result = result_of(row, measure_performance, check_for_excessive_speedup, excessive_speedup_threshold,
                       trials=int(num_correct_trials))
    if device is not None:
        result.metadata["device"] = str(device)  # KernelBench's: the device it was asked for
    return result


def close() -> None:
    """End the evaluator the calls without ``evaluator=`` share (the next such call starts a new one)."""
    SHARED.close()


class SharedEvaluator:
    """The one ``Evaluator`` of this process that calls without ``evaluator=`` share, for the machine settings it
    was started with; a call with others replaces it (ending the answers still in flight on the old one: give calls
    of different settings an ``evaluator=`` each). A forked child starts its own (the parent's judges are not its
    to use)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._key: tuple[Any, ...] | None = None
        self._evaluator: Any = None

    def evaluator(self, device: Any, seed: int, measure_performance: bool) -> Any:
        from evalkit.schedule.evaluator import Evaluator

        key = (_device(device), tuple(sorted(_gpus(device).items())), seed, bool(measure_performance), os.getpid())
        with self._lock:
            if self._evaluator is not None and self._key == key:
                return self._evaluator
            if self._evaluator is not None and self._key is not None and self._key[-1] == os.getpid():
                logger.info("the KernelBench call's evaluator restarts for other settings (device, seed or "
                            "measure_performance)")
                self._evaluator.close()
            baselines = ("eager",) if measure_performance else ()  # problems come as text with each call
            self._evaluator = Evaluator(device=key[0], baselines=baselines, seed=seed, **_gpus(device))
            self._key = key
            return self._evaluator

    def close(self) -> None:
        with self._lock:
            if self._evaluator is not None and self._key is not None and self._key[-1] == os.getpid():
                self._evaluator.close()
            self._evaluator, self._key = None, None


SHARED = SharedEvaluator()  # started by the first call that needs it, never at import


def result_of(row: dict[str, Any], measure_performance: bool = True, check_for_excessive_speedup: bool = True,
              excessive_speedup_threshold: float = 10, trials: int | None = None) -> KernelExecResult:
    """A KernelExecResult from evalkit's row (a ``results.jsonl`` dict); ``trials``: the correctness trials asked."""
    verdict = row["verdict"]
    metadata = kernelbench_metadata(row, trials)
    metadata.pop("excessive_speedup", None)  # KernelBench's own rule below decides it here
    metadata.update(feedback=row.get("feedback"), evalkit_verdict=verdict, evalkit_reason=row.get("reason", ""),
                    evalkit_flags=row.get("flags", []), evalkit_row=row)
    result = KernelExecResult(compiled=verdict in COMPILED_VERDICTS, correctness=verdict == "correct",
                              metadata=metadata)
    stats = runtime_stats(row)
    if not measure_performance or not stats:
        return result
    result.runtime, result.runtime_stats = stats["mean"], {**stats, "iqr": part(row, "timing").get("iqr_ms")}
    reference = reference_stats(row)
    if reference:
        result.ref_runtime, result.ref_runtime_stats = reference["mean"], reference
        speedup = result.ref_runtime / result.runtime if result.runtime > 0 else None
        if check_for_excessive_speedup and speedup and speedup > excessive_speedup_threshold:
            metadata["excessive_speedup"] = True
    return result


def reference_stats(row: dict[str, Any]) -> dict[str, Any]:
    """The reference's (PyTorch eager's) runtime_stats: from the window it was timed in beside the answer, else
    from the problem's eager baseline; {} when neither was timed."""
    timing = part(row, "timing")
    samples = (timing.get("partner") or {}).get("samples_ms") or []
    if (timing.get("speedup") or {}).get("vs") == "eager" and samples:
        return {"mean": statistics.fmean(samples), "std": statistics.pstdev(samples), "min": min(samples),
                "max": max(samples), "num_trials": len(samples), "median": statistics.median(samples)}
    eager = baseline_entry(row, "eager")
    if not isinstance(eager.get("mean_ms"), (int, float)):
        return {}
    return {"mean": eager["mean_ms"], "std": eager.get("std_ms"), "min": eager.get("min_ms"),
            "max": eager.get("max_ms"), "num_trials": eager.get("count"), "median": eager.get("median_ms")}


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


def refuse_unjudged(backend: str) -> None:
    """``UnsupportedBackend`` for a backend this call does not judge, named and with why (KernelBench's names,
    in any case as KernelBench takes them)."""
    name = str(backend).lower()
    if name in JUDGED_BACKENDS:
        return
    judged = f"this call judges backend {' and '.join(map(repr, JUDGED_BACKENDS))} answers"
    if name in UNJUDGED_BACKENDS:
        raise UnsupportedBackend(f"backend {backend!r} is not supported by evalkit's eval_kernel_against_ref: "
                                 f"{UNJUDGED_BACKENDS[name]}; {judged}")
    known = ", ".join(JUDGED_BACKENDS + tuple(UNJUDGED_BACKENDS))
    raise UnsupportedBackend(f"backend {backend!r} is not one of KernelBench's ({known}); {judged}")


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
