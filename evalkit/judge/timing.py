"""Trusted side. The one timing routine used for submissions and baselines alike.

A timed call is: ``prepare()`` (fresh input contents, L2 flush; never timed), then the
clock (``evalkit.sandbox.clock.Clock``, the same code the worker runs) around one
call that stops only after a device-wide synchronize, so work left on side streams is counted.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Callable

import torch

L2_FLUSH_BYTES = 256 * 1024 * 1024


class L2Flusher:
    """Evicts the GPU's L2 cache by writing a buffer larger than it (a no-op on CPU)."""

    def __init__(self, device: str, nbytes: int = L2_FLUSH_BYTES) -> None:
        self._buffer = torch.empty(nbytes // 4, dtype=torch.int32, device=device) if device == "cuda" else None

    def flush(self) -> None:
        if self._buffer is not None:
            self._buffer.zero_()


@dataclass
class TimingStats:
    count: int
    median_ms: float
    mean_ms: float
    std_ms: float
    min_ms: float
    max_ms: float
    iqr_ms: float
    p25_ms: float
    p75_ms: float

    @classmethod
    def from_samples(cls, samples_ms: list[float]) -> "TimingStats":
        if not samples_ms:
            raise ValueError("no timing samples")
        ordered = sorted(samples_ms)
        if len(ordered) >= 2:
            p25, _, p75 = statistics.quantiles(ordered, n=4, method="inclusive")
        else:
            p25 = p75 = ordered[0]
        return cls(
            count=len(ordered),
            median_ms=statistics.median(ordered),
            mean_ms=statistics.fmean(ordered),
            std_ms=statistics.pstdev(ordered) if len(ordered) > 1 else 0.0,
            min_ms=ordered[0],
            max_ms=ordered[-1],
            iqr_ms=p75 - p25,
            p25_ms=p25,
            p75_ms=p75,
        )


def measure(
    timed_call: Callable[[int], float],
    prepare: Callable[[int], None],
    *,
    warmup: int,
    trials: int,
) -> list[float]:
    """The timing protocol: ``warmup`` untimed-but-identical calls, then ``trials`` timed ones.

    ``prepare(i)`` runs before every call (warm-up included, so a submission cannot tell
    the two apart); ``timed_call(i)`` returns the milliseconds of call ``i``.
    Returns the samples of the timed calls only.
    """
    samples: list[float] = []
    for i in range(warmup + trials):
        prepare(i)
        elapsed = timed_call(i)
        if i >= warmup:
            samples.append(elapsed)
    return samples


def speedup(baseline_median_ms: float | None, candidate_median_ms: float | None) -> float | None:
    if not baseline_median_ms or not candidate_median_ms or candidate_median_ms <= 0:
        return None
    return baseline_median_ms / candidate_median_ms
