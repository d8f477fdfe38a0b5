"""Trusted side: how many timed requests one timing makes, and which of them the judge checks.

A timing stops as soon as more calls would tell little: when the median of the calls' times is known to a
relative precision (a distribution-free confidence interval of the median, from order statistics), when
the timed requests have spent a wall-time budget, or at a maximum count (``stop_reason``). Which timed
requests are checked against the reference is decided per request, after its reply, by a secret
Bernoulli draw, so that any number of requests can be checked and nothing the worker has seen predicts
a check; the timing does not end before ``timing_checks`` requests were checked, or ``MIN_VERIFIED``
when the budget affords fewer requests (``Repetitions``).

Everything here is pure: it sees only the times the judge measured and the judge's secret generator.
The judge drives it (``submission_judge._Run._timed_calls``), for submissions and baselines alike.
"""

from __future__ import annotations

import logging
import math
import random
import statistics
from dataclasses import dataclass

from evalkit.sources.settings import MIN_TIMING_CHECKS

logger = logging.getLogger(__name__)

Z_95 = 1.96  # the two-sided 95% normal quantile: the median's confidence interval by order statistics
MIN_REQUESTS = 3  # no timing stops before this many timed requests (fewer only if the maximum is lower)
VERIFIED_SHARE = 0.25  # each timed request is checked with at least this probability, whatever came before
MIN_VERIFIED = MIN_TIMING_CHECKS  # a timing never stops before this many requests were checked (all, when fewer are
# allowed), nor before ``timing_checks`` when the budget affords as many requests at the pace so far


@dataclass(frozen=True)
class RepetitionRule:
    """When a timing stops: ``min_timing_trials`` timed requests at least, and then as soon as the median is known
    to ``timing_precision`` (relative); or, after ``MIN_REQUESTS`` timed requests, once they have spent
    ``timing_budget_s`` seconds of the judge's clock; at the latest after ``timing_trials``; never before
    ``timing_checks`` of them were checked (``verified``). The problem settings of the same names
    (``sources.settings``)."""

    min_timing_trials: int
    timing_trials: int
    timing_precision: float
    timing_budget_s: float
    timing_checks: int

    def __post_init__(self) -> None:
        if self.timing_trials < 1 or self.min_timing_trials < 1 or self.timing_checks < 1:
            raise ValueError(f"timing needs at least one timed request (min {self.min_timing_trials}, "
                             f"max {self.timing_trials}) and one checked ({self.timing_checks})")
        if not (self.timing_precision > 0 and math.isfinite(self.timing_precision)):
            raise ValueError(f"the timing precision must be a finite number > 0, got {self.timing_precision!r}")
        if not self.timing_budget_s > 0:
            raise ValueError(f"the timing budget must be > 0 seconds, got {self.timing_budget_s!r}")

    @property
    def floor(self) -> int:
        """Timed requests made whatever the budget: ``MIN_REQUESTS``, or every one when the maximum is lower."""
        return min(self.timing_trials, MIN_REQUESTS)

    @property
    def least(self) -> int:
        """Timed requests made before the precision may stop a timing (the budget may stop it at ``floor``)."""
        return min(self.timing_trials, max(self.min_timing_trials, MIN_REQUESTS))

    def verified(self, affordable: int) -> int:
        """Timed requests checked before a timing may stop, when the budget affords ``affordable`` requests:
        ``timing_checks``, down to ``MIN_VERIFIED`` for slow requests, never more than the maximum."""
        return min(self.timing_trials, max(MIN_VERIFIED, min(self.timing_checks, affordable)))


def median_interval(samples: list[float], z: float = Z_95) -> tuple[float, float]:
    """The ~95% confidence interval of the median of ``samples``, free of any assumption on their
    distribution: the order statistics of ranks ``n/2 - z*sqrt(n)/2`` and ``1 + n/2 + z*sqrt(n)/2``
    (rounded outwards, clamped to the samples); with ten samples or fewer, their whole range."""
    if not samples:
        raise ValueError("no samples")
    ordered = sorted(samples)
    n = len(ordered)
    half = z * math.sqrt(n) / 2
    low = max(1, math.floor(n / 2 - half))
    high = min(n, math.ceil(1 + n / 2 + half))
    return ordered[low - 1], ordered[high - 1]


def precise_enough(samples: list[float], precision: float, floor_ms: float = 0.0) -> bool:
    """Whether the median of ``samples`` is known well enough: its confidence interval's half-width is at
    most ``precision`` of the median plus ``floor_ms`` (the clock's resolution of one call: a median the
    judge cannot resolve is not worth more calls)."""
    low, high = median_interval(samples)
    return (high - low) / 2 <= precision * statistics.median(samples) + floor_ms


