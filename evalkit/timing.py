"""The one timing routine used for submissions and baselines alike.

A timed call is: ``prepare()`` (fresh input contents, L2 flush; never timed), then the
clock around one call that stops only after a device-wide synchronize, so work left
on side streams is counted. ``Clock`` binds the clock and synchronize functions when it
is made; the worker makes its clock before importing submission code, so a submission
that patches ``torch.cuda.Event`` or ``time.perf_counter`` later does not change it.
(It could still patch the clock object; the judge cross-checks against its own wall time.)
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable

import torch

L2_FLUSH_BYTES = 256 * 1024 * 1024


class Clock:
    """Times one call: CUDA events around a device-wide synchronize, or a host clock on CPU."""

    def __init__(self, device: str) -> None:
        self.device = device
        self._perf_counter = time.perf_counter
        if device == "cuda":
            self._event = torch.cuda.Event
            self._synchronize = torch.cuda.synchronize
        else:
            self._event = None
            self._synchronize = lambda: None

    def synchronize(self) -> None:
        self._synchronize()

    def time_ms(self, fn: Callable[[], object]) -> tuple[float, object]:
        """Run ``fn`` once and return (elapsed milliseconds, its result)."""
        self._synchronize()
        if self._event is None:
            start = self._perf_counter()
            result = fn()
            return (self._perf_counter() - start) * 1e3, result
        start, end = self._event(enable_timing=True), self._event(enable_timing=True)
        start.record()
        result = fn()
        self._synchronize()  # device-wide: waits for every stream, not only the current one
        end.record()
        end.synchronize()
        return start.elapsed_time(end), result

    def wall_ms(self, fn: Callable[[], object]) -> tuple[float, object]:
        """Host wall time of ``fn`` (used by the judge to observe a worker from outside)."""
        start = self._perf_counter()
        result = fn()
        return (self._perf_counter() - start) * 1e3, result


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
