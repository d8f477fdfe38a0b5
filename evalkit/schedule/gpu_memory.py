"""Trusted side: each answer's share of its GPU's memory among the judges of that GPU (what the kept problems may hold,
and handing memory back, are ``kept_problems``'s)."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import Any

import torch

from evalkit.judge.reference import values_bytes
from evalkit.judge.submission_judge import Judge
from evalkit.sandbox.gpu_gate import GpuGate

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


def tail_memory(gate: GpuGate | None, judge: Judge | None, device: str) -> AbstractContextManager[Any]:
    """What an answer holds once timed (``overlap``'s tail): the inputs and outputs of one call for its profile's
    worker, and one call's float64 reference for its checks (a float64 output is twice a float32 one). conv2d_square's:
    about 27 GiB of the 50 its whole judging holds, so the next answer's front fits beside it."""
    if gate is None or judge is None:
        return nullcontext()
    outputs = values_bytes(judge.specs)
    return gate.memory(values_bytes(judge.input_templates) + outputs + 2 * outputs, answers_budget_bytes(device))


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