def stop_reason(samples_ms: list[float], spent_s: float, rule: RepetitionRule, floor_ms: float = 0.0,
                ratios: list[float] | None = None) -> str | None:
    """Why a timing that has timed ``samples_ms`` (one per request, per call) in ``spent_s`` seconds of
    requests stops now: ``"precision"``, ``"budget"`` or ``"max_trials"`` (checked in that order); None
    while it goes on. With ``ratios`` (a window's pairs, baseline over answer), the precision is asked of their
    median instead: that is the figure a window is for. The checks a stop also waits for are ``Repetitions``'s."""
    made = len(samples_ms)
    precise = (precise_enough(ratios, rule.timing_precision) if ratios
               else precise_enough(samples_ms, rule.timing_precision, floor_ms))
    if made >= rule.least and precise:
        return "precision"
    if made >= rule.floor and spent_s >= rule.timing_budget_s:
        return "budget"
    if made >= rule.timing_trials:
        return "max_trials"
    return None


class Repetitions:
    """One timing attempt, request by request: ``record`` each timed request as it ends; it says whether
    the judge checks that request, and ``stopped_by`` is set once the timing is over.

    A request is checked when the secret draw (probability ``VERIFIED_SHARE``, from ``rng``, drawn after
    the request's reply) says so, or when fewer than ``needed`` requests would otherwise be checked by the
    time the timing can stop: on the request after which it would stop, and on every request once the
    requests left (by the maximum, and by the budget at the pace so far) are fewer than the checks still
    missing. So every request is checked with probability at least ``VERIFIED_SHARE`` whatever the worker
    did or saw before it, a timing that stops has checked ``needed`` requests, and one that reaches the
    maximum has checked at least ``MIN_VERIFIED`` (or all of them, when the maximum is lower).
    """

    def __init__(self, rule: RepetitionRule, rng: random.Random, floor_ms: float = 0.0) -> None:
        self.rule, self.rng, self.floor_ms = rule, rng, floor_ms
        self.samples_ms: list[float] = []
        self.spent_s = 0.0
        self.checked = 0
        self.forced = 0  # checks made because the count needed them, not by the draw
        self.stopped_by: str | None = None

    @property
    def requests(self) -> int:
        return len(self.samples_ms)

    @property
    def done(self) -> bool:
        return self.stopped_by is not None

    @property
    def stopped(self) -> str:
        """Why the timing stopped (``stopped_by``), once it is over."""
        if self.stopped_by is None:
            raise RuntimeError("the timing is not over: it has no reason to stop yet")
        return self.stopped_by

    def spend(self, wall_s: float) -> None:
        """Count time the window spent on a request of the other side (a baseline's), toward the budget."""
        self.spent_s += max(wall_s, 0.0)

    def record(self, wall_s: float, per_call_ms: float, ratios: list[float] | None = None) -> bool:
        """Count one timed request, which took ``wall_s`` seconds on the judge's clock and ``per_call_ms``
        per call after the overhead (``ratios``: the window's pairs so far, this one's included). Returns whether
        the judge checks it."""
        if self.done:
            raise RuntimeError("the timing is over: no more requests")
        drawn = self.rng.random() < VERIFIED_SHARE  # drawn for every request, so no draw depends on times
        self.samples_ms.append(per_call_ms)
        self.spent_s += max(wall_s, 0.0)
        reason = stop_reason(self.samples_ms, self.spent_s, self.rule, self.floor_ms, ratios)
        missing = self.needed - self.checked
        forced = not drawn and missing > 0 and (reason is not None or missing > self._left())
        if drawn or forced:
            self.checked += 1
            self.forced += forced
        if self.requests >= self.rule.timing_trials or (reason is not None and self.checked >= self.needed):
            self.stopped_by = reason or "max_trials"
            logger.debug("timing stopped by %s after %d requests (%.3g s), %d checked (%d forced)",
                         self.stopped_by, self.requests, self.spent_s, self.checked, self.forced)
        return drawn or forced

    @property
    def needed(self) -> int:
        """Checked requests the timing waits for: as many as ``rule.verified`` asks of the requests the
        budget affords at the pace so far (``MIN_VERIFIED`` at least, so never fewer than that)."""
        pace = self.spent_s / self.requests if self.requests else 0.0
        affordable = math.floor(self.rule.timing_budget_s / pace) if pace > 0 else self.rule.timing_checks
        return self.rule.verified(affordable)

    def _left(self) -> int:
        """Timed requests that may still follow the one just recorded: by the maximum, and by the budget
        at the pace so far (at least up to ``rule.floor``)."""
        made = self.requests
        by_max = self.rule.timing_trials - made
        pace = self.spent_s / made
        by_budget = math.floor(max(self.rule.timing_budget_s - self.spent_s, 0.0) / pace) if pace > 0 else by_max
        return min(by_max, max(self.rule.floor - made, by_budget))
