"""The keys of a row's sub-records, declared once (no side of the trust boundary; stdlib only).

A ``results.jsonl`` row (``evalkit.records.ResultRow``) holds six sub-records: ``extraction``, ``build``,
``error``, ``correctness``, ``timing`` and ``baselines``. Each is a plain dict on disk; its keys are declared here
as a ``TypedDict`` (``total=False`` where a key is written only when it applies), and documented in the rows table
of ``docs/report-schema.md`` (``tests/report/test_row_schema.py`` checks the two agree). Rows are written
through ``ResultRow.to_dict``, which refuses a key declared nowhere (``check_parts``), and the report reads a
sub-record through ``part``.

A key older schemas wrote and ``records.migrate`` leaves in place is declared in ``LEGACY_KEYS``: a row read back
may hold it, the judge never writes it.
"""

from __future__ import annotations

import functools
import typing
from typing import Any, Literal, Mapping, TypedDict, Union, overload

# ---- extraction: which block of the answer is the code (``evalkit.intake.extract.Extraction.to_dict``) ----------


class BlockRecord(TypedDict):
    """A fenced block of the answer (``evalkit.intake.fences.Block.to_dict``)."""

    index: int
    language: str
    fence_line: int
    start_line: int
    end_line: int
    closed: bool
    indent: int


class CandidateRecord(BlockRecord):
    """A block of the candidate list: why it was chosen or not."""

    in_final_answer: bool
    defines_model_new: bool
    status: str  # "chosen" | "rejected"
    why: str


class ExtractionRecord(TypedDict):
    ok: bool
    reason: str
    code: str
    truncated: bool
    block: BlockRecord | None
    candidates: list[CandidateRecord]
    whole_text: bool
    line_offset: int  # code line i is answer line i + line_offset
    warnings: list[str]


# ---- build: the build stage's outcome (``evalkit.judge.builder.BuildOutcome``) -----------------------------------


class _CompilerErrorBase(TypedDict):
    file: str
    line: int
    message: str
    source: str


class CompilerErrorRecord(_CompilerErrorBase, total=False):
    """One compiler error (``evalkit.judge.compiler_errors``), pointed into the answer where it can be."""

    code_line: int
    submission_line: int


class BuildRecord(TypedDict):
    status: str  # "ok" | "compile_error" | "import_failed" | "crash" | "timeout"
    seconds: float
    cached: bool
    message: str
    log_tail: str
    errors: list[CompilerErrorRecord]
    extension_dir: str


# ---- error: what failed (the worker's claim, a syntax error, the judge's own failure) ------------------------------


class _FrameBase(TypedDict):
    file: str
    line: int
    function: str
    in_submission: bool
    text: str


class FrameRecord(_FrameBase, total=False):
    """A traceback frame the worker claims (``evalkit.sandbox.protocol.FrameClaim``)."""

    source_line: int  # the answer's line, for a frame in the submission


class ErrorRecord(TypedDict, total=False):
    op: str  # the worker's reply ("error")
    kind: str  # compile_error, interface_error, runtime_error, crash, timeout, judge_failed, caller_error
    stage: str
    type: str
    message: str
    traceback: list[FrameRecord]
    stdout_tail: str
    stderr_tail: str
    compiler_errors: list[CompilerErrorRecord]  # a build failure the judge stage met
    source_line: int  # syntax errors: the answer's line
    code_line: int  # syntax errors: the code's line
    column: int
    text: str


# ---- correctness: the trials, and on failure what was wrong (``evalkit.judge.contender``) --------------------------


class PytorchOwnRecord(TypedDict):
    """PyTorch's own result in the row's precision against the float64 reference."""

    max_abs_err: float
    max_rel_err: float
    rel_l2_err: float


class WorstElementRecord(TypedDict):
    """One of a wrong output's worst elements (``evalkit.judge.wrong_values``): the judge's own reading."""

    index: list[int]
    expected: float | str  # "nan", "inf" or "-inf" where not finite
    got: float | str


