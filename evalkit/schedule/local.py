"""The runner: moves submissions through the stages and writes each row as it is decided.

triage (pure, in this process) -> build (sandboxed, a pool of CPU workers, ahead of
judging) -> judge (sandboxed worker + trusted comparison, one at a time on the device)
-> ``results.jsonl``. Nothing here looks inside a stage; it launches and records.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import random
import shutil
import tempfile
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

from evalkit import __version__
from evalkit.judge.baselines import BASELINES_FILE, BaselineCache
from evalkit.judge.builder import BuildOutcome, build, build_env, first_compiler_errors, map_to_submission
from evalkit.judge.submission_judge import Judge, Judgement, JudgeSettings
from evalkit.judge.plausibility import floor_ms
from evalkit.sources.problems import Problem, discover_problems
from evalkit.records import BASELINE_KINDS, ResultRow, Submission, Verdict
from evalkit.judge.reference import ReferenceProblem
from evalkit.results_file import RESULTS_FILE, ResultsWriter, read_rows, resume_key_of
from evalkit.sandbox.launcher import Limits
from evalkit.sources.submissions import discover
from evalkit.judge.timing import speedup
from evalkit.intake.triage import Triage, triage

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ScoreOptions:
    submissions: Path
    problems_dir: Path
    out_dir: Path
    device: str = "auto"
    jobs: int = 0
    trials: int | None = None
    timing_trials: int | None = None
    warmup: int | None = None
    atol: float | None = None
    rtol: float | None = None
    timeout_s: float | None = None
    build_timeout_s: float | None = None
    seed: int | None = None
    baselines: tuple[str, ...] = BASELINE_KINDS
    resume: bool = False
    cache_dir: Path = field(default_factory=lambda: default_cache_dir())
    memory_gib: float | None = None


@dataclass
class ScoreOutcome:
    out_dir: Path
    device: str
    counts: Counter
    judged: int
    skipped_resume: int
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def default_cache_dir() -> Path:
    return Path(os.environ.get("EVALKIT_CACHE", Path.home() / ".cache" / "evalkit"))


def resolve_device(device: str) -> str:
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("--device cuda was asked for, but torch sees no CUDA GPU on this machine "
                           f"(torch {torch.__version__}); use --device cpu or auto")
    return device


def default_limits(device: str, memory_gib: float | None) -> Limits:
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    memory = int(memory_gib * 2**30) if memory_gib else int(min(total * 0.5, 64 * 2**30))
    # Address space, not resident memory, is what RLIMIT_AS counts: leave torch's own mappings room.
    address_space = max(2 * memory, memory + 8 * 2**30) if device == "cpu" else None
    return Limits(memory_bytes=memory, address_space_bytes=address_space)


Progress = Callable[[str, Counter], None]


def score(options: ScoreOptions, progress: Progress | None = None, total_hook: Callable[[int], None] | None = None) -> ScoreOutcome:
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
            record(_row(placeholder, Verdict.NO_CODE, why, device))
        _score_all(todo, problems, options, device, seed, record, report, found.warnings)
    if device == "cpu" and outcome.counts.get(Verdict.SKIPPED.value):
        outcome.notes.append(f"{outcome.counts[Verdict.SKIPPED.value]} submission(s) need a CUDA GPU and were "
                             "skipped: this machine has none. Run `evalkit score` on a GPU machine to judge them.")
    return outcome


Pending = list[tuple[Submission, Triage, "Future[BuildOutcome]"]]


def _score_all(todo: list[Submission], problems: dict[str, Problem], options: ScoreOptions, device: str,
               seed: int, record: Callable[[ResultRow], None], report: Progress,
               file_warnings: dict[str, list[str]]) -> None:
    limits = default_limits(device, options.memory_gib)
    jobs = options.jobs or max(1, min(8, (os.cpu_count() or 2)))
    with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="evalkit-build") as pool:
        pending = _triage_and_start_builds(todo, problems, options, device, limits, pool, record, file_warnings)
        judged = _judge_as_built(pending, problems, options, device, seed, limits, record, report)
    if device == "cuda":  # on a GPU every problem gets its baselines, even with no submission judged
        cache = BaselineCache(options.out_dir / BASELINES_FILE)
        for problem_id in sorted({s.problem for s in todo} - judged):
            _ProblemContext.create(problems[problem_id], options, device, seed, limits, cache, report)


def _triage_and_start_builds(todo: list[Submission], problems: dict[str, Problem], options: ScoreOptions,
                             device: str, limits: Limits, pool: ThreadPoolExecutor,
                             record: Callable[[ResultRow], None], file_warnings: dict[str, list[str]]) -> Pending:
    """Record what triage already decides; start a build, in the pool, for everything else."""
    pending: Pending = []
    for submission in todo:
        early = triage(submission, device)
        early.warnings.extend(file_warnings.get(submission.path, []))
        if early.verdict is not None:
            record(_early_row(submission, early, device))
            continue
        problem = problems[submission.problem]
        timeout = options.build_timeout_s or problem.settings.build_timeout_s
        future = pool.submit(build, early.code, options.cache_dir / "builds", device, timeout, limits,
                             _init_inputs(problem))
        pending.append((submission, early, future))
    return pending


def _judge_as_built(pending: Pending, problems: dict[str, Problem], options: ScoreOptions, device: str, seed: int,
                    limits: Limits, record: Callable[[ResultRow], None], report: Progress) -> set[str]:
    """Judge in order (grouped by problem) while later builds continue; return the problems judged."""
    cache = BaselineCache(options.out_dir / BASELINES_FILE)
    context: _ProblemContext | None = None
    judged: set[str] = set()
    for submission, early, future in pending:
        report(f"{submission.problem}/{submission.sample}: building", Counter())
        outcome = future.result()
        if context is None or context.problem.id != submission.problem:
            context = None  # free the previous problem's tensors before loading the next
            context = _ProblemContext.create(problems[submission.problem], options, device, seed, limits, cache,
                                             report)
        judged.add(submission.problem)
        report(f"{submission.problem}/{submission.sample}: judging", Counter())
        record(_judge_one(submission, early, outcome, context, device))
    return judged


def _init_inputs(problem: Problem) -> list[Any] | None:
    """The constructor arguments, so builds done in ``ModelNew.__init__`` also happen ahead of judging."""
    try:
        return list(problem.load_module().get_init_inputs())
    except Exception:  # noqa: BLE001 - the judge stage reports a broken reference properly
        return None


@dataclass
class _ProblemContext:
    problem: Problem
    judge: Judge | None
    baselines: dict[str, Any]
    setup_error: str = ""

    @classmethod
    def create(cls, problem: Problem, options: ScoreOptions, device: str, seed: int, limits: Limits,
               cache: BaselineCache, report: Progress) -> "_ProblemContext":
        settings = _judge_settings(problem, options, seed)
        try:
            ref = ReferenceProblem(problem, device, init_seed=seed)
        except Exception as err:  # noqa: BLE001 - a broken problem is reported on every row, the run goes on
            logger.error("%s: the reference cannot be loaded: %s", problem.id, err)
            return cls(problem, None, {}, setup_error=f"reference for problem '{problem.id}' failed: {err}")
        report(f"{problem.id}: timing PyTorch baselines", Counter())
        baselines = cache.get_or_measure(ref, options.baselines, warmup=settings.warmup_trials,
                                         trials=settings.timing_trials, seed=seed) if options.baselines else {}
        return cls(problem, Judge(ref, settings, limits), baselines)


def _judge_settings(problem: Problem, options: ScoreOptions, seed: int) -> JudgeSettings:
    s = problem.settings
    return JudgeSettings(
        atol=s.atol if options.atol is None else options.atol,
        rtol=s.rtol if options.rtol is None else options.rtol,
        correctness_trials=options.trials or s.correctness_trials,
        timing_trials=options.timing_trials or s.timing_trials,
        warmup_trials=s.warmup_trials if options.warmup is None else options.warmup,
        run_timeout_s=options.timeout_s or s.run_timeout_s,
        seed=seed,
    )


def _judge_one(submission: Submission, early: Triage, outcome: BuildOutcome, context: _ProblemContext,
               device: str) -> ResultRow:
    row = _row(submission, Verdict.CORRECT, "", device, early)
    row.build = _build_record(outcome, early)
    row.stage_seconds["build_s"] = outcome.seconds
    if outcome.status in ("compile_error", "timeout", "crash"):
        verdict = {"compile_error": Verdict.COMPILE_ERROR, "timeout": Verdict.TIMEOUT}.get(outcome.status, Verdict.CRASH)
        if verdict is Verdict.COMPILE_ERROR:
            return _finish(row, verdict, _build_failure_reason(row.build["errors"], outcome.message))
        return _finish(row, verdict, f"build stage: {outcome.message}")
    if context.judge is None:
        return _finish(row, Verdict.SKIPPED, context.setup_error)
    workdir = Path(tempfile.mkdtemp(prefix="evalkit-judge-"))
    build_dir = Path(outcome.extension_dir).parent  # the build stage already chose it
    try:
        code_path = workdir / "submission.py"
        code_path.write_text(early.code)
        judgement = context.judge.judge(code_path, workdir, build_env(build_dir, device))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return _apply_judgement(row, judgement, early, context.baselines, context.problem, build_dir / "extensions")


def _apply_judgement(row: ResultRow, judgement: Judgement, early: Triage, baselines: dict[str, Any],
                     problem: Problem, extension_root: Path) -> ResultRow:
    row.flags.extend(judgement.flags)
    row.warnings.extend(judgement.warnings)
    row.correctness, row.timing = judgement.correctness, judgement.timing
    row.stage_seconds.update(judgement.stage_seconds)
    row.error = _map_error(judgement.error, early, extension_root)
    row.baselines = {k: v for k, v in baselines.items() if k in BASELINE_KINDS or k == "device_name"} or None
    if judgement.timing:
        row.timing = dict(judgement.timing)
        median = judgement.timing["median_ms"]
        row.speedup_vs_eager = speedup(baselines.get("eager", {}).get("median_ms"), median)
        row.speedup_vs_compile = speedup(baselines.get("compile", {}).get("median_ms"), median)
        floor = floor_ms(problem.settings.flops, problem.settings.min_bytes, baselines.get("device_name", ""))
        if floor is not None:
            row.timing["floor_ms"] = floor
            if median < floor:
                row.flags.append("implausible_speedup")
    reason = judgement.reason
    if judgement.verdict is Verdict.CORRECT and row.speedup_vs_eager:
        reason += f", {row.speedup_vs_eager:.2f}x vs eager"
    if judgement.verdict is Verdict.COMPILE_ERROR and row.error:
        reason = _build_failure_reason(row.error.get("compiler_errors") or [], str(row.error.get("message", "")))
    elif row.error and row.error.get("traceback"):
        frame = next((f for f in reversed(row.error["traceback"]) if f.get("source_line")), None)
        if frame:
            reason += f" (line {frame['source_line']} of {row.path})"
    return _finish(row, judgement.verdict, reason)


def _build_failure_reason(errors: list[dict[str, Any]], message: str) -> str:
    """The first two compiler errors, each pointing into the submission where it can."""
    parts = []
    for error in errors[:2]:
        where = f" (line {error['submission_line']} of the answer)" if error.get("submission_line") else ""
        parts.append(f"{error['file']}:{error['line']}: {error['message']}{where}")
    if not parts:
        parts.append((message.strip().splitlines() or ["(no compiler message)"])[0])
    more = f"; +{len(errors) - 2} more" if len(errors) > 2 else ""
    return "build failed: " + "; then ".join(parts) + more


def _map_error(error: dict[str, Any] | None, early: Triage, extension_root: Path) -> dict[str, Any] | None:
    """Point traceback frames and compiler errors back at lines of the original text."""
    if not error:
        return error
    error = dict(error)
    frames = []
    for frame in error.get("traceback") or []:
        frame = dict(frame)
        if frame.get("in_submission") and isinstance(frame.get("line"), int):
            frame["source_line"] = early.extraction.source_line(frame["line"])
        frames.append(frame)
    if frames:
        error["traceback"] = frames
    if error.get("kind") == "compile_error":
        log = "\n".join(str(error.get(k, "")) for k in ("message", "stdout_tail", "stderr_tail"))
        errors = first_compiler_errors(log, extension_root)
        error["compiler_errors"] = [_with_submission_line(e, early) for e in errors]
    return error


def _build_record(outcome: BuildOutcome, early: Triage) -> dict[str, Any]:
    record = outcome.to_dict()
    record["errors"] = [_with_submission_line(e, early) for e in outcome.errors]
    return record


def _with_submission_line(entry: dict[str, Any], early: Triage) -> dict[str, Any]:
    code_line = map_to_submission(entry.get("source", ""), early.code)
    if code_line:
        return {**entry, "code_line": code_line, "submission_line": early.extraction.source_line(code_line)}
    return dict(entry)


def _row(submission: Submission, verdict: Verdict, reason: str, device: str, early: Triage | None = None) -> ResultRow:
    row = ResultRow(run=submission.run, problem=submission.problem, sample=submission.sample, path=submission.path,
                    sha256=submission.sha256, verdict=verdict.value, reason=reason, device=device,
                    evalkit_version=__version__)
    if early is not None:
        row.extraction = early.extraction.to_dict()
        row.warnings.extend(early.warnings)
    return row


def _early_row(submission: Submission, early: Triage, device: str) -> ResultRow:
    row = _row(submission, early.verdict, early.reason, device, early)
    row.error = early.error
    return _finish(row, early.verdict, early.reason)


def _finish(row: ResultRow, verdict: Verdict, reason: str) -> ResultRow:
    row.verdict, row.reason = verdict.value, " ".join(str(reason).split())[:400]
    row.judged_at = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    return row

