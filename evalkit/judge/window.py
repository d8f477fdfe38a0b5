"""Trusted side: one timing window: an answer's timed requests, interleaved with its baseline's.

The window runs pairs of requests, one of the answer's and one of the baseline's (``partner``), in an order the
judge's secret generator draws for each pair, each on fresh inputs after an L2 flush, after ``warmup_trials``
pairs of warm-ups. Whatever drifts on the machine between two requests of a pair (clocks, temperature, a
neighbour's load) is in both, and cancels in the pair's ratio: a speedup is the median of the pairs' ratios
(``speedups.paired_speedup``), never a ratio of two medians taken minutes apart.

What is subtracted from a request is everything in it but the calls' own work: the judge's copies in, the round
trip, the hand-over of the GPU between processes, the freeze and the idle probe, and the harness's own part of
each call (its synchronize after a call, its loop). The baseline's worker runs only the problem's reference, never
submission code, so its own device events, recorded around each forward exactly as the field times a kernel in one
process, are trusted for this one figure: in each pair the judge takes what the baseline's request took beyond
its events, and once there are ``MIN_BEYOND`` of these their median is the part subtracted from both sides, one
figure for both (``window_overhead``), kept within ``OVERHEAD_BOUND_MS`` of the same figure measured by pings
of the baseline's worker before it loaded. A baseline timed alone measures it the same way on itself; an answer
timed alone keeps the pings' figure it was prepared with (``Contender.prepare``), and both sides of a problem given
as text, whose reference is a client's code, take the baseline's pings' figure. An answer's own clock is never
used. The window stops by the repetition rule (``repetitions``), its precision asked of the pairs' ratios when there is a partner; its
budget counts both sides' requests.

Which of the answer's requests are checked against the reference is drawn once the pair's replies are in
(``Repetitions``), and checked on what the judge reads of the answer's outputs, its worker frozen meanwhile.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from evalkit.judge.contender import BeyondEvents, Contender
from evalkit.judge.repetitions import Repetitions, RepetitionRule
from evalkit.judge.speedups import Speedup, paired_ratios, paired_speedup
from evalkit.judge.timing import Overhead, request_resolution_ms, timing_stats
from evalkit.judge.verdicts import Stop
from evalkit.row_parts import PartnerRecord, RequestPartsRecord
from evalkit.sandbox.launcher import WorkerGone


class PartnerFailed(Exception):
    """The baseline's worker failed during a window: never the answer's verdict."""


@dataclass
class Side:
    """One side's timed requests in a window: the judge's milliseconds per request, the worker's claims per call."""

    walls: list[float] = field(default_factory=list)
    claimed: list[float] = field(default_factory=list)  # the worker's own events, per call of each request
    parts: list[BeyondEvents] = field(default_factory=list)  # each request's ``Contender.last_parts``

    def per_call(self, contender: Contender) -> list[float]:
        return [contender.per_call_ms(wall) for wall in self.walls]


@dataclass
class Window:
    """A finished window: both sides' requests, the answer's checked requests and its repetition count."""

    count: Repetitions
    answer: Side
    partner: Side | None = None
    checked: list[int] = field(default_factory=list)
    beyond_events: list[float] = field(default_factory=list)  # each trusted request's span minus its own events

    def speedup(self, answer: Contender, partner: Contender) -> Speedup | None:
        """The answer's speedup over the partner from this window's pairs, its interval holding what the judge
        cannot resolve of a request (``timing.request_resolution_ms``) as well as the pairs' spread."""
        if self.partner is None:
            return None
        resolution = request_resolution_ms(answer.overhead, answer.ref.device, self.beyond_events) / answer.batch
        return paired_speedup(self.partner.per_call(partner), self.answer.per_call(answer), resolution)


MIN_BEYOND = 5  # the trusted requests' own figure replaces the pings' made before loading once there are this many
# How far from the pings' figure the baseline's own events may put the part of a request subtracted: were the
# baseline's worker's clock ever made to lie (it runs only the problem's reference), an answer would gain at most
# this much of each request (plus a share per call of it, for the harness's own part of each call).
OVERHEAD_BOUND_MS = 1.0
OVERHEAD_BOUND_PER_CALL_MS = 0.02


