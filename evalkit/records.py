"""The vocabulary every stage shares (no side of the trust boundary; stdlib only).

Verdicts (with their place in the pipeline), flags (with whether they exclude a row from fast_p),
the baselines, the curated run, and the plain records that flow between stages and are written to
``results.jsonl``. Every record is JSON-safe (``to_dict``), versioned by ``SCHEMA_VERSION`` and carries
units in its field names. The schema is documented in ``docs/report-schema.md``; bump
``SCHEMA_VERSION`` whenever a field changes meaning or is removed, and add the step from the old version to
``MIGRATIONS``: rows of every earlier version are read through ``migrate``.

A new verdict is declared here (``Verdict`` and ``VERDICT_INFO``: its rank, whether it compiled, its meaning, its
badge colour and its place in KernelBench's shape, from which the report's CSS and both KernelBench exports
follow), decided in ``evalkit.judge.verdicts`` and listed in ``docs/report-schema.md``; a new flag is declared here
only (``docs/changes.md``). A row's sub-records have their keys declared in ``evalkit.row_parts``.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
from dataclasses import dataclass, field
from typing import Any, Iterable

from evalkit.row_parts import (BaselinesRecord, BuildRecord, CorrectnessRecord, ErrorRecord, ExtractionRecord,
                               TimingRecord, check_parts)

SCHEMA_VERSION = 6  # 2: timing is the judge's own clock (observed/reported_median_ms gone); 3: speedups from one
# window, answer and baseline interleaved, with their intervals (speedup_vs_*_ci), the output's delivery charged;
# 4: a precision per row (``precision``), and PyTorch's own error in it (``correctness.pytorch_own``); 5: outputs read
# where the worker keeps them, and everything but the calls' own events subtracted (``timing.overhead_requests``);
# 6: the version of its problem a row was judged against (``problem_sha256``), and its precision the judge's own stamp
CURATED_RUN = "curated"  # the run name of the curated solutions shipped in problems/<id>/solutions/
BASELINE_KINDS: tuple[str, ...] = ("eager", "compile")


def baseline_kinds(value: str | Iterable[str]) -> tuple[str, ...]:
    """The baselines a run times, parsed once for ``--baselines`` and the API's ``baselines=``: a comma-separated
    text or a list of ``BASELINE_KINDS``, or ``none`` alone (no baseline); ``ValueError`` saying what to give."""
    words = [w.strip() for w in value.split(",")] if isinstance(value, str) else [str(w) for w in value]
    if words == ["none"]:
        return ()
    if "none" in words:
        raise ValueError("'none' means no baseline, so it cannot be listed with others; give 'none' alone, or any "
                         "of eager,compile")
    wrong = [w for w in words if w not in BASELINE_KINDS]
    if wrong:
        raise ValueError(f"unknown baseline(s) {', '.join(map(repr, wrong))}; choose from {', '.join(BASELINE_KINDS)}"
                         f", or 'none'")
    if len(set(words)) != len(words):
        raise ValueError("a baseline is listed twice")
    return tuple(words)


class Verdict(str, enum.Enum):
    """Verdicts in the order rows list them: the first stage that fails decides."""

    NO_CODE = "no_code"
    SYNTAX_ERROR = "syntax_error"
    INTERFACE_ERROR = "interface_error"
    COMPILE_ERROR = "compile_error"
    RUNTIME_ERROR = "runtime_error"
    CRASH = "crash"
    TIMEOUT = "timeout"
    INCORRECT = "incorrect"
    CORRECT = "correct"
    SKIPPED = "skipped"

    def __str__(self) -> str:  # so f-strings print "correct", not "Verdict.CORRECT"
        return self.value

    @property
    def rank(self) -> int:
        """How far through the pipeline the submission got (higher is further)."""
        return VERDICT_INFO[self].rank

    @property
    def compiled(self) -> bool | None:
        """Whether the code got through the build: True, False, or None when the build record decides."""
        return VERDICT_INFO[self].compiled


@dataclass(frozen=True)
class VerdictInfo:
    rank: int
    compiled: bool | None
    meaning: str
    colour: str  # the report's badge (CSS ``.v-<verdict>``)
    kernelbench: str  # the key of KernelBench's metadata its reason goes under ("": none, a correct row)


# ``skipped`` happens right after the syntax check (the device check), so it ranks there.
_BUILD, _RUN, _WRONG = "compilation_error", "runtime_error", "correctness_issue"  # KernelBench's metadata keys
VERDICT_INFO: dict[Verdict, VerdictInfo] = {
    Verdict.NO_CODE: VerdictInfo(0, False, "the answer holds no ModelNew code", "#6b7280", _BUILD),
    Verdict.SYNTAX_ERROR: VerdictInfo(1, False, "the code does not parse", "#7e22ce", _BUILD),
    Verdict.SKIPPED: VerdictInfo(2, False, "needs a device this run lacks", "#64748b", "skipped"),
    Verdict.INTERFACE_ERROR: VerdictInfo(3, True, "no usable ModelNew(*get_init_inputs()) or forward", "#7e22ce", _RUN),
    Verdict.COMPILE_ERROR: VerdictInfo(4, False, "its extension did not build", "#7e22ce", _BUILD),
    Verdict.RUNTIME_ERROR: VerdictInfo(5, True, "raised, or broke the judge-worker protocol", "#b91c1c", _RUN),
    Verdict.CRASH: VerdictInfo(6, None, "its process died or was killed for its resources", "#b91c1c", _RUN),
    Verdict.TIMEOUT: VerdictInfo(7, None, "a stage ran past its time limit", "#b91c1c", _RUN),
    Verdict.INCORRECT: VerdictInfo(8, True, "an output was wrong, malformed, or an input was modified", "#c2410c",
                                   _WRONG),
    Verdict.CORRECT: VerdictInfo(9, True, "every output within tolerance of the float64 reference", "#15803d", ""),
}

VERDICT_ORDER: tuple[str, ...] = tuple(v.value for v in Verdict)


class Flag(str, enum.Enum):
    """Marks on a row the verdict alone does not say; ``FLAG_INFO`` says what each means."""

    IMPLAUSIBLE_SPEEDUP = "implausible_speedup"
    TIMING_MISMATCH = "timing_mismatch"
    REDUCED_PRECISION = "reduced_precision"
    NO_CUSTOM_KERNEL = "no_custom_kernel"
    FALLBACK = "fallback"
    MUTATES_INPUTS = "mutates_inputs"
    WRONG_DURING_TIMING = "wrong_during_timing"
    NOISY_TIMING = "noisy_timing"
    CONTENDED_GPU = "contended_gpu"
    LIBRARY_DOMINATED = "library_dominated"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class FlagInfo:
    meaning: str
    excludes_from_fast_p: bool
    why: str = ""


FLAG_INFO: dict[Flag, FlagInfo] = {
    Flag.IMPLAUSIBLE_SPEEDUP: FlagInfo(
        "faster than the problem's FLOP or byte floor allows on this device", True,
        "no kernel can be that fast: the time, not the kernel, is wrong"),
    Flag.TIMING_MISMATCH: FlagInfo(
        "(reports of evalkit 0.x before the judge's own clock) the worker reported less time than the judge "
        "saw pass", True, "the submission tried to, or did, bend the clock; no longer set: every time is the judge's"),
    Flag.NOISY_TIMING: FlagInfo(
        "the calls' times spread more than the noise bound (docs/judge.md), twice", True,
        "a median that moves between measurements is not a speedup anyone can reproduce"),
    Flag.CONTENDED_GPU: FlagInfo(
        "timed while another judge's work on the same GPU still ran: it outlasted the judge's wait for it "
        "(docs/judge.md, Several judges on one GPU)", True,
        "a time measured beside other work on the GPU may be slowed, and the speedup with it"),
    Flag.REDUCED_PRECISION: FlagInfo(
        "within tolerance, but over 10x less precise than PyTorch's own float32 result on the same inputs", False,
        "the tolerance accepted it; users of stricter tolerances can filter on it"),
    Flag.NO_CUSTOM_KERNEL: FlagInfo("every kernel that ran was a library's (PyTorch, cuDNN, cuBLAS, ...); on CPU, "
                                    "no native code the answer built was called", False,
                                    "correct and timed honestly, but not the submission's own kernel"),
    Flag.FALLBACK: FlagInfo("builds kernels of its own, yet none of them ran", False,
                            "as no_custom_kernel; also suggests a silent fallback"),
    Flag.LIBRARY_DOMINATED: FlagInfo(
        "its own kernels ran, but library kernels took most of the call's device time", False,
        "correct and timed honestly; the speed is mostly a library's, shown so users can filter on it"),
    Flag.MUTATES_INPUTS: FlagInfo("forward modified its inputs in place (the row is incorrect)", False,
                                  "an incorrect row never counts anyway"),
    Flag.WRONG_DURING_TIMING: FlagInfo("an output produced during timing was wrong (the row is incorrect)", False,
                                       "an incorrect row never counts anyway"),
}

EXCLUDED_FLAGS: frozenset[str] = frozenset(f.value for f, info in FLAG_INFO.items() if info.excludes_from_fast_p)


def resume_key(run: str, problem: str, sample: str, sha256: str) -> str:
    """Identity used by ``--resume``: the same run/problem/sample and the same content."""
    return f"{run}/{problem}/{sample}@{sha256}"


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class Submission:
    """One candidate answer: where it came from and its full text."""

    run: str
    problem: str
    sample: str
    path: str
    text: str = field(repr=False)

    @property
    def sha256(self) -> str:
        return sha256_text(self.text)

    @property
    def key(self) -> str:
        """Identity used by ``--resume`` (``resume_key``)."""
        return resume_key(self.run, self.problem, self.sample, self.sha256)


def to_jsonable(value: object) -> Any:
    """Turn dataclasses, enums, tuples and paths into plain JSON values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, float) and value != value:  # NaN is not valid JSON
        return None
    if isinstance(value, float) and value in (float("inf"), float("-inf")):
        return None
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


