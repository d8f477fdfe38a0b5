"""Trusted side: a device judge, the judge of one device (a GPU, or the CPU) and the problems it has loaded.

It turns a built answer into its row: it loads the problem (the float64 reference and the judge; a problem given as
text's reference in a sandboxed worker of its own, ``judge.sandboxed_reference``), runs the sandboxed worker through
``evalkit.judge``, and maps the judgement to a ``ResultRow`` (``evalkit.judge.verdicts``). A problem's PyTorch
baselines are timed once (through ``BaselineCache``): a kind at a time while the judge would otherwise wait for
builds, and what is still missing when an answer of the problem is timed, since only a speedup needs them. It keeps
the problems it loaded lately (``kept_problems``): a judge that goes back to a problem loads nothing again. Each
answer's worker was started while the answer before it was judged (``evalkit.sandbox.spare``), and is stopped
whenever this judge measures; so is, on CUDA, the worker that started the profiler ahead, where a passing answer's
kernels are profiled (``evalkit.judge.kernel_profile``).

It runs in the scheduler's own process (one judge) or in a judge process of its own (``judge_process``,
several judges); either way it never raises for an answer: whatever goes wrong judging one answer becomes
that answer's row.
"""

from __future__ import annotations

import logging
import threading
import time
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from functools import partial
from pathlib import Path
from typing import Any, Callable, Iterator

from evalkit.intake.triage import Triage
from evalkit.judge import verdicts
from evalkit.judge.baselines import baseline_key
from evalkit.judge.builder import BuildOutcome
from evalkit.judge.contender import Contender
from evalkit.judge.reference import REFERENCE_TURN, ReferenceProblem
from evalkit.judge.sandboxed_reference import ReferenceFailed, SandboxedReference
from evalkit.judge.submission_judge import BaselineFailed, Judge, JudgeSettings, close_contender
from evalkit.judge.time_limits import compiles_on_first_call
from evalkit.records import ResultRow, Submission
from evalkit.sandbox.gpu_gate import GpuGate
from evalkit.sandbox.launcher import UntrustedProcess
from evalkit.sandbox.spare import SpareWorker, at_once, discard
from evalkit.schedule.gpu_memory import answer_memory, answers_memory_alone, tail_memory
from evalkit.schedule.judge_messages import StationSpec
from evalkit.schedule.kept_problems import (KeptProblems, ProblemContext, ReferenceOutOfMemory,
                                            answer_reported_out_of_memory, close_judge, close_partner, free_garbage,
                                            kept_memory_share, release_cached_memory)
from evalkit.schedule.overlap import Deliver, JudgeAgainAlone, Lanes
from evalkit.schedule.worker_pools import REFERENCE_SPARES, WorkerPools
from evalkit.sources.problems import Problem

logger = logging.getLogger(__name__)

Quiet = Callable[[], AbstractContextManager[Any]]


