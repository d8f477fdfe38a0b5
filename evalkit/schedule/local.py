"""Trusted side: the local scheduler. Moves submissions through the stages on one machine and writes
each row the moment it is decided.

It finds the problems and submissions, opens the report folder (``report_folder.ReportFolder``, its one writer,
which a second run cannot open meanwhile), skips what the report already holds (``--resume``), plans the judges
(``placement``: one per GPU, or ``--judges N`` on CPU) and hands the rest to the ``Engine`` (triage, builds,
judges), adding each row to ``results.jsonl`` as it comes. It decides no verdict and computes no score.

Before anything is built it checks the inputs (``preflight``) and, on ``--resume``, that the settings
match those recorded in the report's ``run.json`` (``run_settings``). Every sandbox of a run carries
the run's group token (``Limits.group``): a stop signal, an exception or the end of the run kills them
all (``kill_group``), so none outlives ``score()``.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable


from evalkit.judge import verdicts
from evalkit.judge.environment import environment
from evalkit.records import ResultRow, Submission, Verdict
from evalkit.report_folder import ReportFolder
from evalkit.results_file import BASELINES_FILE, ENVIRONMENT_FILE, RESULTS_FILE, read_rows, resume_key_of
from evalkit.sandbox.cgroup import sandbox_cgroups
from evalkit.sandbox.identity import sandbox_user
from evalkit.sandbox.launcher import Limits
from evalkit.sandbox.remains import kill_group
from evalkit.schedule import preflight, run_settings
from evalkit.schedule.evaluator import Evaluator
from evalkit.schedule.gpu_busy import GpuBusySampler, device_ids
from evalkit.schedule.interrupt import Interrupted, interruptible
from evalkit.schedule.backend import Machines
from evalkit.schedule.machines import machines_and_limits, resolve_device
from evalkit.schedule.options import (ResultsExist, ScoreOptions, ScoreOutcome, default_cache_dir,
                                      default_limits)
from evalkit.schedule.judge_messages import BaselineFiles
from evalkit.sources.problems import Problem, discover_problems
from evalkit.sources.settings import JudgingPlan
from evalkit.sources.submissions import Discovered, discover

__all__ = ["Interrupted", "ScoreOptions", "ScoreOutcome", "default_cache_dir", "default_limits", "resolve_device",
           "score"]

logger = logging.getLogger(__name__)

Progress = Callable[[str, Counter], None]
Record = Callable[[ResultRow], None]


def score(options: ScoreOptions, progress: Progress | None = None,
          total_hook: Callable[[int], None] | None = None) -> ScoreOutcome:
    """Judge every submission under ``options.submissions`` not yet in the report; rows go to ``results.jsonl``.

    A bad input raises before anything is built: ``ProblemError``, ``SubmissionError``, ``ResultsExist``
    (results there without ``--resume``), ``ScoreError`` (``--out`` is a file; a resume with other settings) or
    ``ReportFolderBusy`` (another run writes the report folder now, ``report_folder.ReportFolder``). Called from
    the main thread, SIGINT, SIGTERM and SIGHUP kill every sandbox of the run and raise ``Interrupted``, whose
    ``outcome`` is what was judged (``None`` when judging had not begun).
    """
    inputs = _read_inputs(options)  # before the machines: starting CUDA and probing the sandbox user take seconds
    with ReportFolder.open(options.out_dir) as folder:  # locked: a second run into it is refused, naming this one
        where, limits = machines_and_limits(options)
        with interruptible(lambda: kill_group(limits.group)):
            try:
                return _score(options, folder, inputs, where, limits, progress or (lambda stage, counts: None),
                              total_hook)
            finally:
                kill_group(limits.group)


@dataclass
class _Inputs:
    """What a run reads before it starts anything: the problems, the submissions, whether the report holds rows."""

    problems: dict[str, Problem]
    found: Discovered
    holds_results: bool


def _read_inputs(options: ScoreOptions) -> _Inputs:
    """The run's inputs, each checked: a bad one raises here, before anything slow."""
    preflight.check_out_dir(options.out_dir)
    preflight.check_torch_include()
    problems = discover_problems(options.problems_dir, lenient=True)  # an unrelated broken folder: a warning
    found = discover(options.submissions, problems)
    preflight.require_submissions(found, options.submissions)
    results_path = options.out_dir / RESULTS_FILE
    holds_results = results_path.exists() and results_path.stat().st_size > 0
    if not options.resume and holds_results:
        raise ResultsExist(f"{results_path} already holds results; pass --resume to continue it, "
                              f"or choose another --out")
    return _Inputs(problems, found, holds_results)


