"""Trusted side: the local scheduler. Moves submissions through the stages on one machine and writes
each row the moment it is decided.

triage (in this process, nothing runs) -> build (sandboxed, a pool of CPU workers, ahead of judging)
-> judge (a sandboxed worker and the trusted judge, one submission at a time on the device)
-> ``results.jsonl``. It decides no verdict (``evalkit.judge.verdicts`` does) and computes no score.
"""

from __future__ import annotations

import json
import logging
import random
import shutil
import tempfile
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

from evalkit.intake.triage import Triage, triage
from evalkit.judge import verdicts
from evalkit.judge.baselines import BaselineCache
from evalkit.judge.builder import BuildOutcome, build, build_env
from evalkit.judge.environment import environment
from evalkit.judge.reference import ReferenceProblem
from evalkit.judge.submission_judge import Judge
from evalkit.records import ResultRow, Submission, Verdict
from evalkit.results_file import BASELINES_FILE, ENVIRONMENT_FILE, RESULTS_FILE, ResultsWriter, read_rows, resume_key_of
from evalkit.sandbox.launcher import Limits
from evalkit.schedule.options import ScoreOptions, ScoreOutcome, default_limits
from evalkit.sources.problems import Problem, discover_problems
from evalkit.sources.submissions import discover

logger = logging.getLogger(__name__)

Progress = Callable[[str, Counter], None]
Record = Callable[[ResultRow], None]
Pending = list[tuple[Submission, Triage, Future[BuildOutcome]]]


def resolve_device(device: str) -> str:
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("--device cuda was asked for, but torch sees no CUDA GPU on this machine "
                           f"(torch {torch.__version__}); use --device cpu or auto")
    return device


def score(options: ScoreOptions, progress: Progress | None = None,
          total_hook: Callable[[int], None] | None = None) -> ScoreOutcome:
    """Judge every submission under ``options.submissions`` not yet in the report; rows go to ``results.jsonl``."""
    device = resolve_device(options.device)
    problems = discover_problems(options.problems_dir)
    found = discover(options.submissions, problems)
    results_path = options.out_dir / RESULTS_FILE
    done = {resume_key_of(r) for r in read_rows(results_path)} if options.resume else set()
    if not options.resume and results_path.exists() and results_path.stat().st_size:
        raise FileExistsError(f"{results_path} already holds results; pass --resume to continue it, "
                              f"or choose another --out")
    todo = [s for s in found.submissions if s.key not in done]
    seed = options.seed if options.seed is not None else random.SystemRandom().randrange(2**31)
    outcome = ScoreOutcome(options.out_dir, device, Counter(), 0, len(found.submissions) - len(todo),
                           problems=sorted(problems))
    _record_environment(options.out_dir / ENVIRONMENT_FILE)
    if total_hook:
        total_hook(len(todo) + len(found.unreadable))
    report = progress or (lambda stage, counts: None)
    with ResultsWriter(results_path) as writer:
        def record(row: ResultRow) -> None:
            writer.write(row.to_dict())
            outcome.counts[row.verdict] += 1
            outcome.judged += 1
            report(f"{row.problem}/{row.sample}: {row.verdict}", outcome.counts)

        for placeholder, why in found.unreadable:
            record(verdicts.unreadable_row(placeholder, why, device))
        run = _Run(options, problems, device, seed, default_limits(device, options.memory_gib), report)
        run.score_all(todo, record, found.warnings)
    skipped = outcome.counts.get(Verdict.SKIPPED.value)
    if device == "cpu" and skipped:
        outcome.notes.append(f"{skipped} submission(s) need a CUDA GPU and were skipped: this machine has none. "
                             "Run `evalkit score` on a GPU machine to judge them.")
    return outcome


def _record_environment(path: Path) -> None:
    """The machine this report is judged on (kept from the first run when resuming)."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(environment(), indent=2) + "\n")


@dataclass
class _ProblemContext:
    """One problem ready to judge: its judge and baselines, or why it cannot be judged."""

    problem: Problem
    judge: Judge | None
    baselines: dict[str, Any]
    setup_error: str = ""


@dataclass
class _Run:
    options: ScoreOptions
    problems: dict[str, Problem]
    device: str
    seed: int
    limits: Limits
    report: Progress

    def score_all(self, todo: list[Submission], record: Record, file_warnings: dict[str, list[str]]) -> None:
        cache = BaselineCache(self.options.out_dir / BASELINES_FILE)
        with ThreadPoolExecutor(max_workers=self.options.build_jobs(), thread_name_prefix="evalkit-build") as pool:
            pending = self._triage_and_start_builds(todo, pool, record, file_warnings)
            judged = self._judge_as_built(pending, cache, record)
        if self.device == "cuda":  # on a GPU every problem gets its baselines, even with no submission judged
            for problem_id in sorted({s.problem for s in todo} - judged):
                self._prepare(self.problems[problem_id], cache)

    def _triage_and_start_builds(self, todo: list[Submission], pool: ThreadPoolExecutor, record: Record,
                                 file_warnings: dict[str, list[str]]) -> Pending:
        """Record what triage already decides; start a build, in the pool, for everything else."""
        pending: Pending = []
        for submission in todo:
            early = triage(submission.text)
            early.warnings.extend(file_warnings.get(submission.path, []))
            row = verdicts.early_row(submission, early, self.device)
            if row is not None:
                record(row)
                continue
            problem = self.problems[submission.problem]
            future = pool.submit(build, early.code, self.options.cache_dir / "builds", self.device,
                                 self.options.build_timeout(problem), self.limits, problem.init_inputs_or_none())
            pending.append((submission, early, future))
        return pending

    def _judge_as_built(self, pending: Pending, cache: BaselineCache, record: Record) -> set[str]:
        """Judge in order (grouped by problem) while later builds continue; return the problems judged."""
        context: _ProblemContext | None = None
        judged: set[str] = set()
        for submission, early, future in pending:
            self.report(f"{submission.problem}/{submission.sample}: building", Counter())
            outcome = future.result()
            if context is None or context.problem.id != submission.problem:
                context = None  # free the previous problem's tensors before loading the next
                context = self._prepare(self.problems[submission.problem], cache)
            judged.add(submission.problem)
            self.report(f"{submission.problem}/{submission.sample}: judging", Counter())
            record(self._judge_one(submission, early, outcome, context))
        return judged

    def _prepare(self, problem: Problem, cache: BaselineCache) -> _ProblemContext:
        settings = self.options.judge_settings(problem, self.seed)
        try:
            ref = ReferenceProblem(problem, self.device, init_seed=self.seed)
        except Exception as err:  # noqa: BLE001 - a broken problem is reported on every row, the run goes on
            logger.error("%s: the reference cannot be loaded: %s", problem.id, err)
            return _ProblemContext(problem, None, {}, setup_error=f"reference for problem '{problem.id}' failed: {err}")
        self.report(f"{problem.id}: timing PyTorch baselines", Counter())
        kinds = self.options.baselines
        baselines = cache.get_or_measure(ref, kinds, warmup=settings.warmup_trials, trials=settings.timing_trials,
                                         seed=self.seed) if kinds else {}
        return _ProblemContext(problem, Judge(ref, settings, self.limits), baselines)

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
            judgement = context.judge.judge(code_path, workdir, build_env(build_dir, self.device))
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        settings = context.problem.settings
        row = verdicts.built_row(submission, early, outcome, self.device)
        return verdicts.judged_row(row, judgement, early, context.baselines, (settings.flops, settings.min_bytes),
                                   build_dir / "extensions")