# Keys of a row's ``stage_seconds`` that are parts of other stages, not stages of their own: a total of the judge's
# time adds the others only. ``turn_wait_s``: waiting for the GPU's turn (in calibrate_s and timing_s);
# ``checks_s``: the judge's checks of timed requests against the reference (in timing_s; made while the profile's
# worker loads, where there is one: then in profile_s).
STAGE_PARTS = ("turn_wait_s", "checks_s")


@dataclass
class ResultRow:
    """One judged submission: one line of ``results.jsonl``."""

    run: str
    problem: str
    sample: str
    path: str
    sha256: str
    verdict: str
    reason: str
    schema_version: int = SCHEMA_VERSION
    device: str = "cpu"
    stage_seconds: dict[str, float] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # The sub-records: their keys are declared in ``evalkit.row_parts`` (``to_dict`` refuses any other)
    extraction: ExtractionRecord | None = None
    build: BuildRecord | None = None
    error: ErrorRecord | None = None
    correctness: CorrectnessRecord | None = None
    timing: TimingRecord | None = None
    baselines: BaselinesRecord | None = None
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    speedup_vs_eager_ci: list[float] | None = None  # its ~95% interval [low, high] (docs/judge.md, Speedups)
    speedup_vs_compile_ci: list[float] | None = None
    evalkit_version: str = ""
    judged_at: str = ""
    problem_level: int | None = None  # the problem's level (problem.toml ``level``, else its KernelBench level)
    kernelbench: dict[str, int] | None = None  # the problem's KernelBench origin: {"level": L, "number": N}
    precision: str = "fp32"  # the dtype inputs, weights and outputs had (``sources.settings.PRECISIONS``)
    problem_sha256: str | None = None  # its problem's files (reference.py, problem.toml) as the judge judged by them
    judge: str | None = None  # the judge that decided it ("cuda:0", "cpu:1"); None: decided before any judge
    feedback: str | None = None  # a short text for the model's next turn (``evalkit.judge.feedback``)

    def to_dict(self) -> dict[str, Any]:
        """The row as ``results.jsonl`` holds it: the one place every row is written. ``ValueError`` for a key of a
        sub-record that ``evalkit.row_parts`` does not declare (declare it there and in ``docs/report-schema.md``)."""
        data = to_jsonable(self)
        check_parts(data)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ResultRow":
        """A row of any schema version this evalkit reads (``migrate``); fields it does not know are left out."""
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in migrate(data).items() if k in known})


