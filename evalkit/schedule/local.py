"""Trusted side: the local scheduler. Moves submissions through the stages on one machine and writes
each row the moment it is decided.

triage (in this process, nothing runs) -> build (sandboxed, a pool of CPU workers, ahead of judging)
-> judge (a sandboxed worker and the trusted judge, one submission at a time on the device)
-> ``results.jsonl``. It decides no verdict (``evalkit.judge.verdicts`` does) and computes no score.

Before anything is built it checks the inputs (``preflight``) and, on ``--resume``, that the settings
match those recorded in the report's ``run.json`` (``run_settings``). Every sandbox of a run carries
the run's group token (``Limits.group``): a stop signal, an exception or the end of the run kills them
all (``kill_group``), so none outlives ``score()``.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
import time
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

from evalkit.intake.triage import Triage, triage
from evalkit.judge import verdicts
from evalkit.judge.baselines import BaselineCache, cache_key
from evalkit.judge.builder import BuildOutcome, build, build_env
from evalkit.judge.environment import environment
from evalkit.judge.reference import ReferenceProblem
from evalkit.judge.submission_judge import Judge
from evalkit.records import ResultRow, Submission, Verdict
from evalkit.results_file import BASELINES_FILE, ENVIRONMENT_FILE, RESULTS_FILE, ResultsWriter, read_rows, resume_key_of
from evalkit.sandbox.identity import sandbox_user
from evalkit.sandbox.freezer import BuildFreezer
from evalkit.sandbox.launcher import Limits, kill_group
from evalkit.schedule import preflight, run_settings
from evalkit.schedule.interrupt import Interrupted, interruptible
from evalkit.schedule.options import ScoreOptions, ScoreOutcome, default_cache_dir, default_limits
from evalkit.sources.problems import Problem, discover_problems
from evalkit.sources.submissions import Discovered, discover

__all__ = ["Interrupted", "ScoreOptions", "ScoreOutcome", "default_cache_dir", "default_limits", "resolve_device",
           "score"]

logger = logging.getLogger(__name__)

BUILD_STOP_S = 5.0  # how long an interrupted run keeps killing sandboxes while its running builds end

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
    """Judge every submission under ``options.submissions`` not yet in the report; rows go to ``results.jsonl``.

    A bad input raises before anything is built: ``ProblemError``, ``SubmissionError``, ``FileExistsError``
    (results there without ``--resume``) or ``ScoreError`` (``--out`` is a file; a resume with other
    settings). Called from the main thread, SIGINT, SIGTERM and SIGHUP kill every sandbox of the run and
    raise ``Interrupted``, whose ``outcome`` is what was judged (``None`` when judging had not begun).
    """
    device = resolve_device(options.device)
    limits = default_limits(device, options.memory_gib, cache_dir=options.cache_dir)
    with interruptible(lambda: kill_group(limits.group)):
        try:
            return _score(options, device, limits, progress or (lambda stage, counts: None), total_hook)
        finally:
            kill_group(limits.group)


def _score(options: ScoreOptions, device: str, limits: Limits, report: Progress,
           total_hook: Callable[[int], None] | None) -> ScoreOutcome:
    preflight.check_out_dir(options.out_dir)
    problems = discover_problems(options.problems_dir)
    found = discover(options.submissions, problems)
    preflight.require_submissions(found, options.submissions)
    results_path = options.out_dir / RESULTS_FILE
    holds_results = results_path.exists() and results_path.stat().st_size > 0
    if not options.resume and holds_results:
        raise FileExistsError(f"{results_path} already holds results; pass --resume to continue it, "
                              f"or choose another --out")
    seed = run_settings.run_seed(options, device, holds_results)
    done = {resume_key_of(r) for r in read_rows(results_path)} if options.resume else set()
    todo = [s for s in found.submissions if s.key not in done]
    preflight.check_references(problems[p] for p in sorted({s.problem for s in todo}))
    _start_report(options, device, seed, limits)
    outcome = ScoreOutcome(options.out_dir, device, Counter(), 0, len(found.submissions) - len(todo),
                           problems=sorted(problems), seed=seed)
    if total_hook:
        total_hook(len(todo) + len(found.unreadable))
    try:
        _Run(options, problems, device, seed, limits, report).judge_all(found, todo, outcome)
    except Interrupted as stop:
        stop.outcome = outcome
        raise
    skipped = outcome.counts.get(Verdict.SKIPPED.value)
    if device == "cpu" and skipped:
        outcome.notes.append(f"{skipped} submission(s) need a CUDA GPU and were skipped: this machine has none. "
                             "Run `evalkit score` on a GPU machine to judge them.")
    return outcome


def _start_report(options: ScoreOptions, device: str, seed: int, limits: Limits) -> None:
    """Create the report folder and record the run's settings (kept from the first run when resuming)."""
    preflight.make_out_dir(options.out_dir)
    if not (options.resume and run_settings.read_recorded(options.out_dir)):
        run_settings.record(options.out_dir, run_settings.current_settings(options, device, seed))
    _record_environment(options.out_dir / ENVIRONMENT_FILE, limits)


