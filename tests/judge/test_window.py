"""An answer timed in one window with its live baseline, against fake workers on a fake clock: each request's time
is scripted, so what the window makes of drift, order, failures and its stopping rule is exact, whatever the
machine's load."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from evalkit.judge import session as session_module
from evalkit.judge.contender import Contender
from evalkit.judge.submission_judge import Judge, JudgeSettings
from evalkit.judge.verdicts import Finding
from evalkit.sandbox.launcher import Limits, WorkerGone
from evalkit.sandbox.protocol import Op
from judge.test_session import FakeWorker, called, honest


class FakeClock:
    """The judge's clock, moved only by the fake workers: a request's time is what its script says."""

    def __init__(self) -> None:
        self.now_s = 0.0
        self.calls = 0  # timed calls so far, across workers

    def perf_counter(self) -> float:
        return self.now_s


def scripted(clock: FakeClock, name: str, ms: float, log: list[str], slower_after: int = 10**9,
             fail_after: int | None = None, wobble: float = 0.0, part_ms: float = 0.0, claim_share: float = 1.0,
             ping_ms: float = 0.0) -> Any:
    """A worker whose call requests each take ``ms`` of the judge's clock (3x once ``slower_after`` calls were made
    by anyone: a machine that drifts; each within +-``wobble`` of that, by a fixed pattern), logging its name per
    call; it dies after its ``fail_after``-th call. ``part_ms`` of each request is not its calls' work (the judge's
    and the harness's part); its claim is ``claim_share`` of its work (1: the truth), per call. Pings, made before it
    loads, take ``ping_ms`` each (none of it the stand-in's events), each logged as its name and "ping"."""
    made = {"n": 0}

    def script(worker: FakeWorker, request: dict[str, Any]) -> Any:
        if request.op == Op.PING:
            clock.now_s += ping_ms / 1e3
            log.append(f"{name} ping")
        if request.op == Op.CALL:
            made["n"] += 1
            if fail_after is not None and made["n"] > fail_after:
                raise WorkerGone("crash", "the worker died")
            clock.calls += 1
            spread = 1.0 + wobble * math.sin(made["n"] * (7.0 if name == "answer" else 3.0))
            request_ms = ms * spread * (3.0 if clock.calls > slower_after else 1.0)
            clock.now_s += request_ms / 1e3
            log.append(name)
            worker.forward()
            work_ms = max(request_ms - part_ms, 0.0)
            return called(worker, request, ms=claim_share * work_ms / (request.calls or len(worker.inputs)))
        return honest(worker, request)
    return script


@pytest.fixture()
def clock(monkeypatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(session_module, "time", SimpleNamespace(perf_counter=fake.perf_counter))
    return fake


def _judge(judge: Judge, **changes: Any) -> Judge:
    fields = {**vars(judge.settings), **changes}
    return Judge(judge.ref, JudgeSettings(**fields), Limits())


@pytest.fixture(scope="module")
def judge() -> Judge:
    from judge.test_session import judge as make  # the same linear_relu problem as the session tests

    return make.__wrapped__()


def _partner(judge: Judge, worker: FakeWorker) -> Any:
    """A live baseline in ``worker``, started on the first call that may start it, then kept (``Partner``)."""
    kept: list[tuple[str, Contender]] = []

    def partner(start: bool = True) -> tuple[str, Contender] | None:
        if start and not kept:
            baseline = Contender(judge, judge.settings, judge.session(worker, judge.time_limits), verify=False)
            baseline.prepare(Path("submission.py"), {})
            kept.append(("eager", baseline))
        return kept[0] if kept else None
    return partner


PREPARE_CALLS = 6  # the answer's and the baseline's first call and two correctness trials each
WARMUP_CALLS = 2  # one pair


def test_drift_the_machine_shows_halfway_through_a_window_cancels_in_the_speedup(judge, clock):
    # Calls take 5 ms for the answer and 10 ms for the baseline; five pairs into the window, the machine is 3x
    # slower for both. Medians taken apart would read anything from 0.67x to 6x; the window's pairs read 2x.
    judge = _judge(judge, timing_trials=40, min_timing_trials=10, timing_budget_s=1e6, timing_precision=1e-9)
    log: list[str] = []
    drift = PREPARE_CALLS + WARMUP_CALLS + 10
    partner = FakeWorker(judge.ref, scripted(clock, "baseline", 10.0, log, slower_after=drift))
    answer = FakeWorker(judge.ref, scripted(clock, "answer", 5.0, log, slower_after=drift))
    judgement = judge.judge_with(answer, Path("submission.py"), partner=_partner(judge, partner))
    assert judgement.finding is Finding.PASSED, judgement.reason
    speedup, samples = judgement.timing["speedup"], judgement.timing["samples_ms"]
    assert min(samples) * 2.5 < max(samples), "the window spans the drift"
    assert speedup["vs"] == "eager" and speedup["pairs"] == judgement.timing["partner"]["count"] >= 10
    assert speedup["value"] == pytest.approx(2.0)
    low, high = speedup["ci"]  # every pair reads 2x: the interval is only what the judge cannot resolve of a request
    assert 1.97 < low < 2.0 < high < 2.03


def test_each_pair_runs_in_an_order_the_judge_draws_and_only_the_answer_is_checked(judge, clock):
    judge = _judge(judge, timing_trials=60, min_timing_trials=10, timing_budget_s=1e6, timing_precision=1e-9)
    log: list[str] = []
    partner = FakeWorker(judge.ref, scripted(clock, "baseline", 4.0, log, wobble=0.2))
    answer = FakeWorker(judge.ref, scripted(clock, "answer", 2.0, log, wobble=0.2))
    judgement = judge.judge_with(answer, Path("submission.py"), partner=_partner(judge, partner))
    window = [name for name in log if not name.endswith(" ping")][PREPARE_CALLS + WARMUP_CALLS:]
    pairs = [tuple(window[i:i + 2]) for i in range(0, len(window), 2)]
    assert all(sorted(pair) == ["answer", "baseline"] for pair in pairs)
    orders = {pair for pair in pairs}
    assert orders == {("answer", "baseline"), ("baseline", "answer")}, "both orders occur: neither side knows its place"
    assert len(judgement.timing["verified_calls"]) >= 10  # the answer's requests are checked as before
    assert judgement.timing["requests"] == judgement.timing["partner"]["count"] == 60


def test_a_window_stops_once_the_pairs_ratio_is_precise_and_its_budget_counts_both_sides(judge, clock):
    precise = _judge(judge, timing_trials=100, min_timing_trials=10, timing_budget_s=1e6, timing_precision=0.01)
    answer, partner = (FakeWorker(judge.ref, scripted(clock, name, ms, [])) for name, ms in (("a", 2.0), ("b", 6.0)))
    timing = precise.judge_with(answer, Path("x.py"), partner=_partner(precise, partner)).timing
    assert timing["stopped_by"] == "precision" and 10 <= timing["requests"] < 30  # and 10 of them checked

    budget = _judge(judge, timing_trials=100, min_timing_trials=10, timing_budget_s=0.2, timing_precision=1e-9)
    answer, partner = (FakeWorker(judge.ref, scripted(clock, name, ms, [], wobble=0.1))
                       for name, ms in (("answer", 2.0), ("b", 6.0)))
    timing = budget.judge_with(answer, Path("x.py"), partner=_partner(budget, partner)).timing
    assert timing["stopped_by"] == "budget"
    assert timing["requests"] == pytest.approx(200 / (2.0 + 6.0), abs=2), "8 ms a pair, not 2 ms a request"


def test_a_baseline_that_fails_during_the_window_is_never_the_answers_verdict(judge, clock):
    judge = _judge(judge, timing_trials=20, min_timing_trials=10, timing_budget_s=1e6, timing_precision=1e-9)
    log: list[str] = []
    partner = FakeWorker(judge.ref, scripted(clock, "baseline", 4.0, log, fail_after=8))  # 6 of its calls: checks
    answer = FakeWorker(judge.ref, scripted(clock, "answer", 2.0, log))
    baseline = _partner(judge, partner)
    kept: list[Contender] = []

    def keep(start: bool = True) -> tuple[str, Contender] | None:
        live = baseline(start)
        if live is not None and not kept:
            kept.append(live[1])
        return live
    judgement = judge.judge_with(answer, Path("submission.py"), partner=keep)
    assert judgement.finding is Finding.PASSED, judgement.reason
    assert "speedup" not in judgement.timing and judgement.timing["requests"] >= 10 and "partner" not in judgement.timing
    assert any("no speedup" in w and "baseline" in w for w in judgement.warnings)
    assert kept[0].failed, "the station starts a new live baseline for the next answer"


def _paired(judge: Judge, clock: FakeClock, baseline: dict[str, Any], answer: dict[str, Any]) -> tuple[Judge, dict]:
    """An answer timed beside its baseline, both scripted (``scripted``'s keywords)."""
    judge = _judge(judge, timing_trials=30, min_timing_trials=10, timing_budget_s=1e6, timing_precision=1e-9)
    partner = FakeWorker(judge.ref, scripted(clock, "baseline", log=[], **baseline))
    worker = FakeWorker(judge.ref, scripted(clock, "answer", log=[], **answer))
    return judge, judge.judge_with(worker, Path("submission.py"), partner=_partner(judge, partner)).timing


def test_the_part_subtracted_is_measured_in_the_window_on_the_baselines_own_events(judge, clock):
    # Pings before loading take no time; in the window every request pays 1.5 ms that is not its calls' work (the
    # judge's and the harness's part). Work: 10 ms (baseline) against 2.5 ms (answer), a 4x speedup; with nothing
    # subtracted it would read 11.5 / 4 = 2.9x. The baseline's worker runs no submission code: what its requests
    # took beyond its own events is that part. The answer's own claim (a hundredth of its work) is never used.
    judge, timing = _paired(judge, clock, {"ms": 11.5, "part_ms": 1.5},
                            {"ms": 4.0, "part_ms": 1.5, "claim_share": 0.01})
    assert timing["overhead_ms"] == pytest.approx(1.5 / judge.batch)
    assert timing["overhead_requests"] >= timing["requests"]
    assert timing["speedup"]["value"] == pytest.approx(4.0)
    assert timing["median_ms"] == pytest.approx(2.5 / judge.batch)


def test_where_each_sides_requests_went_beyond_their_events_is_recorded_part_by_part(judge, clock, monkeypatch):
    # The baseline's requests pay 1.5 ms before their replies beyond their work, the answer's 2.5 ms (an answer whose
    # harness part is larger: its time reads 1 ms a request slow); each freeze takes 0.25 ms of the judge's clock.
    def freeze(worker: FakeWorker, settle_s: float = 0.0) -> None:
        worker.frozen = True
        clock.now_s += 0.25e-3

    monkeypatch.setattr(FakeWorker, "freeze", freeze)
    _, timing = _paired(judge, clock, {"ms": 11.5, "part_ms": 1.5}, {"ms": 4.0, "part_ms": 2.5})
    answer, baseline = timing["request_parts_ms"], timing["partner"]["request_parts_ms"]
    assert answer["reply_beyond_events_ms"] == pytest.approx(2.5)
    assert baseline["reply_beyond_events_ms"] == pytest.approx(1.5)
    assert answer["freeze_ms"] == pytest.approx(0.25) and baseline["freeze_ms"] == pytest.approx(0.25)
    assert answer["idle_ms"] == pytest.approx(0.0, abs=1e-9) and baseline["idle_ms"] == pytest.approx(0.0, abs=1e-9)
    assert timing["overhead_ms"] * judge.batch == pytest.approx(1.75)  # the baseline's sum, subtracted from both


def _text_problem(judge: Judge, monkeypatch: Any) -> None:
    import dataclasses

    monkeypatch.setattr(judge.ref, "problem", dataclasses.replace(judge.ref.problem, trusted=False))


@pytest.mark.parametrize("live_before", [True, False])
def test_an_answer_takes_its_live_baselines_pings_and_pings_itself_only_while_none_is_live(judge, clock, monkeypatch,
                                                                                             live_before):
    # A problem given as text, so the pings' figure is what is subtracted. The baseline's pings take 1 ms, the answer
    # worker's would take 3 ms. With a baseline live, the answer's worker meets one ping (its setup's) and the
    # baseline's figure; with none live yet it calibrates itself (for a timing alone), and its window still takes
    # the baseline's figure for both sides.
    _text_problem(judge, monkeypatch)
    judge = _judge(judge, timing_trials=20, min_timing_trials=10, timing_budget_s=1e6, timing_precision=1e-9)
    log: list[str] = []
    baseline = _partner(judge, FakeWorker(judge.ref, scripted(clock, "baseline", 11.0, log, ping_ms=1.0)))
    if live_before:
        baseline()
    answer = FakeWorker(judge.ref, scripted(clock, "answer", 4.0, log, ping_ms=3.0))
    judgement = judge.judge_with(answer, Path("submission.py"), partner=baseline)
    assert judgement.finding is Finding.PASSED, judgement.reason
    answer_pings = log.count("answer ping")
    assert (answer_pings == 1) if live_before else (answer_pings > 30)
    timing = judgement.timing
    assert timing["overhead_ms"] == pytest.approx(1.0 / judge.batch)
    assert timing["speedup"]["value"] == pytest.approx((11.0 - 1.0) / (4.0 - 1.0))


def test_a_baseline_clock_made_to_lie_moves_the_part_subtracted_by_the_bound_at_most(judge, clock):
    from evalkit.judge.timing import Overhead
    from evalkit.judge.window import OVERHEAD_BOUND_MS, OVERHEAD_BOUND_PER_CALL_MS, window_overhead

    # The baseline's worker claims no work at all: its whole request would be the part subtracted. Its pings before
    # loading (no time here) are the reference, and the bound above them the ceiling.
    judge, timing = _paired(judge, clock, {"ms": 11.0, "claim_share": 0.0}, {"ms": 6.0})
    bound = OVERHEAD_BOUND_MS + OVERHEAD_BOUND_PER_CALL_MS * judge.batch
    assert timing["overhead_ms"] == pytest.approx(bound / judge.batch)
    assert timing["speedup"]["value"] == pytest.approx((11.0 - bound) / (6.0 - bound))
    # A baseline that claims more than its request took lowers the part by the bound at most, never below zero.
    assert window_overhead(Overhead(3.0, 0.0), [-3.0] * 5, calls=1).total_ms == pytest.approx(3.0 - bound + 0.02 * 31)
    assert window_overhead(Overhead(0.5, 0.0), [-3.0] * 5, calls=1).total_ms == 0.0
    assert window_overhead(Overhead(1.0, 0.0), [1.4] * 4, calls=1).total_ms == 1.0  # too few: the pings alone


@pytest.mark.parametrize("reference_code", [True, False])
def test_alone_only_a_reference_measures_the_part_subtracted_on_its_own_events(judge, clock, reference_code):
    from evalkit.judge.timing import Overhead
    from evalkit.judge.window import time_window

    # Pings before loading measured 1 ms; each call request pays 1.5 ms beyond its 4 ms of work. A baseline timed alone
    # (the reference's code: its events are trusted) takes the 1.5 ms out; an answer timed alone never uses its own
    # claim, and keeps its pings' 1 ms.
    judge = _judge(judge, timing_trials=20, min_timing_trials=10, timing_budget_s=1e6, timing_precision=1e-9)
    worker = FakeWorker(judge.ref, scripted(clock, "alone", 5.5, [], part_ms=1.5))
    contender = Contender(judge, judge.settings, judge.session(worker, judge.time_limits), verify=not reference_code)
    contender.prepare(Path("submission.py"), {})
    contender.calibrated = contender.overhead = Overhead(1.0, 0.0)  # what the pings before loading measured
    window = time_window(contender, None, judge.settings.repetitions(), warmup=2)
    per_call = sorted(window.answer.per_call(contender))[len(window.answer.walls) // 2]
    assert per_call == pytest.approx((4.0 if reference_code else 4.5) / judge.batch)


def test_an_answer_faster_than_the_judge_can_tell_reads_its_floor_never_zero(judge, clock):
    # Every request pays 1 ms beyond its work and the answer's requests take 0.5-1.5 ms: about half its calls would
    # read 0 ms once that part is out. Each reads the judge's floor instead, and the speedup is a finite figure.
    judge, timing = _paired(judge, clock, {"ms": 11.0, "part_ms": 1.0}, {"ms": 1.0, "wobble": 0.5})
    assert timing["speedup"]["value"] > 1 and all(math.isfinite(v) for v in timing["speedup"]["ci"])
    assert min(timing["samples_ms"]) > 0


def test_a_reference_given_as_text_is_no_trusted_clock(judge, clock, monkeypatch):
    # The same requests as above, on a problem given as text: its baseline runs a client's code, whose own events are
    # as untrusted as an answer's, so both sides take its pings' figure (no time here) and nothing else is taken out.
    _text_problem(judge, monkeypatch)
    judge, timing = _paired(judge, clock, {"ms": 11.5, "part_ms": 1.5}, {"ms": 4.0, "part_ms": 1.5})
    assert timing["overhead_ms"] == pytest.approx(0.0, abs=1e-3) and timing["overhead_requests"] is None
    assert timing["speedup"]["value"] == pytest.approx(11.5 / 4.0)