class EvalkitError(Exception):
    """The base of every error a user can fix (a file, an option, the machine): its message names what is wrong and
    what to do, and the command line prints it as one line (exit 1). Anything else escaping is a bug, shown whole."""


class SchemaError(EvalkitError, ValueError):
    """A row written by a newer evalkit than this one, whose schema this one cannot read."""


def _from_1(row: dict[str, Any]) -> dict[str, Any]:
    """Schema 1 -> 2: a time was the worker's clock, checked against the judge's (``observed_median_ms``), and the
    judge's where they disagreed (flag ``timing_mismatch``, the worker's kept as ``reported_median_ms``). Its
    figures stay; ``clock`` says whose they are where the row did not."""
    timing = row.get("timing")
    if isinstance(timing, dict) and "clock" not in timing:
        mismatch = Flag.TIMING_MISMATCH.value in (row.get("flags") or [])
        row["timing"] = {**timing, "clock": "judge" if mismatch else "worker"}
    return row


def _from_2(row: dict[str, Any]) -> dict[str, Any]:
    """Schema 2 -> 3: speedups came from medians taken apart, with no interval."""
    return {"speedup_vs_eager_ci": None, "speedup_vs_compile_ci": None, **row}


def _from_3(row: dict[str, Any]) -> dict[str, Any]:
    """Schema 3 -> 4: every problem was judged in fp32, and PyTorch's own error was its float32 one."""
    correctness = row.get("correctness")
    if isinstance(correctness, dict) and "pytorch_float32" in correctness:
        correctness = {("pytorch_own" if k == "pytorch_float32" else k): v for k, v in correctness.items()}
        row = {**row, "correctness": correctness}
    return {"precision": "fp32", **row}


