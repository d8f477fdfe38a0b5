"""Trusted side: one timing window: an answer's timed requests, interleaved with its baseline's.

The window runs pairs of requests, one of the answer's and one of the baseline's (``partner``), in an order the
judge's secret generator draws for each pair, each on fresh inputs after an L2 flush, after ``warmup_trials``
pairs of warm-ups. Whatever drifts on the machine between two requests of a pair (clocks, temperature, a
neighbour's load) is in both, and cancels in the pair's ratio: a speedup is the median of the pairs' ratios
(``speedups.paired_speedup``), never a ratio of two medians taken minutes apart. Each pair also holds a
calibration ping through the baseline's worker, at a place the judge draws (the answer's worker is never
pinged once loaded, and cannot tell): once there are ``MIN_WINDOW_PINGS``, their median is the judge's own part
of a request for both sides, measured in the window's conditions rather than before either worker loaded, and
one figure for both, so neither side's calibration error moves the ratio. Calls also pay a part pings do not
(0.2-0.45 ms a request on an H200, answers and baselines alike, cause unknown); the baseline's worker runs no
submission code, so its own CUDA events are trusted to measure it: the median of what its requests took beyond
their events, within ``RESIDUAL_BOUND_MS`` above the pings, is the overhead (``window_overhead``); a baseline timed
alone measures it the same way on itself, an answer timed alone never; on a GPU only (``RESIDUAL_DEVICES``). The
window stops by the repetition rule (``repetitions``), its precision asked of the pairs' ratios when there is a
partner; its
budget counts both sides' requests. With no partner (no baseline asked for, or timing a baseline alone) the
answer's requests run alone, as before.

Which of the answer's requests are checked against the reference is drawn once the pair's replies are in
(``Repetitions``), and checked on what the judge took of it: each session keeps its own copies.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from evalkit.judge.contender import Contender
from evalkit.judge.repetitions import Repetitions, RepetitionRule
from evalkit.judge.speedups import Speedup, paired_ratios, paired_speedup
from evalkit.judge.timing import Overhead, request_resolution_ms
from evalkit.judge.verdicts import Stop
from evalkit.sandbox.launcher import WorkerGone


class PartnerFailed(Exception):
    """The baseline's worker failed during a window: never the answer's verdict."""


@dataclass
class Side:
    """One side's timed requests in a window: the judge's milliseconds per request, the worker's claims per call."""

    walls: list[float] = field(default_factory=list)
    claimed: list[float] = field(default_factory=list)

    def per_call(self, contender: Contender) -> list[float]:
        return [contender.per_call_ms(wall) for wall in self.walls]


@dataclass
class Window:
    """A finished window: both sides' requests, the answer's checked requests and its repetition count."""

    count: Repetitions
    answer: Side
    partner: Side | None = None
    checked: list[int] = field(default_factory=list)
    pings: list[float] = field(default_factory=list)  # made through the partner's worker within the window
    beyond_events: list[float] = field(default_factory=list)  # each partner request's span minus its own events

    def speedup(self, answer: Contender, partner: Contender) -> Speedup | None:
        """The answer's speedup over the partner from this window's pairs, its interval holding what the judge
        cannot resolve of a request (``timing.request_resolution_ms``) as well as the pairs' spread."""
        if self.partner is None:
            return None
        resolution = request_resolution_ms(answer.overhead, answer.ref.device) / answer.batch
        return paired_speedup(self.partner.per_call(partner), self.answer.per_call(answer), resolution)


MIN_WINDOW_PINGS = 5  # the window's own pings replace the calibration made before loading once there are this many
# How far above the pings the baseline's own events may put the judge's part of a request: the most the part calls
# pay and pings do not was measured at 0.45 ms a request on an H200 (docs/gpu-runs/2026-11-27-trusted-residual-h200/).
# Were the baseline's worker's clock ever made to lie (it runs only the problem's reference), an answer would gain at
# most this much of each request.
RESIDUAL_BOUND_MS = 1.0
# Where that part is measured: on a GPU (the hand-over between processes' contexts, 0.2-0.45 ms a request). On a
# CPU a worker's host clock around a request of microseconds adds its own noise to the figure and gains nothing:
# tiny answers then read over-subtracted, and their intervals missed other judgings of the same answer.
RESIDUAL_DEVICES = ("cuda",)
PING = "ping"