def _score(options: ScoreOptions, folder: ReportFolder, inputs: _Inputs, where: Machines, limits: Limits,
           report: Progress, total_hook: Callable[[int], None] | None) -> ScoreOutcome:
    device, problems, found = where.device, inputs.problems, inputs.found
    results_path = options.out_dir / RESULTS_FILE
    seed = run_settings.run_seed(options, device, inputs.holds_results)
    plans = options.plans(problems)  # each problem's settings resolved once, for the whole run
    rows = read_rows(results_path) if options.resume else []
    recorded_plans = run_settings.read_recorded_plans(options.out_dir) if options.resume else None
    run_settings.refuse_changed_plans(options.out_dir, recorded_plans, plans, rows)
    done = {resume_key_of(r) for r in rows}
    todo = [s for s in found.submissions if s.key not in done]
    unusable = preflight.check_references(problems[p] for p in sorted({s.problem for s in todo}))
    _start_report(folder, options, device, seed, limits, plans, where.environment)
    outcome = ScoreOutcome(options.out_dir, device, Counter(), 0, len(found.submissions) - len(todo),
                           problems=sorted(problems), seed=seed, unusable=unusable)
    for problem_id, why in unusable.items():
        answers = sum(s.problem == problem_id for s in todo)
        logger.warning("%s\n  its %d answer(s) are reported as skipped (problem_unavailable), not judged", why, answers)
        outcome.notes.append(f"answers to problem '{problem_id}' were not judged: it cannot be used (see the "
                             f"warning above); fix it, then score its answers into a new report.")
    if total_hook:
        total_hook(len(todo) + len(found.unreadable))
    gpus = [slot.gpu for slot in where.placement.slots if slot.gpu is not None] if options.backend == "local" else []
    started = time.monotonic()
    with GpuBusySampler(device_ids(gpus)) as sampler:
        try:
            _Run(options, folder, problems, plans, device, seed, limits, report, where).judge_all(found, todo, outcome)
        except Interrupted as stop:
            stop.outcome = outcome
            raise
        finally:
            folder.add_run_figures(_run_figures(time.monotonic() - started, outcome.judged, sampler))
    skipped = outcome.counts.get(Verdict.SKIPPED.value, 0) - outcome.unavailable
    if device == "cpu" and skipped:
        outcome.notes.append(f"{skipped} submission(s) need a CUDA GPU and were skipped: this machine has none. "
                             "Run `evalkit score` on a GPU machine to judge them.")
    return outcome


def _start_report(folder: ReportFolder, options: ScoreOptions, device: str, seed: int, limits: Limits,
                  plans: dict[str, JudgingPlan], facts: dict[str, Any] | None = None) -> None:
    """Record the run's settings and plans (the settings kept from the first run when resuming) and the machine
    this report is judged on and who its sandboxes run as (kept from the first run)."""
    run_settings.record_run(folder, run_settings.current_settings(options, device, seed), plans, options.resume)
    folder.record_environment({"sandbox_user": sandbox_user(limits.run_as), "sandbox_cgroups": sandbox_cgroups(),
                               **(facts or environment())})


def _run_figures(wall_s: float, judged: int, sampler: GpuBusySampler) -> dict[str, Any]:
    """This run's (or this resume's) wall time, answers judged and GPUs' busy fractions."""
    return {"wall_s": round(wall_s, 3), "answers_judged": judged,
            "answers_per_hour": round(judged / wall_s * 3600, 1) if wall_s > 0 else None,
            "gpu_busy": sampler.figures()}


def _recorded_driver(path: Path) -> str | None:
    try:
        return json.loads(path.read_text()).get("driver")
    except (OSError, ValueError, AttributeError):
        return None


@dataclass
class _Run:
    options: ScoreOptions
    folder: ReportFolder
    problems: dict[str, Problem]
    plans: dict[str, JudgingPlan]
    device: str
    seed: int
    limits: Limits
    report: Progress
    where: Machines

    def judge_all(self, found: Discovered, todo: list[Submission], outcome: ScoreOutcome) -> None:
        """Record a row for every unreadable file and every submission of ``todo``, counting them in ``outcome``."""
        def record(row: ResultRow) -> None:
            self.folder.add_row(row.to_dict())
            outcome.counts[row.verdict] += 1
            outcome.judged += 1
            if row.verdict == Verdict.SKIPPED.value and row.problem in outcome.unusable:
                outcome.unavailable += 1
            self.report(f"{row.problem}/{row.sample}: {row.verdict}", outcome.counts)

        for placeholder, why in found.unreadable:
            record(verdicts.unreadable_row(placeholder, why, self.device))
        self.score_all(todo, record, found.warnings)

    def score_all(self, todo: list[Submission], record: Record, file_warnings: dict[str, list[str]]) -> None:
        options = self.options
        baselines = BaselineFiles(None, options.cache_dir / BASELINES_FILE, remeasure=options.remeasure_baselines,
                                  run=self.limits.group, in_report=True)
        evaluator = Evaluator.for_report(self.problems, self.plans, options, self.where, self.seed, self.limits,
                                         baselines, _recorded_driver(options.out_dir / ENVIRONMENT_FILE),
                                         progress=lambda text: self.report(text, Counter()), report=self.folder)
        self.folder.note_environment("build_isolation", evaluator.build_isolation)
        try:
            for row in evaluator.judge_submissions((s, file_warnings.get(s.path, [])) for s in todo):
                record(row)
        finally:
            evaluator.close()
