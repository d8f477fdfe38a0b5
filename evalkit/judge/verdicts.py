"""Trusted side: the one place verdicts are decided, and where what was observed becomes a result row.

Every stage reports what it observed as a ``Finding`` (triage: no code, no parse, needs a device; the
build: its status; the judge: what one worker's session showed). ``VERDICT_OF`` turns findings into
verdicts; the functions below turn them, with the triage, build and judging records, into the
``ResultRow`` that ``results.jsonl`` holds: speedups, the plausibility floor, reasons that point into
the answer. A new verdict is declared in ``evalkit.records`` and mapped here.
"""

from __future__ import annotations

import datetime as dt
import enum
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence, TypedDict

from evalkit.version import __version__
from evalkit.intake.triage import Triage
from evalkit.judge.builder import BuildOutcome
from evalkit.judge.compiler_errors import first_compiler_errors, first_jit_errors, map_to_submission
from evalkit.judge.feedback import feedback_for
from evalkit.judge.plausibility import floor_ms
from evalkit.judge.speedups import speedups_against
from evalkit.records import BASELINE_KINDS, Flag, ResultRow, Submission, Verdict
from evalkit.row_parts import (BaselinesRecord, CompilerErrorRecord, CorrectnessRecord, ErrorRecord,
                               FrameRecord, TimingRecord)
from evalkit.sandbox import protocol
from evalkit.sources.settings import JudgingPlan

SIGNAL_SCOPING_ABI = 6  # Landlock scopes signals and abstract sockets from this ABI on


class Finding(str, enum.Enum):
    """What a stage observed that decides a submission's verdict."""

    NO_CODE = "no_code"
    SYNTAX_ERROR = "syntax_error"
    NEEDS_DEVICE = "needs_device"
    BUILD_FAILED = "build_failed"
    BUILD_TIMED_OUT = "build_timed_out"
    BUILD_CRASHED = "build_crashed"
    PROBLEM_UNAVAILABLE = "problem_unavailable"
    CLAIMED_BUILD_FAILURE = "claimed_build_failure"  # the worker's own ErrorClaim says compile_error
    CLAIMED_INTERFACE_ERROR = "claimed_interface_error"
    RAISED = "raised"
    PROTOCOL_VIOLATION = "protocol_violation"
    JUDGE_FAILED = "judge_failed"  # the judge itself raised while judging this answer
    WORKER_TIMED_OUT = "worker_timed_out"
    WORKER_DIED = "worker_died"
    WRONG_FORM = "wrong_form"
    WRONG_VALUES = "wrong_values"
    MUTATED_INPUTS = "mutated_inputs"
    WRONG_DURING_TIMING = "wrong_during_timing"
    PASSED = "passed"


VERDICT_OF: dict[Finding, Verdict] = {
    Finding.NO_CODE: Verdict.NO_CODE,
    Finding.SYNTAX_ERROR: Verdict.SYNTAX_ERROR,
    Finding.NEEDS_DEVICE: Verdict.SKIPPED,
    Finding.BUILD_FAILED: Verdict.COMPILE_ERROR,
    Finding.BUILD_TIMED_OUT: Verdict.TIMEOUT,
    Finding.BUILD_CRASHED: Verdict.CRASH,
    Finding.PROBLEM_UNAVAILABLE: Verdict.SKIPPED,
    Finding.CLAIMED_BUILD_FAILURE: Verdict.COMPILE_ERROR,
    Finding.CLAIMED_INTERFACE_ERROR: Verdict.INTERFACE_ERROR,
    Finding.RAISED: Verdict.RUNTIME_ERROR,
    Finding.PROTOCOL_VIOLATION: Verdict.RUNTIME_ERROR,
    Finding.JUDGE_FAILED: Verdict.RUNTIME_ERROR,
    Finding.WORKER_TIMED_OUT: Verdict.TIMEOUT,
    Finding.WORKER_DIED: Verdict.CRASH,
    Finding.WRONG_FORM: Verdict.INCORRECT,
    Finding.WRONG_VALUES: Verdict.INCORRECT,
    Finding.MUTATED_INPUTS: Verdict.INCORRECT,
    Finding.WRONG_DURING_TIMING: Verdict.INCORRECT,
    Finding.PASSED: Verdict.CORRECT,
}
FLAG_OF: dict[Finding, Flag] = {Finding.MUTATED_INPUTS: Flag.MUTATES_INPUTS,
                                Finding.WRONG_DURING_TIMING: Flag.WRONG_DURING_TIMING}