def _record_environment(path: Path, limits: Limits) -> None:
    """The machine this report is judged on and who its sandboxes run as (kept from the first run)."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        facts = {**environment(), "sandbox_user": sandbox_user(limits.run_as)}
        path.write_text(json.dumps(facts, indent=2) + "\n")


def with_origin(row: ResultRow, problem: Problem | None) -> ResultRow:
    """Set ``row``'s ``problem_level`` and ``kernelbench`` origin from its problem, so the report scores it per
    level and exports it to KernelBench's ``eval_results.json`` (both stay None for a problem that records none)."""
    if problem is not None:
        row.problem_level = problem.level
        origin = problem.kernelbench
        row.kernelbench = {"level": origin.level, "number": origin.number} if origin is not None else None
    return row


def _recorded_driver(path: Path) -> str | None:
    try:
        return json.loads(path.read_text()).get("driver")
    except (OSError, ValueError, AttributeError):
        return None


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
    builds: list[Future[BuildOutcome]] = field(default_factory=list)
    freezer: BuildFreezer | None = None
    driver: str | None = None  # the GPU driver, as the report's environment.json records it (baselines' key)

    def judge_all(self, found: Discovered, todo: list[Submission], outcome: ScoreOutcome) -> None:
        """Record a row for every unreadable file and every submission of ``todo``, counting them in ``outcome``."""
        with ResultsWriter(self.options.out_dir / RESULTS_FILE) as writer:
            def record(row: ResultRow) -> None:
                with_origin(row, self.problems.get(row.problem))
                writer.write(row.to_dict())
                outcome.counts[row.verdict] += 1
                outcome.judged += 1
                self.report(f"{row.problem}/{row.sample}: {row.verdict}", outcome.counts)

            for placeholder, why in found.unreadable:
                record(verdicts.unreadable_row(placeholder, why, self.device))
            self.score_all(todo, record, found.warnings)

    def score_all(self, todo: list[Submission], record: Record, file_warnings: dict[str, list[str]]) -> None:
        cache = BaselineCache(self.options.out_dir / BASELINES_FILE, self.options.cache_dir / BASELINES_FILE,
                              remeasure=self.options.remeasure_baselines)
        self.driver = _recorded_driver(self.options.out_dir / ENVIRONMENT_FILE)
        pool = ThreadPoolExecutor(max_workers=self.options.build_jobs(), thread_name_prefix="evalkit-build")
        self.freezer = BuildFreezer(self.limits.group)
        try:
            try:
                pending = self._triage_and_start_builds(todo, pool, record, file_warnings)
                judged = self._judge_as_built(pending, cache, record)
            except BaseException:
                self._abandon_builds(pool)
                raise
            pool.shutdown(wait=True)
            if self.device == "cuda":  # on a GPU every problem gets its baselines, even with no submission judged
                for problem_id in sorted({s.problem for s in todo} - judged):
                    self._prepare(self.problems[problem_id], cache)
        finally:
            self.freezer.close()

    def _abandon_builds(self, pool: ThreadPoolExecutor) -> None:
        """Cancel the builds not started; kill the sandboxes of running ones until they end (bounded)."""
        pool.shutdown(wait=False, cancel_futures=True)
        deadline = time.monotonic() + BUILD_STOP_S
        while True:
            kill_group(self.limits.group)  # again each round: a build thread may have just started one
            running = [future for future in self.builds if not future.done()]  # done(): cancelled ones too
            if not running or time.monotonic() > deadline:
                break
            wait(running, timeout=0.2)
        if running:
            logger.warning("%d build(s) still running after %g s of killing their sandboxes",
                           len(running), BUILD_STOP_S)

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
                                 self.options.build_timeout(problem), self.limits, problem.init_inputs_or_none(),
                                 self.freezer)
            self.builds.append(future)
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
            record(self._judge_guarded(submission, early, outcome, context))
        return judged

    def _judge_guarded(self, submission: Submission, early: Triage, outcome: BuildOutcome,
                       context: _ProblemContext) -> ResultRow:
        """``_judge_one``; whatever goes wrong judging one answer becomes that answer's row, never the run's end."""
        try:
            return self._judge_one(submission, early, outcome, context)
        except Exception as err:  # noqa: BLE001 - a hostile answer may find a way to upset the judge itself
            logger.exception("%s/%s: the judge failed on this answer", submission.problem, submission.sample)
            return verdicts.judge_failed_row(submission, early, self.device, err)

    def _prepare(self, problem: Problem, cache: BaselineCache) -> _ProblemContext:
        settings = self.options.judge_settings(problem, self.seed)
        try:
            ref = ReferenceProblem(problem, self.device, init_seed=self.seed)
            judge = Judge(ref, settings, self.limits, quiet=self.freezer.timing if self.freezer else None)
        except Exception as err:  # noqa: BLE001 - a broken problem is reported on every row, the run goes on
            logger.error("%s: the reference cannot be run: %s", problem.id, err)
            where = problem.reference_path
            return _ProblemContext(problem, None, {}, setup_error=f"the reference of problem '{problem.id}' ({where}) "
                                                                  f"failed on this device: {type(err).__name__}: {err}")
        self.report(f"{problem.id}: timing PyTorch baselines", Counter())
        kinds = self.options.baselines
        key = cache_key(ref, f"warmup {settings.warmup_trials} trials {settings.timing_trials}", self.driver)
        baselines = cache.get_or_measure(ref, kinds, judge.judge_reference, key) if kinds else {}
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
            judgement = context.judge.judge(code_path, workdir, build_env(build_dir, self.device))
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        settings = context.problem.settings
        row = verdicts.built_row(submission, early, outcome, self.device)
        return verdicts.judged_row(row, judgement, early, context.baselines, (settings.flops, settings.min_bytes),
                                   build_dir / "extensions")
