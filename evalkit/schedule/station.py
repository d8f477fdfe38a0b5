"""Trusted side: one judge station, the judge of one device (a GPU, or the CPU) and the problems it has loaded.

A station turns a built answer into its row: it loads the problem (the float64 reference and the judge),
times the PyTorch baselines once per problem (through ``BaselineCache``), runs the sandboxed worker through
``evalkit.judge``, and maps the judgement to a ``ResultRow`` (``evalkit.judge.verdicts``). It holds one
problem at a time, so a GPU never carries two problems' tensors.

It runs in the scheduler's own process (one judge) or in a judge process of its own (``judge_process``,
several judges); either way it never raises for an answer: whatever goes wrong judging one answer becomes
that answer's row.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from evalkit.intake.triage import Triage
from evalkit.judge import verdicts
from evalkit.judge.baselines import BaselineCache, cache_key
from evalkit.judge.builder import BuildOutcome, build_env
from evalkit.judge.reference import ReferenceProblem
from evalkit.judge.submission_judge import Judge
from evalkit.records import ResultRow, Submission
from evalkit.sandbox.launcher import Limits
from evalkit.schedule.options import JudgeOptions
from evalkit.sources.problems import Problem

logger = logging.getLogger(__name__)

Quiet = Callable[[], AbstractContextManager[Any]]


@dataclass
class _ProblemContext:
    """One problem ready to judge: its judge and baselines, or why it cannot be judged."""

    problem: Problem
    judge: Judge | None
    baselines: dict[str, Any]
    setup_error: str = ""


@dataclass(frozen=True)
class BaselineFiles:
    """Where a station keeps baselines: the report's own file (None outside a report) and the shared cache."""

    report: Path | None
    shared: Path | None
    remeasure: bool = False
    run: str = ""  # shared by every judge of one run: with ``remeasure``, what one of them timed serves all

    def open(self) -> BaselineCache:
        return BaselineCache(self.report, self.shared, remeasure=self.remeasure, run=self.run)


class JudgeStation:
    """The judge of one device. ``quiet()`` is entered around every measurement (it freezes the builds)."""

    def __init__(self, problems: dict[str, Problem], options: JudgeOptions, device: str, seed: int,
                 limits: Limits, baselines: BaselineFiles, driver: str | None, quiet: Quiet | None = None,
                 progress: Callable[[str], None] | None = None) -> None:
        self.problems, self.options, self.device, self.seed, self.limits = problems, options, device, seed, limits
        self.driver = driver
        self._cache = baselines.open()
        self._quiet = quiet
        self._progress = progress or (lambda text: None)
        self._context: _ProblemContext | None = None

    @property
    def current_problem(self) -> str | None:
        return self._context.problem.id if self._context else None

    def prepare(self, problem_id: str) -> dict[str, Any]:
        """Load ``problem_id`` (freeing the one loaded before) and time its baselines; returns them."""
        if self._context is None or self._context.problem.id != problem_id:
            self._context = None  # free the previous problem's tensors before loading the next
            self._context = self._load(self.problems[problem_id])
        return self._context.baselines

    def judge(self, submission: Submission, early: Triage, outcome: BuildOutcome) -> ResultRow:
        """The row of one built answer; never raises for anything the answer does."""
        try:
            self.prepare(submission.problem)
            assert self._context is not None
            return self._judge_one(submission, early, outcome, self._context)
        except Exception as err:  # noqa: BLE001 - a hostile answer may find a way to upset the judge itself
            logger.exception("%s/%s: the judge failed on this answer", submission.problem, submission.sample)
            return verdicts.judge_failed_row(submission, early, self.device, err)

    def close(self) -> None:
        self._context = None

    def _load(self, problem: Problem) -> _ProblemContext:
        settings = self.options.judge_settings(problem, self.seed)
        try:
            ref = ReferenceProblem(problem, self.device, init_seed=self.seed)
            judge = Judge(ref, settings, self.limits, quiet=self._quiet)
        except Exception as err:  # noqa: BLE001 - a broken problem is reported on every row, the run goes on
            logger.error("%s: the reference cannot be run: %s", problem.id, err)
            where = problem.reference_path
            return _ProblemContext(problem, None, {}, setup_error=f"the reference of problem '{problem.id}' ({where}) "
                                                                  f"failed on this device: {type(err).__name__}: {err}")
        kinds = self.options.baselines
        if kinds:
            self._progress(f"{problem.id}: timing PyTorch baselines")
        key = cache_key(ref, settings.timing_key(), self.driver)
        baselines = self._cache.get_or_measure(ref, kinds, judge.judge_reference, key) if kinds else {}
        return _ProblemContext(problem, judge, baselines)

    def _judge_one(self, submission: Submission, early: Triage, outcome: BuildOutcome,
                   context: _ProblemContext) -> ResultRow:
        failed = verdicts.build_failed_row(submission, early, outcome, self.device)
        if failed is not None:
            return failed
        if context.judge is None:
            return verdicts.unavailable_row(submission, early, outcome, self.device, context.setup_error)
        build_dir = Path(outcome.extension_dir).parent  # the build stage already chose it
        workdir = Path(tempfile.mkdtemp(prefix="evalkit-judge-"))
        try:
            code_path = workdir / "submission.py"
            code_path.write_text(early.code)
            env = {**build_env(build_dir, self.device), **_pinned(self.limits)}
            judgement = context.judge.judge(code_path, workdir, env)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        settings = context.problem.settings
        row = verdicts.built_row(submission, early, outcome, self.device)
        return verdicts.judged_row(row, judgement, early, context.baselines, (settings.flops, settings.min_bytes),
                                   build_dir / "extensions")


def _pinned(limits: Limits) -> dict[str, str]:
    """A worker pinned to a few cores runs as many CPU threads as it has cores, not one per core of the host."""
    return {"OMP_NUM_THREADS": str(len(limits.cpus))} if limits.cpus else {}