def time_window(answer: Contender, partner: Contender | None, rule: RepetitionRule, warmup: int) -> Window:
    """Warm-up pairs, then timed pairs until ``rule`` stops them (``Repetitions``): see the module's docstring."""
    window = Window(Repetitions(rule, answer.rng, floor_ms=answer.per_call.jitter_ms), Side(),
                    Side() if partner is not None else None)
    # Whose own events may measure what calls pay beyond the pings: a worker that runs the reference only.
    trusted = partner if partner is not None else (None if answer.verify else answer)
    trusted = trusted if answer.ref.device in RESIDUAL_DEVICES else None
    calibrated = answer.overhead  # a side timed alone keeps the pings made before it loaded
    request = 0
    while request < warmup or not window.count.done:
        order: list[Any] = [answer] if partner is None else [answer, partner, PING]
        answer.rng.shuffle(order)  # the judge's secret: no worker knows whether it goes first or second
        done = {}
        for step in order:
            if step is PING:
                window.pings.append(_ping(partner))
            else:
                done[id(step)] = _request(step, step is partner)
        if trusted is not None and trusted.last_claim_ms is not None:
            window.beyond_events.append(done[id(trusted)][0] - trusted.batch * trusted.last_claim_ms)
        if len(window.pings) >= MIN_WINDOW_PINGS or (partner is None and trusted is not None):
            by_pings = Overhead.from_pings(window.pings) if partner is not None else calibrated
            _share(window_overhead(by_pings, window.beyond_events), answer, partner)
        wall_ms, originals = done[id(answer)]
        drawn = False
        if request >= warmup:
            drawn = _count(window, answer, partner, wall_ms, done[id(partner)][0] if partner is not None else None)
        if answer.check_timed(originals, request, drawn):
            window.checked.append(request)
        request += 1
    return window


def _share(overhead: Overhead, *contenders: Contender | None) -> None:
    """One figure for the judge's own part of a request, for both sides, taken in the window's own conditions, so
    neither side's calibration error is the other's."""
    for contender in contenders:
        if contender is not None:
            contender.overhead = overhead


def window_overhead(by_pings: Overhead, beyond_events: list[float]) -> Overhead:
    """The pings' figure, raised to the median of what the reference's requests took beyond its worker's own
    events once there are ``MIN_WINDOW_PINGS`` of those, by ``RESIDUAL_BOUND_MS`` at most."""
    if len(beyond_events) < MIN_WINDOW_PINGS:
        return by_pings
    residual = min(max(statistics.median(beyond_events) - by_pings.total_ms, 0.0), RESIDUAL_BOUND_MS)
    return Overhead(by_pings.total_ms + residual, by_pings.jitter_ms)


def _ping(partner: Contender) -> float:
    try:
        return partner.ping()
    except (Stop, WorkerGone) as failure:
        partner.failed = True
        raise PartnerFailed(f"the baseline's worker failed a ping during the window: {failure}") from failure


def _request(contender: Contender, is_partner: bool) -> tuple[float, list]:
    """One timed request; a partner's failure is raised as ``PartnerFailed``, so it never decides the answer."""
    if not is_partner:
        return contender.timed_request()
    try:
        return contender.timed_request()
    except (Stop, WorkerGone) as failure:
        contender.failed = True
        raise PartnerFailed(f"the baseline's worker failed during the window: {failure}") from failure


def _count(window: Window, answer: Contender, partner: Contender | None, wall_ms: float,
           partner_ms: float | None) -> bool:
    """Record one timed pair (or one request alone): whether the answer's request is checked."""
    window.answer.walls.append(wall_ms)
    if answer.last_claim_ms is not None:
        window.answer.claimed.append(answer.last_claim_ms)
    ratios = None
    if partner is not None and window.partner is not None and partner_ms is not None:
        window.partner.walls.append(partner_ms)
        window.count.spend(partner_ms / 1e3)
        ratios = paired_ratios(window.partner.per_call(partner), window.answer.per_call(answer))
    return window.count.record(wall_ms / 1e3, answer.per_call_ms(wall_ms), ratios=ratios)


def side_stats(side: Side, contender: Contender) -> dict[str, float]:
    """A partner's figures in the window (per call, the judge's overhead out): median, IQR, count."""
    values = side.per_call(contender)
    ordered = sorted(values)
    quartiles = statistics.quantiles(ordered, n=4, method="inclusive") if len(ordered) > 1 else [ordered[0]] * 3
    return {"median_ms": statistics.median(ordered), "iqr_ms": quartiles[2] - quartiles[0], "count": len(ordered)}