def time_window(answer: Contender, partner: Contender | None, rule: RepetitionRule, warmup: int) -> Window:
    """Warm-up pairs, then timed pairs until ``rule`` stops them (``Repetitions``): see the module's docstring."""
    # Whose own events may measure the part of a request subtracted: a worker that runs a trusted reference only (a
    # reference given as text is a client's code, as untrusted as an answer: both sides take its pings' figure).
    trusted = partner if partner is not None else (None if answer.verify else answer)
    trusted = trusted if answer.ref.problem.trusted else None
    calibrated = (trusted or partner or answer).calibrated  # pings made before any code loaded
    _share(calibrated, answer, partner)
    window = Window(Repetitions(rule, answer.rng, floor_ms=answer.per_call.jitter_ms), Side(),
                    Side() if partner is not None else None)
    request = 0
    while request < warmup or not window.count.done:
        order: list[Any] = [answer] if partner is None else [answer, partner]
        answer.rng.shuffle(order)  # the judge's secret: no worker knows whether it goes first or second
        done = {id(step): _request(step, step is partner) for step in order}
        if trusted is not None and trusted.last_events_ms is not None:
            window.beyond_events.append(done[id(trusted)][0] - trusted.last_events_ms)
            _share(window_overhead(calibrated, window.beyond_events, trusted.batch), answer, partner)
        wall_ms, originals = done[id(answer)]
        drawn = False
        if request >= warmup:
            drawn = _count(window, answer, partner, wall_ms, done[id(partner)][0] if partner is not None else None)
        if answer.check_timed(originals, request, drawn):
            window.checked.append(request)
        request += 1
    return window


def _share(overhead: Overhead, *contenders: Contender | None) -> None:
    """One figure for the part of a request subtracted, for both sides, taken in the window's own conditions, so
    neither side's calibration error is the other's."""
    for contender in contenders:
        if contender is not None:
            contender.overhead = overhead


def window_overhead(calibrated: Overhead, beyond_events: list[float], calls: int) -> Overhead:
    """The median of what trusted requests took beyond their own events, once there are ``MIN_BEYOND`` of them,
    within ``OVERHEAD_BOUND_MS`` (plus ``OVERHEAD_BOUND_PER_CALL_MS`` a call) of ``calibrated``, the pings'
    figure; before that, ``calibrated``."""
    if len(beyond_events) < MIN_BEYOND:
        return calibrated
    bound = OVERHEAD_BOUND_MS + OVERHEAD_BOUND_PER_CALL_MS * calls
    stats = timing_stats(beyond_events)
    total = min(max(stats["median_ms"], calibrated.total_ms - bound, 0.0), calibrated.total_ms + bound)
    return Overhead(total, stats["iqr_ms"])


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
    window.answer.parts.append(answer.last_parts)
    if answer.last_claim_ms is not None:
        window.answer.claimed.append(answer.last_claim_ms)
    ratios = None
    if partner is not None and window.partner is not None and partner_ms is not None:
        window.partner.walls.append(partner_ms)
        window.partner.parts.append(partner.last_parts)
        window.count.spend(partner_ms / 1e3)
        ratios = paired_ratios(window.partner.per_call(partner), window.answer.per_call(answer))
    return window.count.record(wall_ms / 1e3, answer.per_call_ms(wall_ms), ratios=ratios)


def side_stats(side: Side, contender: Contender) -> PartnerRecord:
    """A partner's figures in the window (per call, the judge's overhead out): median, IQR, count, and the times."""
    values = side.per_call(contender)
    ordered = sorted(values)
    quartiles = statistics.quantiles(ordered, n=4, method="inclusive") if len(ordered) > 1 else [ordered[0]] * 3
    record = PartnerRecord(median_ms=statistics.median(ordered), iqr_ms=quartiles[2] - quartiles[0], count=len(ordered),
                           samples_ms=values)
    if side.parts:
        record["request_parts_ms"] = parts_record(side.parts)
    return record


def parts_record(parts: list[BeyondEvents]) -> RequestPartsRecord:
    """The medians of one side's requests' parts beyond their events (``Contender.last_parts``)."""
    beyond = [part.reply_beyond_events_ms for part in parts if part.reply_beyond_events_ms is not None]
    return RequestPartsRecord(reply_beyond_events_ms=statistics.median(beyond) if beyond else None,
                              freeze_ms=statistics.median(part.freeze_ms for part in parts),
                              idle_ms=statistics.median(part.idle_ms for part in parts))
