"""The pure front of the pipeline: text -> code, or an early verdict that needs no process.

No submission code runs here: the text is extracted, the code parsed (never executed)
and scanned for what device it needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from evalkit.intake.extract import Extraction, extract
from evalkit.records import Submission, Verdict
from evalkit.intake.static_scan import scan, syntax_problem


@dataclass
class Triage:
    """What is known before building: the extraction and, if it already decides, the verdict."""

    extraction: Extraction
    verdict: Verdict | None = None
    reason: str = ""
    error: dict[str, Any] | None = None
    needs_cuda: bool = False
    warnings: list[str] = field(default_factory=list)

    @property
    def code(self) -> str:
        return self.extraction.code


def triage(submission: Submission, device: str) -> Triage:
    extraction = extract(submission.text)
    result = Triage(extraction=extraction, warnings=list(extraction.warnings))
    if not extraction.ok:
        result.verdict, result.reason = Verdict.NO_CODE, extraction.reason
        return result
    problem = syntax_problem(extraction.code)
    if problem is not None:
        line = extraction.source_line(problem.line) if problem.line else 0
        result.verdict = Verdict.SYNTAX_ERROR
        result.reason = f"SyntaxError: {problem.message} at line {line} of {submission.path}"
        result.error = {"type": "SyntaxError", "message": problem.message, "code_line": problem.line,
                        "source_line": line, "column": problem.column, "text": problem.text}
        return result
    facts = scan(extraction.code)
    result.needs_cuda = facts.needs_cuda
    result.warnings.extend(facts.warnings)
    if facts.needs_cuda and device != "cuda":
        result.verdict = Verdict.SKIPPED
        result.reason = (f"needs a CUDA GPU ({'; '.join(facts.cuda_evidence)}) but this run's device is "
                         f"{device}; rerun on a machine with a GPU")
    return result