class CorrectnessRecord(TypedDict, total=False):
    trials: int
    calls_per_trial: int
    atol: float
    rtol: float
    reference_precision: str
    max_abs_err: float
    max_rel_err: float
    rel_l2_err: float
    pytorch_own: PytorchOwnRecord
    seed: int
    inputs_seed: int
    timing_inputs_seed: int
    stored_as: str | None
    weights: str
    precision_class: str
    kernels: list[str]  # CUDA: the kernels the profiled call launched (a claim)
    custom_kernels: list[str]
    custom_time_share: float | None
    kernel_us: dict[str, float]
    # an incorrect row: the failing trial and output, and the comparison (``tensor_check.Comparison``)
    failed_trial: int
    timed_request: int  # wrong in a timed request instead (its number), after the correctness trials passed
    output_index: int
    ok: bool
    reason: str
    shape: list[int]
    expected_shape: list[int]
    dtype: str
    expected_dtype: str
    n_elements: int
    bad_count: int
    bad_fraction: float
    first_bad_index: list[int] | None
    unexpected_nonfinite: int
    mean_abs_err: float | None
    pattern: str
    worst: list[WorstElementRecord]


# ---- timing: the judge's clock (``evalkit.judge.submission_judge._timed``) -----------------------------------------


class SpeedupRecord(TypedDict):
    """A speedup from one window's pairs (``evalkit.judge.speedups.Speedup.to_dict``)."""

    value: float
    ci: list[float]
    pairs: int


class WindowSpeedupRecord(SpeedupRecord):
    vs: str  # the baseline the answer was timed beside


class RequestPartsRecord(TypedDict):
    """Where one side's timed requests went on the judge's clock beyond their calls' own events, the medians over the
    window's requests, milliseconds a request (``evalkit.judge.session.RequestParts``): until the reply was in, less the
    worker's events (its wake-up, its harness's own part, the reply's way back; ``None`` where the worker claimed no
    events), the freeze, and the idle probe. What the judge subtracts is the baseline's sum of them: where an answer's
    differ, this says in which part."""

    reply_beyond_events_ms: float | None
    freeze_ms: float
    idle_ms: float


class _PartnerFigures(TypedDict):
    median_ms: float
    iqr_ms: float
    count: int
    samples_ms: list[float]


class PartnerRecord(_PartnerFigures, total=False):
    """The baseline timed in the answer's window (``evalkit.judge.window.side_stats``)."""

    request_parts_ms: RequestPartsRecord  # rows judged before it lack it


class TimingStats(TypedDict, total=False):
    """The statistics of a set of timed calls, declared once: ``evalkit.judge.timing.timing_stats`` computes each
    (all of them), and a ``timing`` record and a baseline's entry hold them all, as ``TimingRecord``'s base."""

    count: int
    median_ms: float
    mean_ms: float
    std_ms: float
    min_ms: float
    max_ms: float
    iqr_ms: float
    p25_ms: float
    p75_ms: float


class TimingRecord(TimingStats, total=False):
    samples_ms: list[float]
    clock: str  # "judge" ("worker": schema 1 rows not flagged timing_mismatch)
    calls_per_request: int
    overhead_ms: float
    jitter_ms: float
    wall_median_ms: float
    below_resolution: bool
    attempts: int
    requests: int
    stopped_by: str  # "precision" | "budget" | "max_trials"
    verified_calls: list[int]
    overhead_requests: int | None  # the trusted requests the part subtracted was measured on (a window's)
    claimed_median_ms: float | None  # the worker's own time of a forward: a claim
    floor_ms: float  # the plausibility floor (``evalkit.judge.plausibility``), where one is known
    speedup: WindowSpeedupRecord
    partner: PartnerRecord
    request_parts_ms: RequestPartsRecord  # the answer's side (its events: a claim)


# ---- baselines: the PyTorch baselines the row was compared with (``evalkit.judge.baselines``) ----------------------


class RelativeRecord(SpeedupRecord):
    to: str  # the kind this one was timed beside


class BaselineEntry(TimingRecord, total=False):
    """One kind's baseline: a timing record as ``timing``'s, and what it cost the judge; or ``{"error": ...}``."""

    relative: RelativeRecord
    flags: list[str]
    stage_seconds: dict[str, float]
    judge_s: float
    error: str


class BaselinesRecord(TypedDict, total=False):
    device_name: str
    eager: BaselineEntry
    compile: BaselineEntry


PARTS: dict[str, type] = {"extraction": ExtractionRecord, "build": BuildRecord, "error": ErrorRecord,
                          "correctness": CorrectnessRecord, "timing": TimingRecord, "baselines": BaselinesRecord}