_CLAIMED_KIND = {"compile_error": Finding.CLAIMED_BUILD_FAILURE, "interface_error": Finding.CLAIMED_INTERFACE_ERROR}
_BUILD_STATUS = {"compile_error": Finding.BUILD_FAILED, "timeout": Finding.BUILD_TIMED_OUT,
                 "crash": Finding.BUILD_CRASHED}
MAX_REASON = 400


def finding_of_claimed_error(kind: str) -> Finding:
    """The finding for a worker's ErrorClaim: its kind only chooses among failures."""
    return _CLAIMED_KIND.get(kind, Finding.RAISED)


class StopDetails(TypedDict, total=False):
    """What a ``Stop`` carries into the row: the failure's error record, or the correctness record of the trial."""

    error: ErrorRecord
    correctness: CorrectnessRecord


class Stop(Exception):
    """Raised while judging when an observation ends the session early."""

    def __init__(self, finding: Finding, reason: str, details: StopDetails | None = None) -> None:
        super().__init__(reason)
        self.finding, self.reason, self.details = finding, reason, details or {}


@dataclass
class Judgement:
    """What the judge observed of one submission's worker session."""

    finding: Finding
    reason: str
    flags: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    error: ErrorRecord | None = None
    correctness: CorrectnessRecord | None = None
    timing: TimingRecord | None = None
    stage_seconds: dict[str, float] = field(default_factory=dict)

    @classmethod
    def stopped(cls, stop: Stop) -> "Judgement":
        flag = FLAG_OF.get(stop.finding)
        return cls(stop.finding, stop.reason, flags=[flag.value] if flag else [], error=stop.details.get("error"),
                   correctness=stop.details.get("correctness"))


# ---- before building --------------------------------------------------------------------------------

def early_row(submission: Submission, early: Triage, device: str) -> ResultRow | None:
    """The row when triage already decides (no code, no parse, a device this run lacks), else None."""
    if not early.extraction.ok:
        return finish(new_row(submission, device, early), Finding.NO_CODE, early.extraction.reason)
    if early.syntax is not None:
        problem = early.syntax
        line = early.extraction.source_line(problem.line) if problem.line else 0
        row = new_row(submission, device, early)
        row.error = ErrorRecord(type="SyntaxError", message=problem.message, code_line=problem.line,
                                source_line=line, column=problem.column, text=problem.text)
        return finish(row, Finding.SYNTAX_ERROR, f"SyntaxError: {problem.message} at line {line} of {submission.path}")
    if early.needs_cuda and device != "cuda":
        reason = (f"needs a CUDA GPU ({'; '.join(early.cuda_evidence)}) but this run's device is {device}; "
                  f"rerun on a machine with a GPU")
        return finish(new_row(submission, device, early), Finding.NEEDS_DEVICE, reason)
    return None


def judge_failed_row(submission: Submission, early: Triage, device: str, err: BaseException) -> ResultRow:
    """An answer the judge could not finish: its fault until shown otherwise (it ran in our sandbox)."""
    row = new_row(submission, device, early)
    row.error = ErrorRecord(kind="judge_failed", type=type(err).__name__, message=str(err)[:2000])
    return finish(row, Finding.JUDGE_FAILED, f"the judge could not finish this answer: {type(err).__name__}: {err}")


def unreadable_row(placeholder: Submission, why: str, device: str) -> ResultRow:
    """The row of a file that is no text answer (binary, unreadable), with its feedback: no judge sees it."""
    row = finish(new_row(placeholder, device), Finding.NO_CODE, why)
    row.feedback = feedback_for(row)
    return row


# ---- after building ---------------------------------------------------------------------------------