def _from_4(row: dict[str, Any]) -> dict[str, Any]:
    """Schema 4 -> 5: a call's time held its output's delivery into the judge's buffers and the harness's own part
    of each call, and the part subtracted was measured by pings through the baseline's worker (``overhead_pings``,
    their count): its figures stay, the count under the new name."""
    def renamed(record: object) -> Any:
        if not isinstance(record, dict) or "overhead_pings" not in record:
            return record
        return {("overhead_requests" if k == "overhead_pings" else k): v for k, v in record.items()}

    baselines = row.get("baselines")
    if isinstance(baselines, dict):
        row = {**row, "baselines": {kind: renamed(record) for kind, record in baselines.items()}}
    return {**row, "timing": renamed(row.get("timing"))} if "timing" in row else row


def _from_5(row: dict[str, Any]) -> dict[str, Any]:
    """Schema 5 -> 6: a row did not say which version of its problem it was judged against."""
    return {"problem_sha256": None, **row}


# version -> the step to the next; one per version ever written
MIGRATIONS = {1: _from_1, 2: _from_2, 3: _from_3, 4: _from_4, 5: _from_5}


def migrate(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` (a ``results.jsonl`` object) brought to ``SCHEMA_VERSION``, one step per version; a row without a
    version is taken as schema 1. ``SchemaError`` for a row of a newer schema than this evalkit knows."""
    version = row.get("schema_version", 1)
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise SchemaError(f"a row of schema version {version!r}: this evalkit reads versions 1 to {SCHEMA_VERSION}; "
                          f"upgrade evalkit to read it")
    row = dict(row)
    if version < SCHEMA_VERSION:
        row["migrated_from"] = version  # what was on disk, for the summary's ``results_schema_versions``
    while version < SCHEMA_VERSION:
        row = MIGRATIONS[version](row)
        version += 1
    row["schema_version"] = version
    return row
