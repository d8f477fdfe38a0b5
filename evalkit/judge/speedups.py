"""Trusted side, pure (no torch): a speedup and its 95% interval, from requests timed in one window.

An answer is timed in the same window as its baseline, their requests interleaved in pairs (in a random order
within each pair), so whatever drifts on the machine between the two is in both sides of each pair. A speedup
is the median over the window's pairs of (baseline's time / answer's time), per call; its interval is the
distribution-free ~95% interval of that median (order statistics, ``repetitions.median_interval``). A speedup
against a second baseline timed only in the baselines' own window (torch.compile, beside eager) is the product
of the answer's speedup against the first and the first's against the second, its interval combined in log
space (``chained``).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any, Mapping

from evalkit.judge.repetitions import median_interval
from evalkit.row_parts import SpeedupRecord, TimingRecord


@dataclass(frozen=True)
class Speedup:
    """``value`` times faster than the baseline, with its ~95% interval [``low``, ``high``] over ``pairs`` pairs."""

    value: float
    low: float
    high: float
    pairs: int

    def interval(self) -> list[float]:
        return [self.low, self.high]

    def inverse(self) -> "Speedup":
        """The baseline's speedup over the answer: the same figures, the other way round."""
        return Speedup(1 / self.value, 1 / self.high, 1 / self.low, self.pairs)

    def to_dict(self) -> SpeedupRecord:
        return SpeedupRecord(value=self.value, ci=self.interval(), pairs=self.pairs)

    @classmethod
    def from_dict(cls, data: SpeedupRecord) -> "Speedup":
        low, high = data["ci"]
        return cls(float(data["value"]), float(low), float(high), int(data["pairs"]))


def paired_ratios(slower_ms: list[float], faster_ms: list[float]) -> list[float]:
    """slower / faster for each pair in which both times are positive."""
    return [s / f for s, f in zip(slower_ms, faster_ms) if s > 0 and f > 0]


def paired_speedup(baseline_ms: list[float], answer_ms: list[float], resolution_ms: float = 0.0) -> Speedup | None:
    """The answer's speedup over the baseline from the pairs of one window (per-call times), or None without pairs.

    The interval holds the median's sampling error and, in quadrature, what the judge cannot resolve of one call
    (``resolution_ms``: how far its own part of a request may be off, per call), which moves each side's time by up
    to that much whatever the number of pairs: a share ``resolution_ms / median`` of each side, independently."""
    ratios = paired_ratios(baseline_ms, answer_ms)
    if not ratios:
        return None
    value = statistics.median(ratios)
    low, high = median_interval(ratios)
    unresolved = math.hypot(resolution_ms / statistics.median(baseline_ms), resolution_ms / statistics.median(answer_ms))
    below = math.hypot(math.log(value / low), math.log1p(unresolved))
    above = math.hypot(math.log(high / value), math.log1p(unresolved))
    return Speedup(value, value * math.exp(-below), value * math.exp(above), len(ratios))


def chained(first: Speedup, second: Speedup) -> Speedup:
    """``first`` times ``second``, two independent estimates: the interval's log half-widths add in quadrature
    (each side separately, as the intervals need not be symmetric)."""
    value = first.value * second.value
    below = math.hypot(math.log(first.value / first.low), math.log(second.value / second.low))
    above = math.hypot(math.log(first.high / first.value), math.log(second.high / second.value))
    return Speedup(value, value * math.exp(-below), value * math.exp(above), min(first.pairs, second.pairs))


def relative_half_width(ratios: list[float]) -> float:
    """Half the width of the median's interval of ``ratios``, as a share of the median: how precisely a window
    knows its speedup so far."""
    low, high = median_interval(ratios)
    return (high - low) / 2 / statistics.median(ratios)



def speedups_against(timing: TimingRecord, baselines: Mapping[str, Any], kinds: tuple[str, ...]) -> dict[str, Speedup]:
    """An answer's speedup over each baseline kind it has one for: the one timed in its window (``timing["speedup"]``)
    directly, and any other kind whose record says how it compares with that one (``relative``, from the baselines'
    own window) through it."""
    measured = timing.get("speedup")
    if not measured:
        return {}
    direct = Speedup.from_dict(measured)
    found = {measured["vs"]: direct}
    for kind in kinds:
        relative = (baselines.get(kind) or {}).get("relative") if isinstance(baselines.get(kind), dict) else None
        if kind not in found and relative and relative.get("to") == measured["vs"]:
            found[kind] = chained(direct, Speedup.from_dict(relative).inverse())
    return found
