"""The plain records that flow between stages and are written to ``results.jsonl``.

Every record is JSON-safe (``to_dict``), versioned by ``SCHEMA_VERSION`` and carries
units in its field names. The schema is documented in ``docs/schema.md``; bump
``SCHEMA_VERSION`` whenever a field changes meaning or is removed.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
from dataclasses import dataclass, field
from typing import Any

SCHEMA_VERSION = 1


class Verdict(str, enum.Enum):
    """Verdicts in pipeline order: the first stage that fails decides."""

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


VERDICT_ORDER: tuple[str, ...] = tuple(v.value for v in Verdict)


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
        """Identity used by ``--resume``: same run/problem/sample and same content."""
        return f"{self.run}/{self.problem}/{self.sample}@{self.sha256}"


def to_jsonable(value: Any) -> Any:
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
    extraction: dict[str, Any] | None = None
    build: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    correctness: dict[str, Any] | None = None
    timing: dict[str, Any] | None = None
    baselines: dict[str, Any] | None = None
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    evalkit_version: str = ""
    judged_at: str = ""

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ResultRow":
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})
