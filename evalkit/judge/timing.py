"""Trusted side: the statistics of timing, what a call's time excludes, and when a timing is too noisy.

Submissions and baselines are both timed by ``submission_judge.Judge`` through ``session.Session.observe``
(the judge's own clock); this module holds the pure parts: ``timing_stats`` (the statistics
``row_parts.TimingStats`` declares, as a timing record holds them), the judge-calibrated
``Overhead`` subtracted from every call and how many pings calibrate it (``PingBudget``), how many calls one
request makes (``batch_size``), the noise rule (``is_noisy``), the L2 flush, and ``measure``, the
warm-up-then-timed loop.
"""

from __future__ import annotations

import gc
import math
import statistics
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator

import torch

from evalkit.judge.repetitions import median_interval
from evalkit.row_parts import TimingStats

L2_FLUSH_BYTES = 256 * 1024 * 1024


class L2Flusher:
    """Evicts the GPU's L2 cache by writing a buffer larger than it (a no-op on CPU)."""

    def __init__(self, device: str, nbytes: int = L2_FLUSH_BYTES) -> None:
        self._buffer = torch.empty(nbytes // 4, dtype=torch.int32, device=device) if device == "cuda" else None

    def flush(self) -> None:
        if self._buffer is not None:
            self._buffer.zero_()


# A probe of the judge's own (a one-element kernel and a synchronize) comes back in 14 us (median; at most 32) on an
# idle H200, and in 2.4 ms, a time slice, while another process has work queued on the GPU
# (docs/gpu-runs/2026-11-27-speedups-that-reproduce-h200/gpu_contention.log): a probe over this long means the GPU
# was busy with someone else's work.
IDLE_PROBE_US = 200.0


class GpuIdle:
    """Waits until the GPU has no other process's work queued: the judge's probe, repeated until it comes back
    within ``IDLE_PROBE_US``. A GPU runs one process's work at a time, so work an answer's worker left queued
    after its reply would otherwise run, untimed, into the next request, whoever's it is. A no-op on CPU."""

    def __init__(self, device: str) -> None:
        self._flag = torch.zeros(1, device="cuda") if device == "cuda" else None
        self._perf_counter = time.perf_counter

    def wait(self, limit_s: float) -> bool:
        """True once a probe came back quickly; False when the GPU was still busy after ``limit_s``."""
        if self._flag is None:
            return True
        deadline = self._perf_counter() + limit_s
        while True:
            start = self._perf_counter()
            self._flag.add_(1)
            torch.cuda.synchronize()
            now = self._perf_counter()
            if (now - start) * 1e6 <= IDLE_PROBE_US:
                return True
            if now > deadline:
                return False


def timing_stats(samples_ms: list[float]) -> TimingStats:
    """The statistics of ``samples_ms``: every one ``row_parts.TimingStats`` declares, as a timing record holds them."""
    if not samples_ms:
        raise ValueError("no timing samples")
    ordered = sorted(samples_ms)
    if len(ordered) >= 2:
        p25, _, p75 = statistics.quantiles(ordered, n=4, method="inclusive")
    else:
        p25 = p75 = ordered[0]
    return TimingStats(
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


# A timing is noisy when its interquartile range exceeds NOISE_BOUND of its median plus NOISE_FLOOR_MS plus
# twice the calibrated jitter. The floor is the spread of the judge's own path for a call that does almost
# nothing: on an H200 host a 20 us kernel's calls spread with an IQR up to 0.3 ms (cross-process
# synchronizations); on a 2-core CPU machine, about a millisecond.
NOISE_BOUND = {"cuda": 0.10, "cpu": 0.50}
NOISE_FLOOR_MS = {"cuda": 0.5, "cpu": 1.0}


@dataclass(frozen=True)
class Overhead:
    """The part of a request that is not its calls' own work, subtracted from it: the judge's copies in, the round
    trip, the hand-over of the GPU between processes, the freeze and the idle probe, and the harness's own part of
    each call (its synchronize, its loop). Measured as what a request took on the judge's clock beyond the events a
    trusted worker recorded around its calls: pings (the harness's stand-in model, before any submission code has
    run) or a baseline's calls (``window.window_overhead``). Nothing an answer's own code does is subtracted."""

    total_ms: float  # their median
    jitter_ms: float  # their interquartile range: the resolution of one request's time

    @classmethod
    def from_pings(cls, beyond_ms: list[float]) -> "Overhead":
        stats = timing_stats(beyond_ms)
        return cls(total_ms=max(stats["median_ms"], 0.0), jitter_ms=stats["iqr_ms"])


@dataclass(frozen=True)
class PingBudget:
    """When one phase of the overhead calibration has pinged enough: at ``most_pings``, or once its pings
    have spent ``budget_ms`` of the judge's clock after ``least_pings``. A problem whose pings each move
    gigabytes (11-14 ms a ping on an H200) calibrates in about 1 s rather than 1.8 s, which every one of its
    answers would wait; a problem of fast pings still takes ``most_pings``."""

    least_pings: int
    most_pings: int
    budget_ms: float

    def enough(self, pings_ms: list[float]) -> bool:
        made = len(pings_ms)
        return made >= self.most_pings or (made >= self.least_pings and sum(pings_ms) >= self.budget_ms)


# Warm-up pings, not counted (a fresh process and GPU context settle), then the measured ones, whose median is
# the overhead. Thirty measured pings put the median's 95% interval (order statistics 9 to 22) within their
# interquartile range: the jitter, which the judge already takes as its resolution of one call.
CALIBRATION_WARMUP = PingBudget(least_pings=5, most_pings=30, budget_ms=250.0)
CALIBRATION_PINGS = PingBudget(least_pings=30, most_pings=100, budget_ms=500.0)


# How far the part of a request subtracted may be off for an answer beyond the uncertainty of its measured median:
# the answer's request path is the baseline's (the same harness, judge and sizes), so what is left is what the two
# workers' paths differ by, measured on the curated solutions (docs/gpu-runs/).
REQUEST_RESOLUTION_MS = {"cuda": 0.02, "cpu": 0.02}


def request_resolution_ms(overhead: "Overhead", device: str, beyond_ms: list[float] | None = None) -> float:
    """What the judge cannot resolve of the part of one request it subtracts: the device's floor, or when larger,
    half the 95% interval of the median of the trusted requests' figures it was taken from (``beyond_ms``), or
    without them the pings' spread (IQR)."""
    floor = REQUEST_RESOLUTION_MS.get(device, REQUEST_RESOLUTION_MS["cpu"])
    if beyond_ms and len(beyond_ms) >= 2:
        low, high = median_interval(beyond_ms)
        return max(floor, (high - low) / 2)
    return max(floor, overhead.jitter_ms)


# At most this many calls a request: on a GPU enough that a microsecond kernel's request spreads its fixed part
# (two hand-overs of the GPU, ~0.3 ms) thin; on a CPU a request's fixed part is a tenth of that.
MAX_BATCH = {"cuda": 256, "cpu": 32}
BATCH_MEMORY_BYTES = {"cuda": 8 * 2**30, "cpu": 2**30}


def batch_size(reference_ms: float, bytes_per_call: int, device: str, request_length_ms: float) -> int:
    """How many forward calls one request makes: enough that the judge's per-request overhead and its jitter
    weigh little on each call (the request lasts about ``request_length_ms`` of the reference's time, a setting),
    no more than ``MAX_BATCH``, and within ``BATCH_MEMORY_BYTES`` for the shared inputs, the judge's originals and
    the worker's outputs."""
    by_time = math.ceil(request_length_ms / max(reference_ms, 1e-3))
    by_memory = BATCH_MEMORY_BYTES.get(device, BATCH_MEMORY_BYTES["cpu"]) // max(3 * bytes_per_call, 1)
    return int(max(1, min(MAX_BATCH.get(device, MAX_BATCH["cpu"]), by_time, by_memory)))


def net_stats(walls_ms: list[float], overhead: Overhead) -> tuple[TimingStats, bool]:
    """The calls' own times (wall minus overhead) and whether their median is below the clock's resolution,
    in which case it is reported as the resolution itself: never faster than the judge can tell."""
    floor = max(overhead.jitter_ms, 1e-3)
    net = [max(wall - overhead.total_ms, 0.0) for wall in walls_ms]
    stats = timing_stats(net)
    if stats["median_ms"] >= floor:
        return stats, False
    return timing_stats([max(value, floor) for value in net]), True


def is_noisy(stats: TimingStats, overhead: Overhead, device: str) -> bool:
    kind = device if device in NOISE_BOUND else "cpu"
    return stats["iqr_ms"] > NOISE_BOUND[kind] * stats["median_ms"] + NOISE_FLOOR_MS[kind] + 2 * overhead.jitter_ms


@contextmanager
def collector_paused() -> Iterator[None]:
    """No garbage collection in the judge's process while it times: a collection is milliseconds of pause
    that would land inside some call's span."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