def build_failed_row(submission: Submission, early: Triage, outcome: BuildOutcome, device: str) -> ResultRow | None:
    """The row when the build stage already decides, else None."""
    finding = _BUILD_STATUS.get(outcome.status)
    if finding is None:
        return None
    row = built_row(submission, early, outcome, device)
    if finding is Finding.BUILD_FAILED:
        return finish(row, finding, build_failure_reason(row.build["errors"] if row.build else [], outcome.message))
    return finish(row, finding, f"build stage: {outcome.message}")


def unavailable_row(submission: Submission, early: Triage, outcome: BuildOutcome, device: str, why: str) -> ResultRow:
    return finish(built_row(submission, early, outcome, device), Finding.PROBLEM_UNAVAILABLE, why)


def built_row(submission: Submission, early: Triage, outcome: BuildOutcome, device: str) -> ResultRow:
    row = new_row(submission, device, early)
    record = outcome.to_dict()
    record["errors"] = [_with_submission_line(e, early) for e in outcome.errors]
    row.build = record
    row.stage_seconds["build_s"] = 0.0 if outcome.cached else outcome.seconds  # this judging's; the build's: ``build``
    return row


# ---- after judging ----------------------------------------------------------------------------------

def judged_row(row: ResultRow, judgement: Judgement, early: Triage, baselines: dict[str, Any],
               plausibility: tuple[float | None, float | None], extension_root: Path,
               kinds: tuple[str, ...] = BASELINE_KINDS) -> ResultRow:
    """Fill ``row`` (from ``built_row``) with what the judge observed; ``plausibility`` is (flops, min_bytes). Only
    the baselines of ``kinds`` (the run's) are in it: a cache may hold others, timed by an earlier run."""
    baselines = {k: v for k, v in baselines.items() if k not in BASELINE_KINDS or k in kinds}
    row.flags.extend(judgement.flags)
    row.warnings.extend(judgement.warnings)
    row.correctness = judgement.correctness
    row.stage_seconds.update(judgement.stage_seconds)
    row.error = _map_error(judgement.error, early, extension_root)
    row.baselines = _row_baselines(baselines)
    if judgement.timing:
        _add_speedups(row, judgement.timing.copy(), baselines, plausibility)
    return finish(row, judgement.finding, _judged_reason(row, judgement))


def _row_baselines(baselines: Mapping[str, Any]) -> BaselinesRecord | None:
    """The row's ``baselines`` record: the device's name and each kind's entry the cache's ``baselines`` holds."""
    record = BaselinesRecord()
    if "device_name" in baselines:
        record["device_name"] = baselines["device_name"]
    if "eager" in baselines:
        record["eager"] = baselines["eager"]
    if "compile" in baselines:
        record["compile"] = baselines["compile"]
    return record or None


def _add_speedups(row: ResultRow, timing: TimingRecord, baselines: dict[str, Any],
                  plausibility: tuple[float | None, float | None]) -> None:
    row.timing = timing
    median = timing["median_ms"]
    found = speedups_against(timing, baselines, BASELINE_KINDS)
    if "eager" in found:
        row.speedup_vs_eager, row.speedup_vs_eager_ci = found["eager"].value, found["eager"].interval()
    if "compile" in found:
        row.speedup_vs_compile, row.speedup_vs_compile_ci = found["compile"].value, found["compile"].interval()
    floor = floor_ms(*plausibility, baselines.get("device_name", ""))
    if floor is not None:
        timing["floor_ms"] = floor
        if median < floor:
            row.flags.append(Flag.IMPLAUSIBLE_SPEEDUP.value)


def _judged_reason(row: ResultRow, judgement: Judgement) -> str:
    verdict = VERDICT_OF[judgement.finding]
    if verdict is Verdict.CORRECT and row.speedup_vs_eager:
        return judgement.reason + f", {row.speedup_vs_eager:.2f}x vs eager"
    if verdict is Verdict.COMPILE_ERROR and row.error:
        return build_failure_reason(row.error.get("compiler_errors") or [], str(row.error.get("message", "")))
    if row.error and row.error.get("traceback"):
        frame = next((f for f in reversed(row.error["traceback"]) if f.get("source_line")), None)
        if frame:
            return judgement.reason + f" (line {frame['source_line']} of {row.path})"
    return judgement.reason