# Keys older schemas wrote that ``records.migrate`` leaves as they were: read back, never written by the judge.
# (sub-record's dotted path -> {key: the last schema version that wrote it})
LEGACY_KEYS: dict[str, dict[str, int]] = {
    "timing": {"observed_median_ms": 1, "reported_median_ms": 1, "copy_ms": 1, "ping_ms": 1},
    "baselines.eager": {"observed_median_ms": 1, "reported_median_ms": 1, "copy_ms": 1, "ping_ms": 1},
    "baselines.compile": {"observed_median_ms": 1, "reported_median_ms": 1, "copy_ms": 1, "ping_ms": 1},
}

Part = Literal["extraction", "build", "error", "correctness", "timing", "baselines"]
AnyPart = Union[ExtractionRecord, BuildRecord, ErrorRecord, CorrectnessRecord, TimingRecord, BaselinesRecord]


@functools.lru_cache(maxsize=None)
def declared(record: type) -> dict[str, Any]:
    """A TypedDict's keys, each with the TypedDict its value holds (or a list of), else None."""
    return {key: _nested(hint) for key, hint in typing.get_type_hints(record).items()}


def _nested(hint: object) -> type | None:
    if isinstance(hint, type) and typing.is_typeddict(hint):
        return hint
    for arg in typing.get_args(hint):  # X | None, list[X]
        found = _nested(arg)
        if found is not None:
            return found
    return None


def undeclared_keys(record: type, value: object, path: str) -> list[str]:
    """The dotted paths of the keys in ``value`` (a sub-record as written) that ``record`` declares nowhere."""
    if isinstance(value, list):
        return [found for item in value for found in undeclared_keys(record, item, path)]
    if not isinstance(value, Mapping):
        return []
    keys, legacy = declared(record), LEGACY_KEYS.get(path, {})
    found = []
    for key, item in value.items():
        if key not in keys and key not in legacy:
            found.append(f"{path}.{key}")
        elif keys.get(key) is not None:
            found.extend(undeclared_keys(keys[key], item, f"{path}.{key}"))
    return found


def check_parts(row: Mapping[str, Any]) -> None:
    """``ValueError`` naming the first key of a sub-record of ``row`` that is declared nowhere: every key a row is
    written with is declared here and documented in ``docs/report-schema.md``."""
    for name, record in PARTS.items():
        wrong = undeclared_keys(record, row.get(name), name)
        if wrong:
            part, _, key = wrong[0].rpartition(".")
            raise ValueError(f"row sub-record {part!r} has the undeclared key {key!r} ({len(wrong)} undeclared in "
                             f"all: {', '.join(wrong[:5])}): declare it in evalkit/row_parts.py "
                             f"({record.__name__} or the record it nests) and in docs/report-schema.md")


@overload
def part(row: Mapping[str, Any], name: Literal["extraction"]) -> ExtractionRecord: ...
@overload
def part(row: Mapping[str, Any], name: Literal["build"]) -> BuildRecord: ...
@overload
def part(row: Mapping[str, Any], name: Literal["error"]) -> ErrorRecord: ...
@overload
def part(row: Mapping[str, Any], name: Literal["correctness"]) -> CorrectnessRecord: ...
@overload
def part(row: Mapping[str, Any], name: Literal["timing"]) -> TimingRecord: ...
@overload
def part(row: Mapping[str, Any], name: Literal["baselines"]) -> BaselinesRecord: ...
def part(row: Mapping[str, Any], name: Part) -> AnyPart:
    """The row's sub-record ``name`` (a ``results.jsonl`` dict, any schema once migrated), typed by its declaration;
    {} when the row has none (null, absent, or not an object): the one way the report reads a sub-record."""
    if name not in PARTS:
        raise KeyError(f"{name!r} is not a row sub-record ({', '.join(PARTS)})")
    value = row.get(name)
    return value if isinstance(value, dict) else {}  # type: ignore[return-value]


def baseline_entry(row: Mapping[str, Any], kind: str) -> BaselineEntry:
    """The row's baseline of ``kind`` (``eager``, ``compile``): its timing record or ``{"error": ...}``; {} if none."""
    value = part(row, "baselines").get(kind)
    return value if isinstance(value, dict) else {}  # type: ignore[return-value]
