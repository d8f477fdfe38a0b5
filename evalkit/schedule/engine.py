"""Trusted side: the engine that moves answers through the stages on one machine, for ``evalkit score`` and
the Python API alike.

triage (in this process, nothing runs) -> build (sandboxed, a pool of CPU workers on the build cores, ahead
of judging) -> judge (one station per GPU, or N CPU stations, each on cores of its own) -> rows, yielded as
they are decided. A station takes the built answers of the problem it has loaded first; a problem's
baselines are timed by one station while the others wait for them (``BaselineCache`` shares them).

It decides no verdict (``evalkit.judge.verdicts`` does) and writes no file but the caches: the caller
records the rows. Every sandbox carries the run's group token (``Limits.group``), so ``close`` (and a stop
signal, through the caller's ``kill_group``) ends them all.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future, wait
from dataclasses import replace
from typing import Any, Callable, Iterable, Iterator

from evalkit.intake.static_scan import builds_nothing
from evalkit.intake.triage import Triage, triage
from evalkit.judge import torch_headers, verdicts
from evalkit.judge.builder import BuildOutcome, builds_root, nothing_to_build
from evalkit.records import EvalkitError, ResultRow, Submission
from evalkit.report_folder import ReportFolder
from evalkit.sandbox.freezer import BuildFreezer, partition_builds
from evalkit.sandbox.launcher import Limits
from evalkit.sandbox.processes import MARKER_VARIABLE
from evalkit.sandbox.remains import kill_group
from evalkit.schedule.backend import Backend, LocalBackend, Station
from evalkit.schedule.dispatch import Batch, Item, Preparation, ReadyQueue
from evalkit.schedule.judge_messages import BaselineFiles, StationSpec
from evalkit.schedule.options import JudgeOptions
from evalkit.schedule.placement import JudgeSlot, Placement
from evalkit.sources.problems import Problem
from evalkit.sources.settings import JudgingPlan

logger = logging.getLogger(__name__)

JUDGE_STOP_S = 30.0  # how long close() waits for judge threads to leave their answer (their sandboxes are killed)
ROW_POLL_S = 0.5  # the caller's thread wakes this often while it waits for rows (so signals get through)



class JudgesStopped(EvalkitError):
    """Every judge station ended before the batch was judged (each one's reason is logged as it stops)."""


class DeadlinePassed(EvalkitError, TimeoutError):
    """The caller's deadline passed before every answer of its batch was judged; the rest were cancelled."""


def check_deadline(batch: Batch, deadline: float | None) -> None:
    """``DeadlinePassed`` (the batch cancelled) once ``deadline`` (``time.monotonic()``) has passed."""
    if deadline is not None and time.monotonic() >= deadline and not batch.done:
        batch.cancel()
        raise DeadlinePassed(f"{batch.expected - batch.received} of {batch.expected} answer(s) not judged before "
                             f"the deadline; they were cancelled")

def _init_inputs(problem: Problem) -> list[Any] | None:
    """What a build constructs ``ModelNew`` with: a folder's ``get_init_inputs()``, an untrusted problem's as its
    sandboxed check found them (never run here)."""
    from evalkit.judge.sandboxed_reference import checked_init_inputs

    return problem.init_inputs_or_none() if problem.trusted else checked_init_inputs(problem)


class Engine:
    """Builds and judges answers with one build pool and one station per judge slot; reuse it across calls."""

    def __init__(self, problems: dict[str, Problem], plans: dict[str, JudgingPlan], options: JudgeOptions, device: str,
                 seed: int, limits: Limits, baselines: BaselineFiles, driver: str | None, placement: Placement,
                 progress: Callable[[str], None] | None = None, backend: Backend | None = None,
                 report: ReportFolder | None = None) -> None:
        self.problems, self.plans, self.options, self.device = problems, plans, options, device
        self.seed, self.limits = seed, limits
        self.placement = placement
        self.progress = progress or (lambda text: None)
        self.freezer = BuildFreezer(limits.group)
        partition_builds(self.freezer, device, placement.build_cpus)
        self.backend = backend or LocalBackend(options.build_jobs(len(placement.build_cpus) or None, device=device))
        self._build_limits = replace(limits, cpus=placement.build_cpus or None)
        spec = StationSpec(problems, plans, options.baselines, options.cache_dir, device, seed, limits, baselines,
                           driver, overlap=options.overlap)
        self.stations: list[Station] = [self.backend.station(slot, replace(spec, limits=self._judge_limits(slot),
                                                                           start_cpus=self._start_cpus(slot)),
                                                             len(placement.slots), self.freezer, self.progress,
                                                             report)
                                        for slot in placement.slots]
        self._problem_locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        self._ready = ReadyQueue(on_cancel=self._cancel_in_hand)  # every batch's built answers; one thread per
        # station takes from it
        self._judge_threads: list[threading.Thread] = []
        self._threads_guard = threading.Lock()
        self._busy: set[str] = set()  # stations holding an answer (or timing a baseline ahead)
        self._in_hand: dict[str, tuple[Station, Item]] = {}  # station name -> the answer it judges
        self._stopping = False  # set once close() abandons answers in hand: their failures are not theirs
        self.prepared: set[str] = set()  # problems whose every baseline some station has timed (or found)
        self._ahead: set[str] = set()  # problems whose baselines were queued to be timed ahead

    def rows(self, submissions: Iterable[tuple[Submission, list[str]]],
              deadline: float | None = None) -> Iterator[ResultRow]:
        """Rows of ``submissions`` (each with its file's warnings) in the order they are decided. Any number of
        calls may be in flight at once, from any threads; one left unfinished cancels what it had not received,
        and so does ``deadline`` (a ``time.monotonic()`` instant) passing, which raises ``DeadlinePassed``."""
        batch = self.submit(submissions)
        try:
            while not batch.done:
                row = batch.next_row(ROW_POLL_S if deadline is None else
                                     max(0.0, min(ROW_POLL_S, deadline - time.monotonic())))
                if row is None:
                    check_deadline(batch, deadline)
                    self.check_judges()
                    continue
                yield row
        finally:
            if not batch.done:
                batch.cancel()

    def submit(self, submissions: Iterable[tuple[Submission, list[str]]], batch: Batch | None = None) -> Batch:
        """Triage ``submissions`` now (rows that need no judge are in the batch at once) and queue the rest for
        building and judging; their rows arrive in the returned ``Batch``."""
        batch = batch or Batch()
        for submission, warnings in submissions:
            early = triage(submission.text)
            early.warnings.extend(warnings)
            batch.expected += 1
            row = verdicts.early_row(submission, early, self.device)
            if row is not None:
                batch.put(verdicts.planned(row, self.plans.get(submission.problem)))
                continue
            self._start_judges()
            if submission.problem not in self.prepared | self._ahead:
                self._ahead.add(submission.problem)
                self._ready.ahead(submission.problem, self.options.baselines)
            self._ready.add(Item(submission, early, self._start_build(submission, early), batch))
        return batch

    def check_untrusted(self, problem: Problem) -> None:
        """Check a problem given as text in a sandbox, as a build runs (``sandboxed_reference.check_untrusted``)."""
        from evalkit.judge.sandboxed_reference import check_untrusted

        check_untrusted(problem, self._build_limits, self.freezer)

    def check_judges(self) -> None:
        """``JudgesStopped`` when every judge station has ended (each one's reason is logged as it stops)."""
        if self._judge_threads and not any(thread.is_alive() for thread in self._judge_threads):
            raise JudgesStopped("every judge station stopped before all answers were judged; the log above says "
                                "why each stopped")

    def prepare_baselines(self, problem_ids: Iterable[str]) -> None:
        """Time (or find cached) the baselines of ``problem_ids`` now, whether or not an answer needs them: through
        the queue the answers take, so a station does it between two answers (never beside one, nor beside another
        timing); returns once done, raising what failed (``JudgesStopped`` when every judge stopped meanwhile)."""
        wanted = [problem_id for problem_id in problem_ids if problem_id not in self.prepared]
        if not wanted:
            return
        self._start_judges()
        preparation = self._ready.prepare(wanted)
        while not preparation.done.done():
            wait([preparation.done], timeout=ROW_POLL_S)
            if not preparation.done.done():
                self.check_judges()
        preparation.done.result()

    def warm_up(self, problem_ids: Iterable[str]) -> None:
        """Start, in the background, what a first answer would otherwise wait for: the judges (a judge process, its
        spare workers) and, until the first answer comes, the baselines of ``problem_ids`` (the problems known at the
        start). Returns at once; changes no verdict."""
        self._start_judges()
        if isinstance(self.backend, LocalBackend):  # the first builds' precompiled header, begun before they come
            torch_headers.start(builds_root(self.options.cache_dir), self.device,
                                f"{MARKER_VARIABLE}={self.limits.group}.torch-headers", self.freezer)
        for problem_id in problem_ids:
            if problem_id not in self.prepared:
                self._ready.when_idle(problem_id, self.options.baselines)

    @property
    def sizes(self) -> dict[str, int]:
        """How many entries the engine's containers hold now: none may grow with the number of answers judged."""
        return {**self._ready.sizes, **self.backend.sizes, "in_hand": len(self._in_hand), "busy": len(self._busy),
                "problem_locks": len(self._problem_locks), "prepared": len(self.prepared),
                "problems_ahead": len(self._ahead)}

    def close(self, abandon: bool = False) -> None:
        """Stop the builds (``abandon``: kill the running ones too) and every judge station."""
        self._ready.stop()  # first: no judge takes more work (a baseline timed ahead, an answer)
        if abandon:
            if self._busy:
                # A judge would go on (and start new sandboxes) while its thread waits for it: told before the kill.
                self._stopping = True
                for station in self.stations:
                    station.abandon()
            self.backend.abandon_builds(lambda: kill_group(self.limits.group))
        self._wait_for_judges()
        self.backend.close()
        for station in self.stations:
            try:
                station.close()
            except Exception:  # noqa: BLE001 - closing the rest matters more
                logger.exception("closing a judge station failed")
        self.freezer.close()

    def _wait_for_judges(self) -> None:
        """Let each judge thread leave the answer it holds before its station and the freezer go: a thread
        still timing would thaw a cgroup already removed, or outlive the interpreter (an abort at exit)."""
        deadline = time.monotonic() + JUDGE_STOP_S
        for thread in self._judge_threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        alive = [thread.name for thread in self._judge_threads if thread.is_alive()]
        if alive:
            logger.warning("judge thread(s) %s still busy after %g s; closing without them", alive, JUDGE_STOP_S)

    def _judge_limits(self, slot: JudgeSlot) -> Limits:
        return replace(self.limits, cpus=slot.cpus or None)

    def _start_cpus(self, slot: JudgeSlot) -> tuple[int, ...] | None:
        """Where a pinned judge's workers start: its cores and the builds' (never another judge's)."""
        return tuple(sorted({*slot.cpus, *self.placement.build_cpus})) if slot.cpus else None

    def _start_build(self, submission: Submission, early: Triage) -> Future[BuildOutcome]:
        problem, plan = self.problems[submission.problem], self.plans[submission.problem]
        if builds_nothing(early.code):  # no sandbox to start and import torch in: the judge's worker imports it
            return nothing_to_build(early.code, builds_root(self.options.cache_dir), self.device)
        return self.backend.start_build(early.code, builds_root(self.options.cache_dir), self.device,
                                        plan.settings.build_timeout_s, self._build_limits,
                                        _init_inputs(problem), self.freezer)

    def _start_judges(self) -> None:
        """One thread per station, for the engine's life: each takes answers from the queue every batch shares."""
        with self._threads_guard:
            if self._judge_threads:
                return
            # Two threads for a judge that overlaps answers (``overlap``): one sends it the next answer while the
            # other waits for the row of the answer before, still judged past its timing.
            self._judge_threads = [threading.Thread(target=self._serve, args=(station, slot, lane), daemon=True,
                                                    name=f"evalkit-judge-{slot.name}" + (f"-{lane}" if lane else ""))
                                   for station, slot in zip(self.stations, self.placement.slots)
                                   for lane in range(getattr(station, "lanes", 1))]
            for thread in self._judge_threads:
                thread.start()

    def _serve(self, station: Station, slot: JudgeSlot, lane: int = 0) -> None:
        name, gpu = slot.name, f"{slot.gpu}" if slot.gpu is not None and slot.gpu_judges > 1 else ""
        held = f"{name}/{lane}"  # this thread's entry in ``_busy`` and ``_in_hand``
        try:
            if lane == 0:
                station.start()  # ahead of its first request: a judge process, the spare workers, start meanwhile
        except Exception:  # noqa: BLE001 - its first request starts it again, and its row says what failed
            logger.exception("judge %s could not start ahead of its first answer", name)
        while (item := self._ready.take(station.current_problem, name, gpu, station.kept_problems)) is not None:
            self._busy.add(held)
            try:
                if isinstance(item, tuple):
                    self._prefetch(station, *item)
                elif isinstance(item, Preparation):
                    self._prepare_all(station, item)
                elif not item.batch.cancelled:
                    self._in_hand[held] = (station, item)
                    try:
                        row = self._judge_item(station, item)
                    finally:
                        self._in_hand.pop(held, None)
                    if row.timing:
                        self.prepared.add(row.problem)  # a timed answer's problem has every baseline by now
                    row.judge = name
                    item.batch.put(row)
            finally:
                self._busy.discard(held)

    def _cancel_in_hand(self, batch: Batch) -> None:
        """``batch`` was cancelled: end its answers the stations hold now, not when they would have finished."""
        for station, item in list(self._in_hand.values()):
            if item.batch is batch:
                station.cancel(item.submission.key)

    def _judge_item(self, station: Station, item: Item) -> ResultRow:
        submission, early = item.submission, item.early
        self.progress(f"{submission.problem}/{submission.sample}: judging")
        try:
            outcome = item.build.result()
            if outcome.status == "ok" and station.current_problem != submission.problem:
                self._prepare(station, submission.problem, kinds=())  # a build that failed needs no problem loaded
            if item.batch.cancelled:  # while its problem loaded: judge nothing (the row is dropped)
                return verdicts.judge_failed_row(submission, early, self.device, RuntimeError("cancelled"))
            return station.judge_answer(submission, early, outcome)  # stamped by the judge with the plan it judged by
        except Exception as err:  # noqa: BLE001 - a judge process that died, a build that raised: this row only
            if self._stopping:  # its station was abandoned: the row is never recorded, and --resume judges it
                logger.debug("%s/%s: abandoned as the run stops (%s)", submission.problem, submission.sample, err)
            else:
                logger.exception("%s/%s: could not be judged", submission.problem, submission.sample)
            return verdicts.planned(verdicts.judge_failed_row(submission, early, self.device, err),
                                    self.plans.get(submission.problem))

    def _prefetch(self, station: Station, problem_id: str, kind: str) -> None:
        try:
            self._prepare(station, problem_id, kinds=(kind,))
        except Exception:  # noqa: BLE001 - the answers of this problem will meet the same failure as rows
            if self._stopping:  # its workers were killed as the evaluator closed
                logger.debug("%s: timing its %s baseline ahead ended as the judges closed", problem_id, kind)
            else:
                logger.exception("%s: timing its %s baseline ahead of its answers failed", problem_id, kind)

    def _prepare_all(self, station: Station, preparation: Preparation) -> None:
        try:
            for problem_id in preparation.problems:
                self._prepare(station, problem_id)
        except Exception as err:  # noqa: BLE001 - the caller of prepare_baselines raises it
            preparation.done.set_exception(err)
        else:
            preparation.done.set_result(None)

    def _prepare(self, station: Station, problem_id: str, kinds: tuple[str, ...] | None = None) -> None:
        """Load a problem on ``station``, with the baselines of ``kinds`` (default: all); one station at a time per
        problem (the baseline cache also makes a judge wait while another times the same baseline)."""
        with self._locks_guard:
            lock = self._problem_locks.setdefault(problem_id, threading.Lock())
        with lock:
            station.prepare(problem_id, kinds)
            if kinds is None:
                self.prepared.add(problem_id)