class DeviceJudge:
    """The judge of one device. ``quiet()`` is entered around every measurement (it freezes the builds)."""

    def __init__(self, spec: StationSpec, quiet: Quiet | None = None,
                 progress: Callable[[str], None] | None = None, deliver: Deliver | None = None) -> None:
        self.problems, self.plans, self.kinds = spec.problems, spec.plans, spec.kinds
        self.device, self.seed, self.limits, self.driver = spec.device, spec.seed, spec.limits, spec.driver
        self._cache = spec.baselines.open()
        # Its GPU's gates, host-wide (``gpu_gate``): its own thread's, and one for each lane when it overlaps answers
        # (``overlap``: rows decided after their answer's timing go to ``deliver``).
        self._deliver = deliver if spec.overlap else None
        gates = [GpuGate.open(spec.gpu) if spec.device == "cuda" else None for _ in range(3 if self._deliver else 1)]
        self._lanes = Lanes(gates[0], gates[1:])
        self._shares_gpu = spec.gpu_judges > 1  # other judges of the run on its GPU, their answers' memory beside
        self._builds_frozen = quiet or nullcontext
        pools = WorkerPools.start(spec.limits, spec.device, spec.cache_dir, spec.start_cpus)
        self._spare, self._profilers, self._references = pools.spare, pools.profilers, pools.references
        self._progress = progress or (lambda text: None)
        self._kept = KeptProblems(spec.problems, spec.device, kept_memory_share(spec.gpu_judges),
                                  in_use=self._lanes.tail_problems)
        # The answers being judged (their resume keys) and their workers: one dict, replaced whole, so that ``cancel``
        # (another thread, or a signal handler in a judge process) reads it without a lock.
        self._in_hand: dict[str, list[UntrustedProcess]] = {}
        self._hand_changed = threading.Lock()  # two lanes change ``_in_hand``; ``cancel`` only reads it
        self._cancel_pending: str | None = None  # a cancel that came before its answer was in hand

    @property
    def _gate(self) -> GpuGate | None:
        """The gate of the thread judging (``overlap``: one per lane)."""
        return self._lanes.gate

    @property
    def current_problem(self) -> str | None:
        return self._kept.current

    @property
    def kept_problems(self) -> list[str]:
        """The problems this judge holds loaded, the least recently used first."""
        return self._kept.ids

    def prepare(self, problem_id: str, kinds: tuple[str, ...] | None = None) -> dict[str, Any]:
        """Make ``problem_id`` the current problem (freeing the one before) and return its baselines, with every
        one of ``kinds`` (default: the run's) known: from the cache when it holds them (nothing is loaded), else
        timed now."""
        context = self._kept.switch_to(problem_id)
        wanted = self.kinds if kinds is None else tuple(k for k in kinds if k in self.kinds)
        known = context.baselines or {}
        if context.baselines is not None and all(kind in known for kind in wanted):
            return known
        plan = self.plans[problem_id]
        settings = JudgeSettings.of(plan, self.seed)
        key = baseline_key(plan.problem_sha256, self.device, settings.timing_key(), self.driver)
        found = self._cache.lookup(key, wanted) if wanted else {}
        if found is None:
            self._progress(f"{problem_id}: timing PyTorch baselines ({', '.join(wanted)})")
            judge = self._judge_of(context)
            with answer_memory(self._gate, judge, self.device):  # timing a baseline holds what judging an answer does
                found = self._cache.get_or_measure(judge.ref, wanted, self._baseline_of(context), key) \
                    if judge is not None else {}
        context.baselines = {**known, **found}
        return context.baselines

    @property
    def current_baselines(self) -> dict[str, Any]:
        """The current problem's baselines known so far (with their cache ``key``), or {}."""
        context = self._kept.current_context()
        return dict(context.baselines or {}) if context else {}

    def judge_answer(self, submission: Submission, early: Triage, outcome: BuildOutcome,
                     alone: bool = False) -> ResultRow | None:
        """The row of one built answer, stamped with the plan it was judged by; never raises for anything the answer
        does. A judge that overlaps answers (``overlap``) returns None for an answer still judged past its timing:
        its row goes to ``deliver`` once decided (or None there: judge it again ``alone``, with nothing beside it)."""
        plan = self.plans.get(submission.problem)
        if self._deliver is None or alone or not self._overlappable(submission.problem):
            if self._deliver is not None:
                self._lanes.wait_for_tails()
            return verdicts.planned(self._row(submission, early, outcome), plan)
        return self._lanes.run(submission.key, submission.problem, outcome.extension_dir or "",
                               lambda: verdicts.planned(self._row(submission, early, outcome), plan), self._deliver)

    def _overlappable(self, problem_id: str) -> bool:
        """Whether an answer's tail could run beside the next answer: not when its problem's baselines are still to
        be timed after it (a tail never times)."""
        context = self._kept.get(problem_id)
        known = context.baselines if context is not None else None
        return known is not None and all(kind in known for kind in self.kinds)

    def _row(self, submission: Submission, early: Triage, outcome: BuildOutcome) -> ResultRow:
        try:
            failed = verdicts.build_failed_row(submission, early, outcome, self.device)
            if failed is not None:
                return failed  # needs neither the reference nor the baselines
            try:
                row = self._judged(submission, early, outcome)
            except Exception as err:  # noqa: BLE001 - the GPU's memory running out is tried again, nothing else
                if not self._kept.out_of_memory(submission.problem, err):
                    raise
                self._alone_from_here(err)
                again = self._judged_alone(submission, early, outcome, "the GPU ran out of memory")
                if again is None:  # nothing freed, no other judge to wait out
                    raise
                return again
            if answer_reported_out_of_memory(row) and (self._shares_gpu or len(self._kept.ids) > 1):
                # Its word, not the judge's observation: enough for one more judging, never for a verdict.
                self._alone_from_here(None)
                return self._judged_alone(submission, early, outcome, "its worker ran out of GPU memory") or row
            return row
        except JudgeAgainAlone:
            raise
        except ReferenceFailed as err:  # an untrusted reference's worker, or the GPU's memory: not the answer's fault
            self._alone_from_here(err)
            logger.warning("%s: %s", submission.problem, err)
            close_judge(self._kept.get(submission.problem))  # loaded anew for the problem's next answer
            return verdicts.unavailable_row(submission, early, outcome, self.device, str(err))
        except Exception as err:  # noqa: BLE001 - a hostile answer may find a way to upset the judge itself
            self._alone_from_here(err)
            logger.exception("%s/%s: the judge failed on this answer", submission.problem, submission.sample)
            return verdicts.judge_failed_row(submission, early, self.device, err)
        finally:
            release_cached_memory(self.device)  # what this judge no longer uses, the next worker may need

    def _alone_from_here(self, err: BaseException | None) -> None:
        """In a tail (``overlap``), what follows (unloading problems, closing a reference, a judge failure's row) is
        for the answer judged again alone: ``JudgeAgainAlone``. Elsewhere nothing."""
        if self._lanes.in_tail():
            raise JudgeAgainAlone(str(err or "its worker ran out of GPU memory")) from err

    def _judged_alone(self, submission: Submission, early: Triage, outcome: BuildOutcome, why: str) -> ResultRow | None:
        """The answer judged again with no other problem kept and no other judge's answer holding the GPU's memory
        beside it; None when neither held any (nothing to free)."""
        others_unloaded = self._kept.unload_all(submission.problem)
        if not (others_unloaded or self._gate is not None):
            return None
        logger.warning("%s/%s: %s: judged again with no other problem kept, and no other judge's answer beside it",
                       submission.problem, submission.sample, why)
        with answers_memory_alone(self._gate, self.device):
            return self._judged(submission, early, outcome)

    def _judged(self, submission: Submission, early: Triage, outcome: BuildOutcome) -> ResultRow:
        """The answer's row; when its problem was loaded for it (not kept), the load's seconds in its stages
        (``problem_load_s``): what a judge spends going back to problems it let go shows in the rows."""
        context = self._kept.switch_to(submission.problem)
        start, kept = time.monotonic(), context.judge is not None
        judge = self._judge_of(context)
        load_s = time.monotonic() - start
        with ExitStack() as held:
            held.enter_context(answer_memory(self._gate, judge, self.device))  # the problem loaded first: its size
            self._lanes.hold(held, lambda: tail_memory(self._gate, judge, self.device))
            row = self._judge_one(submission, early, outcome, context)
        if not kept and judge is not None:
            row.stage_seconds["problem_load_s"] = load_s
        if context.judge is not None:
            self._kept.answered(submission.problem)
        return row

    def cancel(self, key: str) -> None:
        """The answer ``key`` (``Submission.key``) is no longer wanted: if it is in hand, kill its workers now (its
        row, a crash, is dropped by its batch); else nothing."""
        self._cancel_pending = key
        workers = self._in_hand.get(key)
        if workers is not None:
            _cancel_workers(workers)

    def abandon(self) -> None:
        """The run or evaluator is stopping (called from another thread): start no more workers (the group kill
        that follows ends those running), so what is in hand ends at once, a baseline timed ahead too."""
        for pool in self._pools():
            pool.stop()

    def close(self) -> None:
        if self._deliver is not None:
            self._lanes.wait_for_tails()  # a tail ends within its workers' limits
        at_once(lambda end: end(), [*(partial(close_judge, context) for context in self._kept),
                                     *(pool.close for pool in self._pools())])
        self._kept.clear()
        free_garbage(self.device)

    def _baseline_of(self, context: ProblemContext) -> Callable[[str], dict[str, Any]]:
        """Time one baseline kind: the live baseline itself, alone, when it is of that kind; else that kind in a
        worker started ahead, beside the live baseline (so their ratio comes from one window), then closed."""
        judge = context.judge

        def judged(kind: str) -> dict[str, Any]:
            partner = self._partner(context)
            try:
                if partner is not None and partner[0] == kind:
                    return judge.time_baseline(partner[1])
                worker = self._spare.take(None)
                try:
                    baseline = judge.start_baseline(kind, worker)
                    try:
                        return judge.time_baseline(baseline, partner)
                    finally:
                        close_contender(baseline)
                finally:
                    discard(worker)
            except BaselineFailed as failure:
                return {"error": str(failure)}
        return judged

    def _partner(self, context: ProblemContext, start: bool = True) -> tuple[str, Contender] | None:
        """The live baseline of the run's first kind that the current problem's answers are timed beside: kept
        with the problem (``kept_problems.ProblemContext``), started anew when it failed (unless ``start`` is
        false: then the kept one or None). None when no baseline is asked for, or it cannot be started (its answers
        then get no speedup, and their rows say why)."""
        kinds, judge = self.kinds, context.judge
        if not kinds or judge is None:
            return None
        if context.partner is not None and context.partner.failed:
            close_partner(context)
        if context.partner is None and not start:
            return None
        if context.partner is None:
            worker = self._spare.take(None)
            try:
                context.partner = judge.start_baseline(kinds[0], worker)
            except BaselineFailed as failure:
                logger.warning("%s: no live %s baseline: %s", context.problem.id, kinds[0], failure)
                discard(worker)
                return None
        return kinds[0], context.partner

    def _pools(self) -> list[SpareWorker]:
        """The workers this judge starts ahead: the answers', the references', the profilers' (CUDA)."""
        return [self._spare, self._references] + ([self._profilers] if self._profilers is not None else [])

    @contextmanager
    def _quiet(self) -> Iterator[list[str]]:
        """Around every measurement: the GPU its alone (yields the uses not waited out), builds and spares frozen."""
        self._lanes.wait_for_tails()  # nothing of another answer beside a timing (``overlap``)
        turn = partial(self._gate.exclusive, self._builds_frozen) if self._gate is not None else self._builds_frozen
        with turn() as contended, ExitStack() as parked:
            for pool in self._pools():
                parked.enter_context(pool.parked())
            yield contended or []

    def _use(self) -> AbstractContextManager[Any]:  # around this judge's non-timed GPU work (``gpu_gate``)
        return self._gate.use() if self._gate is not None else nullcontext()

    def _entry_aside(self, worker: UntrustedProcess) -> UntrustedProcess:  # waits for its build's entry outside a use
        worker.waiting_for_entry = self._gate.aside if self._gate is not None else nullcontext
        return worker

    def _judge_of(self, context: ProblemContext) -> Judge | None:
        """The problem's judge, loaded on first need; None (and ``setup_error`` set) when the reference fails;
        ``ReferenceFailed`` when loading it ran the GPU out of memory (``_row`` tries again)."""
        if context.problem.broken and not context.setup_error:
            context.setup_error = f"problem '{context.problem.id}' cannot be used: {context.problem.broken}"
        if context.judge is None and not context.setup_error:
            problem, plan = context.problem, self.plans[context.problem.id]
            ref: ReferenceProblem | None = None
            try:
                plan.check_current(problem.sha256)
                settings = JudgeSettings.of(plan, self.seed)
                with self._use(), REFERENCE_TURN:  # the reference's weights and first outputs on the GPU
                    ref = self._reference(problem, settings.precision)
                    context.judge = Judge(ref, settings, self.limits, quiet=self._quiet, use=self._use)
            except Exception as err:  # noqa: BLE001 - a broken problem is reported on every row, the run goes on
                if ref is not None:
                    ref.close()
                if self._kept.out_of_memory(problem.id, err):  # the GPU was full: loaded again, not kept as broken
                    raise ReferenceOutOfMemory(f"the reference ran out of GPU memory: {type(err).__name__}: {err}") \
                        from err
                logger.error("%s: the reference cannot be run: %s", problem.id, err)
                where = f" ({problem.reference_path})" if problem.trusted else ""  # no folder of the host for clients
                context.setup_error = (f"the reference of problem '{problem.id}'{where} failed on this device: "
                                       f"{type(err).__name__}: {err}")
        return context.judge

    def _reference(self, problem: Problem, precision: str) -> ReferenceProblem:
        """The problem's reference on this judge's device: run here for a problem folder (trusted), in a sandboxed
        worker of its own for a problem given as text (``sandboxed_reference``)."""
        if problem.trusted:
            return ReferenceProblem(problem, self.device, init_seed=self.seed, precision=precision)
        self._references.keep(REFERENCE_SPARES)
        return SandboxedReference(problem, self.device, self.seed, precision, self._references.take(None),
                                  self.limits.memory_bytes)

    def _judge_one(self, submission: Submission, early: Triage, outcome: BuildOutcome,
                   context: ProblemContext) -> ResultRow:
        judge = self._judge_of(context)
        if judge is None:
            return verdicts.unavailable_row(submission, early, outcome, self.device, context.setup_error)
        extensions = Path(outcome.extension_dir).parent / "extensions"  # the build stage already chose it
        workers = [self._entry_aside(self._spare.take(extensions))]
        with self._hand_changed:
            self._in_hand = {**self._in_hand, submission.key: workers}
        if self._cancel_pending == submission.key:  # cancelled while its message was on the way
            _cancel_workers(workers)

        def profiler() -> tuple[UntrustedProcess, Path]:
            workers.append(self._entry_aside(self._profilers.take(extensions)))
            return workers[-1], _with_code(workers[-1], early.code)
        try:
            judgement = judge.examine(workers[0], _with_code(workers[0], early.code),
                                    compiles_on_first_call(early.code, extensions),
                                    profiler=profiler if self._profilers is not None else None,
                                    partner=lambda start=True: self._partner(context, start),
                                    timed=self._lanes.timing_over)
        finally:
            with self._hand_changed:
                self._in_hand = {key: held for key, held in self._in_hand.items() if key != submission.key}
            if self._cancel_pending == submission.key:
                self._cancel_pending = None
            for worker in workers:
                discard(worker)  # closed already, unless the judge failed before reaching it
        # Baselines only for a timed answer (a speedup needs them), timed now unless known: a run whose answers all
        # fail times none. The answer's worker is closed and its lent buffers freed by now (``Session.release``);
        # the judge's own garbage and cached memory go too, so the baselines' worker finds the GPU as free.
        baselines = context.baselines or {}
        if judgement.timing and not all(kind in baselines for kind in self.kinds):
            free_garbage(self.device)
            baselines = self.prepare(submission.problem)
        settings = self.plans[submission.problem].settings
        row = verdicts.built_row(submission, early, outcome, self.device)
        return verdicts.judged_row(row, judgement, early, baselines, (settings.flops, settings.min_bytes), extensions,
                                   self.kinds)


def _cancel_workers(workers: list[UntrustedProcess]) -> None:
    for worker in list(workers):
        worker.cancel("cancelled: its caller no longer waits for its row")


def _with_code(worker: UntrustedProcess, code: str) -> Path:
    """Write the answer's code into ``worker``'s folder (before its setup hands the folder over); its path."""
    path = worker.workdir / "submission.py"
    path.write_text(code)
    return path
