"""Trusted side: how long a worker may take for each step of judging, from the problem's own time.

A step is one request and its reply: loading (import, build from cache, construct), the first call,
each later call. The limits come from the reference's eager time on this device, measured by the judge
before any submission runs, so a hang costs at most ``max(LOAD_S, FIRST_CALL_S)`` on problems whose
reference runs in milliseconds, while a correct answer up to ``SLOWDOWN_ALLOWED`` times slower than
eager is never cut off. ``--timeout`` or ``run_timeout_s`` in problem.toml set every step's limit instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from evalkit.judge.reference import ReferenceProblem, timing_seed
from evalkit.judge.timing import L2Flusher, TimingStats, measure
from evalkit.sandbox.clock import Clock

LOAD_S = 60.0  # start Python and torch, load a cached extension, construct ModelNew
FIRST_CALL_S = 60.0  # lazy CUDA/cuDNN start-up and any compilation done on the first call
CALL_FLOOR_S = 10.0  # a later call, however fast the reference (host jitter, a loaded machine)
SLOWDOWN_ALLOWED = 1000.0  # a call may be this many times slower than the reference's eager time
REFERENCE_CALLS = 3


@dataclass(frozen=True)
class TimeLimits:
    load_s: float
    first_call_s: float
    call_s: float
    per_call_s: float = 0.0  # SLOWDOWN_ALLOWED x the reference's time: what each call of a request adds

    @classmethod
    def derived(cls, reference_ms: float) -> "TimeLimits":
        per_call = SLOWDOWN_ALLOWED * reference_ms / 1e3
        call = max(CALL_FLOOR_S, per_call)
        return cls(load_s=LOAD_S, first_call_s=max(FIRST_CALL_S, call), call_s=call, per_call_s=per_call)

    @classmethod
    def fixed(cls, seconds: float) -> "TimeLimits":
        return cls(load_s=seconds, first_call_s=seconds, call_s=seconds)

    def request_s(self, calls: int, first: bool) -> float:
        """The limit of one request that runs forward ``calls`` times: the floors do not multiply."""
        return max(self.first_call_s if first else self.call_s, self.per_call_s * calls)


def reference_ms(ref: ReferenceProblem, seed: int) -> float:
    """The reference's eager time per call on its device, timed in the judge (a few calls: it only sets limits)."""
    clock, flusher = Clock(ref.device), L2Flusher(ref.device)
    inputs: list[Any] = []

    def prepare(i: int) -> None:
        inputs[:] = ref.make_inputs(timing_seed(seed, i))
        flusher.flush()
        clock.synchronize()

    def timed_call(_: int) -> float:
        with torch.no_grad():
            return clock.time_ms(lambda: ref.model(*inputs))[0]

    samples = measure(timed_call, prepare, warmup=1, trials=REFERENCE_CALLS)
    return TimingStats.from_samples(samples).median_ms


def time_limits(reference_ms: float, override_s: float | None) -> TimeLimits:
    """``override_s`` for every step when given, else limits derived from the reference's time."""
    return TimeLimits.fixed(override_s) if override_s else TimeLimits.derived(reference_ms)