def build_failure_reason(errors: Sequence[CompilerErrorRecord], message: str) -> str:
    """The first two compiler errors, each pointing into the submission where it can."""
    parts = []
    for error in errors[:2]:
        where = f" (line {error['submission_line']} of the answer)" if error.get("submission_line") else ""
        parts.append(f"{error['file']}:{error['line']}: {error['message']}{where}")
    if not parts:
        parts.append((message.strip().splitlines() or ["(no compiler message)"])[0])
    more = f"; +{len(errors) - 2} more" if len(errors) > 2 else ""
    return "build failed: " + "; then ".join(parts) + more


def _map_error(claimed: ErrorRecord | None, early: Triage, extension_root: Path) -> ErrorRecord | None:
    """Point the worker's claimed traceback frames, and compiler errors, back at lines of the answer."""
    if not claimed:
        return claimed
    error = claimed.copy()
    frames: list[FrameRecord] = []
    for claimed_frame in error.get("traceback") or []:
        frame = claimed_frame.copy()
        if frame.get("in_submission") and isinstance(frame.get("line"), int):
            frame["source_line"] = early.extraction.source_line(frame["line"])
        frames.append(frame)
    if frames:
        error["traceback"] = frames
    if error.get("kind") == "compile_error":  # a build failure the judge stage met (the build stage passed)
        log = "\n".join(str(error.get(k, "")) for k in ("message", "stdout_tail", "stderr_tail"))
        found = first_jit_errors(log) or first_compiler_errors(log, extension_root)
        error["compiler_errors"] = [_with_submission_line(e, early) for e in found]
    return error


def _with_submission_line(entry: CompilerErrorRecord, early: Triage) -> CompilerErrorRecord:
    mapped = entry.copy()
    code_line = map_to_submission(entry.get("source", ""), early.code)
    if code_line:
        mapped["code_line"], mapped["submission_line"] = code_line, early.extraction.source_line(code_line)
    return mapped


# ---- every row --------------------------------------------------------------------------------------

def new_row(submission: Submission, device: str, early: Triage | None = None) -> ResultRow:
    row = ResultRow(run=submission.run, problem=submission.problem, sample=submission.sample, path=submission.path,
                    sha256=submission.sha256, verdict="", reason="", device=device, evalkit_version=__version__)
    if early is not None:
        row.extraction = early.extraction.to_dict()
        row.warnings.extend(early.warnings)
    return row


def planned(row: ResultRow, plan: JudgingPlan | None) -> ResultRow:
    """``row`` stamped with the plan its problem was judged by: the sha256 of the problem's files and the precision
    (``plan`` None: a problem the run does not know, whose row stays unstamped)."""
    if plan is not None:
        row.problem_sha256, row.precision = plan.problem_sha256, plan.precision
    return row


def finish(row: ResultRow, finding: Finding, reason: str) -> ResultRow:
    """Set the verdict ``finding`` decides, the reason on one line, and the time of judging."""
    row.verdict, row.reason = VERDICT_OF[finding].value, " ".join(str(reason).split())[:MAX_REASON]
    row.judged_at = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    return row


# ---- what a judged worker says of itself --------------------------------------------------------------

def confinement_warnings(ready: protocol.ReadyClaim) -> list[str]:
    """What the worker says its confinement lacked (a claim: a submission can only make these appear)."""
    warnings = []
    if not ready.landlock:
        warnings.append("this kernel has no Landlock: the submission's file writes were not confined")
    elif ready.landlock < SIGNAL_SCOPING_ABI:
        warnings.append(f"this kernel's Landlock (ABI {ready.landlock}) cannot scope signals: the submission "
                        f"could signal processes outside its sandbox")
    if "WITH capabilities" in ready.privileges:
        warnings.append("the worker ran as root and could not drop its capabilities")
    return warnings


def crash_reason(reason: str, stderr: str) -> str:
    """A dead worker's reason, with what its stderr says went wrong (a claim: it can only add words)."""
    hints = [("illegal memory access", "CUDA illegal memory access"), ("out of memory", "out of memory"),
             ("Segmentation fault", "segmentation fault"), ("device-side assert", "CUDA device-side assert")]
    found = [label for needle, label in hints if needle.lower() in stderr.lower()]
    return reason + (f" [{', '.join(found)}]" if found else "")
