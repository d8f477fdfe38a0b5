"""Trusted side: a device judge's GPU memory: what its kept problems may hold, what the GPU has free, each answer's
share among the judges of its GPU, and handing cached memory back, so that the answers' workers (other processes)
find it."""

from __future__ import annotations

import gc
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import torch

from evalkit.judge.reference import values_bytes
from evalkit.judge.submission_judge import Judge
from evalkit.sandbox.cuda_buffers import CudaDriverError
from evalkit.sandbox.gpu_gate import GpuGate

# Kept problems hold GPU memory the answers' workers may need: a share of the device's memory (split among the
# judges of one GPU), which a problem larger than it never shares with another.
KEPT_PROBLEMS_MEMORY_SHARE = 0.25
# A problem given as text keeps more than the judge's tensors: the buffers lent to its reference's worker and that
# worker's own memory, neither of them the judge's allocations. So a new problem is also made room for while the
# GPU has less than this share free, whoever holds it: five kept problems of the shipped set (their references
# sandboxed) ran the H200 out of memory (docs/gpu-runs/2026-11-29-rl-throughput-h200).
FREE_MEMORY_FLOOR_SHARE = 0.35
# The answers the judges of one GPU judge at once hold their working sets (``answer_bytes``) within this share of its
# memory, the rest left to kept problems, workers and caches: a judge waits for its share (``gpu_gate.GpuGate.memory``).
# Two judges, each judging conv2d_square's answers, ran an H200 out of memory (docs/gpu-runs/2026-11-29-rl-steps-h200).
ANSWERS_MEMORY_SHARE = 0.6


def answer_bytes(judge: Judge) -> int:
    """About what judging one answer of ``judge``'s problem allocates on its GPU: the inputs and outputs lent to the
    answer's worker and to its live baseline's (a request's calls each), what each worker computes its outputs in,
    and one call's float64 reference. conv2d_square's: 50 GiB of an H200's 140."""
    inputs, outputs = values_bytes(judge.input_templates), values_bytes(judge.specs)
    return 2 * judge.batch * (inputs + outputs) + 2 * outputs + 2 * outputs


def answers_budget_bytes(device: str) -> int:
    """The GPU memory the answers judged at once on it may hold together (``ANSWERS_MEMORY_SHARE``)."""
    if device != "cuda" or not torch.cuda.is_initialized():
        return 0
    return int(_total_bytes() * ANSWERS_MEMORY_SHARE)


def _total_bytes() -> int:
    return torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory


def answer_memory(gate: GpuGate | None, judge: Judge | None, device: str) -> AbstractContextManager[Any]:
    """Hold ``judge``'s next answer's share of its GPU's memory against the other judges of that GPU, through
    ``gate`` (nothing to hold without a gate, or without a problem loaded)."""
    if gate is None or judge is None:
        return nullcontext()
    return gate.memory(answer_bytes(judge), answers_budget_bytes(device))


def answers_memory_alone(gate: GpuGate | None, device: str) -> AbstractContextManager[Any]:
    """Hold the whole of the answers' share of the GPU's memory: once no other judge's answer holds any of it, and
    none starts meanwhile (nothing to hold without a gate)."""
    if gate is None:
        return nullcontext()
    budget = answers_budget_bytes(device)
    return gate.memory(budget, budget)


def kept_memory_share(gpu_judges: int) -> float:
    """The share of its GPU's memory a judge's kept problems may hold, with ``gpu_judges`` judges on that GPU."""
    return KEPT_PROBLEMS_MEMORY_SHARE / max(1, gpu_judges)


def held_share(device: str, lent_bytes: int) -> float:
    """The share of the GPU's memory this process's tensors hold, plus ``lent_bytes`` it allocated outside torch's
    allocator (0 on CPU)."""
    if device != "cuda" or not torch.cuda.is_initialized():
        return 0.0
    return (torch.cuda.memory_allocated() + lent_bytes) / _total_bytes()


def free_share(device: str) -> float:
    """The share of the GPU's memory free, whoever holds the rest (1 on CPU)."""
    if device != "cuda" or not torch.cuda.is_initialized():
        return 1.0
    free, total = torch.cuda.mem_get_info()
    return free / total


def out_of_memory(err: BaseException) -> bool:
    """The GPU ran out of memory, as this process observed it: torch's error, or the driver refusing an allocation
    (``cuda_buffers``: the buffers a judge lends a sandboxed reference). A sandboxed worker's word for it is weighed
    apart (``kept_problems.KeptProblems.out_of_memory``)."""
    return isinstance(err, torch.OutOfMemoryError) or \
        (isinstance(err, CudaDriverError) and err.name == "CUDA_ERROR_OUT_OF_MEMORY")


def release_cached_memory(device: str) -> None:
    """Hand the GPU memory torch's allocator keeps cached back to the device: the judge's workers are other
    processes, and a large problem's float64 reference leaves tens of GiB cached that they could not use."""
    if device == "cuda" and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def free_garbage(device: str) -> None:
    """Tensors held in reference cycles (a traceback's frames) go now, not at some later GC, and their memory
    back to the device."""
    gc.collect()
    release_cached_memory(device)
