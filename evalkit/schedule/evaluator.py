"""Trusted side: the Python API (``from evalkit import Evaluator``), for training loops and notebooks that want a
verdict without a report folder; ``evalkit score`` is a client of it too (``local.score``).

    from evalkit import Evaluator
    with Evaluator(problems="problems/", device="auto") as ev:
        row = ev.judge("alexnet_conv1", answer_text)        # the same dict as a results.jsonl row
        for row in ev.judge_many(pairs):                     # (problem_id, text) pairs; rows as they complete
            ...
        row = await ev.judge_async("alexnet_conv1", answer_text)  # from an event loop, hundreds in flight

An ``Evaluator`` drives the engine (``evalkit.schedule.engine``): the sandbox, the judges (one per GPU, or
``judges=N`` on CPU), the build cache and the baseline cache, kept across calls. It holds
no global state and installs no signal handler; ``close()`` (or leaving the ``with`` block) ends every
sandbox it started. Whatever an answer does, it comes back as a row (``verdict`` says what happened); only
a caller's own mistake raises (an unknown problem id, a bad setting).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
import itertools
import logging
import time
import uuid
import weakref
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Iterable, Iterator

from evalkit.judge.feedback import feedback_for
from evalkit.records import EvalkitError, ResultRow, Submission, sha256_text
from evalkit.report_folder import ReportFolder
from evalkit.sandbox.launcher import Limits
from evalkit.schedule.dispatch import Batch
from evalkit.schedule.backend import Machines
from evalkit.schedule.engine import ROW_POLL_S, check_deadline
from evalkit.schedule.options import JudgeOptions, judge_options
from evalkit.schedule.judge_messages import BaselineFiles
from evalkit.schedule.verdict_cache import VerdictCache
from evalkit.sources.problems import Problem
from evalkit.sources.settings import JudgingPlan

logger = logging.getLogger(__name__)

API_RUN = "api"  # the ``run`` field of the API's rows
Pair = tuple[Any, str] | tuple[Any, str, str | None]  # (problem id or Problem, answer text[, sample])


class Evaluator:
    """Judges answers to the problems under ``problems`` (a folder of problem folders, trusted; None, the default:
    none, only problems given as text, ``Problem.from_source``); reuse one across calls (builds, baselines and judges
    are kept). Keyword settings are those of ``evalkit score`` (``evalkit.schedule.options.JudgeOptions``:
    ``gpus``, ``judges``, ``jobs``, every problem setting a run may override under its problem.toml name
    (``correctness_trials``, ``timing_trials``, ``timing_budget_s``, ``atol``, ``rtol``, ``run_timeout_s``, ...;
    older names such as ``trials`` and ``timeout_s`` still work), ``baselines``, ``cache_dir``, ``seed`` ...)."""

    def __init__(self, problems: str | Path | None = None, device: str = "auto", **settings: Any) -> None:
        from evalkit.schedule.machines import machines_and_limits
        from evalkit.sources.problems import discover_problems

        from evalkit.schedule.preflight import check_torch_include

        options = judge_options(device, settings)  # a wrong name or value is refused before anything starts
        check_torch_include()
        where, limits = machines_and_limits(options)
        if where.device == "cpu" and "compile" in options.baselines:
            logger.warning("each problem's first timed answer waits for its torch.compile baseline, which takes "
                           "minutes on a CPU; pass baselines='eager' to leave it out")
        seed = options.seed if options.seed is not None else uuid.uuid4().int % 2**31
        baselines = BaselineFiles(None, options.cache_dir / "baselines.json", remeasure=options.remeasure_baselines,
                                  run=limits.group)
        known = discover_problems(Path(problems), lenient=True) if problems is not None else {}
        self._start(known, options.plans(known), options, where, seed, limits, baselines, None)
        # In the background: the judges and their workers, the known problems' baselines (until the first answer
        # comes), so that the first answer waits for little more than a later one does.
        self._engine.warm_up(sorted(self.problems))

    @classmethod
    def for_report(cls, problems: dict[str, Problem], plans: dict[str, JudgingPlan], options: JudgeOptions,
                   where: Machines, seed: int, limits: Limits, baselines: BaselineFiles, driver: str | None,
                   progress: Callable[[str], None] | None = None,
                   report: ReportFolder | None = None) -> "Evaluator":
        """The evaluator of one ``evalkit score`` run, whose plans, seed and machines it has already fixed; the
        baselines its judges time go into ``report``'s."""
        evaluator = cls.__new__(cls)
        evaluator._start(problems, plans, options, where, seed, limits, baselines, driver, progress, report)
        return evaluator

    def _start(self, problems: dict[str, Problem], plans: dict[str, JudgingPlan], options: JudgeOptions,
               where: Machines, seed: int, limits: Limits, baselines: BaselineFiles, driver: str | None,
               progress: Callable[[str], None] | None = None, report: ReportFolder | None = None) -> None:
        from evalkit.judge.environment import environment
        from evalkit.schedule.engine import Engine

        self.options, self.problems, self.plans, self.device, self.seed = options, problems, plans, where.device, seed
        if driver is None:
            driver = (where.environment or environment()).get("driver")
        self._engine = Engine(problems, plans, options, where.device, seed, limits, baselines, driver,
                              where.placement, progress=progress, backend=where.backend, report=report)
        self._finalizer = weakref.finalize(self, _shut_down, self._engine)
        self._samples = itertools.count()
        self._verdicts = VerdictCache() if options.reuse_verdicts else None

    @property
    def build_isolation(self) -> str:
        """How builds are kept off timings here: ``partition (cpuset)``, or ``freeze (...)`` (docs/judge.md)."""
        return self._engine.freezer.isolation

    def judge(self, problem_id: str | Problem, text: str, *, sample: str | None = None,
              timeout_s: float | None = None) -> dict[str, Any]:
        """The row of one answer to ``problem_id`` (an id, or a ``Problem``, e.g. ``Problem.from_source(text)``), a
        dict as in ``results.jsonl``. ``timeout_s``: give up (``DeadlinePassed``, the answer cancelled) after that."""
        pair = (problem_id, text, sample) if sample else (problem_id, text)
        return next(iter(self.judge_many([pair], deadline_s=timeout_s)))

    def judge_many(self, pairs: Iterable[Pair], *, deadline_s: float | None = None,
                   on_error: str = "raise") -> Iterator[dict[str, Any]]:
        """Rows of (problem_id, text) or (problem_id, text, sample) answers, in the order they are decided (match
        them by ``sample``: "api-N" in the order given, unless named). Every problem id is checked here, before
        anything is built: a bad one raises, or with ``on_error="row"`` is a ``skipped`` row saying why (the rest
        are judged). Any number of calls may be in flight at once, from any threads; one left unfinished (closed,
        or dropped) cancels its answers not yet judged, and leaves the judges as a finished one does; so does
        ``deadline_s`` passing, which raises ``DeadlinePassed`` after the rows decided in time."""
        submissions, known = self._submissions(pairs, on_error)
        deadline = None if deadline_s is None else time.monotonic() + deadline_s
        return self._rows(submissions, known, deadline)

    async def judge_async(self, problem_id: str | Problem, text: str, *, sample: str | None = None,
                          timeout_s: float | None = None) -> dict[str, Any]:
        """``judge``, awaited: the event loop runs on meanwhile; cancelling the await cancels this answer alone."""
        pair = (problem_id, text, sample) if sample else (problem_id, text)
        async for row in self.judge_many_async([pair], deadline_s=timeout_s):
            return row
        raise AssertionError("a batch of one answer yields one row")  # pragma: no cover

    async def judge_many_async(self, pairs: Iterable[Pair], *, deadline_s: float | None = None,
                               on_error: str = "raise") -> AsyncIterator[dict[str, Any]]:
        """``judge_many`` as an async iterator, on the same judges and caches: any number in flight from one event
        loop (or several threads), none blocking the loop; leaving it early (a cancelled task, a ``break``)
        cancels its answers not yet judged."""
        loop = asyncio.get_running_loop()
        arrived = asyncio.Event()
        deadline = None if deadline_s is None else time.monotonic() + deadline_s

        def wake() -> None:  # called from the judge thread that decided a row
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits for this batch any more
                loop.call_soon_threadsafe(arrived.set)

        submissions, known = self._submissions(pairs, on_error)
        for row in known:
            yield row.to_dict()
        texts = _texts_by_sample(submissions)
        batch = await asyncio.to_thread(self._engine.submit, ((s, []) for s in submissions), Batch(notify=wake))
        try:
            while not batch.done:
                arrived.clear()
                row = batch.next_row(0)
                if row is None:
                    wait_s = ROW_POLL_S if deadline is None else max(0.0, min(ROW_POLL_S, deadline - time.monotonic()))
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(arrived.wait(), wait_s)
                    check_deadline(batch, deadline)
                    self._engine.check_judges()
                    continue
                yield self._finished(row, texts.get(row.sample)).to_dict()
        finally:
            if not batch.done:
                batch.cancel()

    def judge_submissions(self, submissions: Iterable[tuple[Submission, list[str]]]) -> Iterator[ResultRow]:
        """Rows (``ResultRow``) of already named submissions, each with its file's warnings, as they are decided."""
        for row in self._engine.rows(submissions):
            yield self._finished(row)

    def _finished(self, row: ResultRow, text: str | None = None) -> ResultRow:
        """``row`` with its problem's origin and the feedback for the model's next turn (kept for reuse, with
        ``reuse_verdicts``, when the answer's ``text`` is given)."""
        row = with_origin(row, self.problems.get(row.problem))
        row.feedback = feedback_for(row)
        plan = self.plans.get(row.problem)
        if self._verdicts is not None and text is not None and plan is not None:
            self._verdicts.put(plan.problem_sha256, text, row)
        return row

    def prepare_baselines(self, problem_ids: Iterable[str]) -> None:
        """Time (or read from the cache) the baselines of ``problem_ids`` now, and return once they are known.
        Judging times a problem's baselines only once an answer of it is correct and timed (ahead of it, while the
        judge waits for builds; those of the problems known at the start also while no answer is queued). Safe
        beside judge calls from other threads: the judges do it in turn with the answers."""
        from evalkit.sources.problems import unknown_problem

        wanted = sorted(set(problem_ids))
        for problem_id in wanted:
            if problem_id not in self.problems:
                raise unknown_problem(problem_id, self.problems)
        self._engine.prepare_baselines(wanted)

    def _rows(self, submissions: list[Submission], known: list[ResultRow],
              deadline: float | None) -> Iterator[dict[str, Any]]:
        for row in known:
            yield row.to_dict()
        texts = _texts_by_sample(submissions)
        for row in self._engine.rows(((s, []) for s in submissions), deadline):
            yield self._finished(row, texts.get(row.sample)).to_dict()

    def _submissions(self, pairs: Iterable[Pair], on_error: str) -> tuple[list[Submission], list[ResultRow]]:
        """The pairs as submissions, checked; with ``on_error="row"``, a bad one becomes a skipped row instead."""
        if on_error not in ("raise", "row"):
            raise ValueError(f"on_error={on_error!r}: give 'raise' (a bad pair raises) or 'row' (it is a row)")
        submissions, known = [], []
        for pair in pairs:
            try:
                submission = self._submission(*pair)
            except (EvalkitError, TypeError) as err:
                if on_error == "raise":
                    raise
                known.append(self._refused_row(pair, err))
                continue
            reused = self._verdicts and self._verdicts.get(self.plans[submission.problem].problem_sha256, submission)
            if reused:
                known.append(reused)
            else:
                submissions.append(submission)
        return submissions, known

    def _refused_row(self, pair: Pair, err: Exception) -> ResultRow:
        """A ``skipped`` row for a pair that could not be judged as given (``on_error="row"``)."""
        problem = pair[0].id if isinstance(pair[0], Problem) else str(pair[0])
        name = (pair[2] if len(pair) > 2 else None) or f"api-{next(self._samples)}"
        text = pair[1] if isinstance(pair[1], str) else ""
        return self.unjudged_row(problem, text, name, "caller_error", str(err), type(err).__name__)

    def unjudged_row(self, problem: str, text: str, sample: str, kind: str, message: str,
                     error_type: str = "") -> ResultRow:
        """A ``skipped`` row for an answer not judged, ``error.kind`` saying why (``caller_error``, or a server's
        ``cancelled`` and ``deadline_passed``), as its caller gets every other row."""
        row = ResultRow(run=API_RUN, problem=problem, sample=sample, path=f"<api:{sample}>", sha256=sha256_text(text),
                        verdict="skipped", reason=f"not judged: {message}", device=self.device)
        row.error = {"kind": kind, "type": error_type, "message": message}
        row.feedback = f"Not judged: {message}"
        return row

    def close(self) -> None:
        """End every sandbox and judge process this evaluator started (also done on leaving ``with``)."""
        self._finalizer()

    def __enter__(self) -> "Evaluator":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def add_problem(self, problem: Problem) -> str:
        """Make ``problem`` (e.g. ``Problem.from_source(text)``) one this evaluator judges; return its id. Its
        reference is checked here, before anything is built: a problem folder's in this process (trusted problem
        code), a problem given as text's in a sandbox (it never runs in this process: ``sandboxed_reference``). The
        same problem added twice is added once."""
        from evalkit.schedule.preflight import check_reference
        from evalkit.sources.errors import ProblemError
        from evalkit.sources.settings import judging_plan

        plan = judging_plan(problem, self.options.overrides)  # resolved once, as the run's first problems were
        known = self.problems.get(problem.id)
        if known is not None:
            if self.plans[problem.id].problem_sha256 != plan.problem_sha256:
                raise ProblemError(f"another problem named {problem.id!r} is already loaded ({known.path}); give "
                                   f"this one another name")
            return problem.id
        if not self._engine.backend.adds_problems:
            raise ProblemError(f"problem {problem.id!r}: a Ray run judges the problem folders it started with; "
                               f"give it as a folder under --problems (docs/ray.md)")
        if problem.trusted:
            check_reference(problem)
        else:
            self._engine.check_untrusted(problem)
        self.plans[problem.id] = plan  # the engine's and its judges' tables too: the plan first, which a judge
        self.problems[problem.id] = problem  # told of the problem reads
        return problem.id

    def _submission(self, problem: str | Problem, text: str, sample: str | None = None) -> Submission:
        from evalkit.sources.problems import unknown_problem

        problem_id = self.add_problem(problem) if isinstance(problem, Problem) else problem
        if problem_id not in self.problems:
            raise unknown_problem(problem_id, self.problems)
        if not isinstance(text, str):
            raise TypeError(f"the answer to {problem_id!r} must be a str, not {type(text).__name__}")
        name = sample or f"api-{next(self._samples)}"
        return Submission(run=API_RUN, problem=problem_id, sample=name, path=f"<api:{name}>", text=text)


def _texts_by_sample(submissions: list[Submission]) -> dict[str, str]:
    """Each answer's text by its sample's name, for names given once (a row is matched to its text by name)."""
    given = Counter(s.sample for s in submissions)
    return {s.sample: s.text for s in submissions if given[s.sample] == 1}


def with_origin(row: ResultRow, problem: Problem | None) -> ResultRow:
    """Set ``row``'s ``problem_level`` and ``kernelbench`` origin from its problem, so the report scores it per
    level and exports it to KernelBench's ``eval_results.json`` (both stay None for a problem that records none)."""
    if problem is not None:
        row.problem_level = problem.level
        origin = problem.kernelbench
        row.kernelbench = {"level": origin.level, "number": origin.number} if origin is not None else None
    return row


def _shut_down(engine: Any) -> None:
    from evalkit.sandbox.remains import kill_group

    try:
        engine.close(abandon=True)
    finally:
        kill_group(engine.limits.group)
