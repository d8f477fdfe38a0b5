"""Trusted side, nothing runs: what is known about an answer before building it.

The text is extracted, the code parsed (never executed) and scanned for the device it needs. Triage
collects facts only; ``evalkit.judge.verdicts`` decides what they mean.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from evalkit.intake.extract import Extraction, extract
from evalkit.intake.static_scan import SyntaxProblem, scan, syntax_problem


@dataclass
class Triage:
    """The extraction, whether the code parses, and what it needs."""

    extraction: Extraction
    syntax: SyntaxProblem | None = None
    cuda_evidence: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def code(self) -> str:
        return self.extraction.code

    @property
    def needs_cuda(self) -> bool:
        return bool(self.cuda_evidence)


def triage(text: str) -> Triage:
    """Extract, parse and scan one answer's text."""
    extraction = extract(text)
    result = Triage(extraction=extraction, warnings=list(extraction.warnings))
    if not extraction.ok:
        return result
    result.syntax = syntax_problem(extraction.code)
    if result.syntax is not None:
        return result
    facts = scan(extraction.code)
    result.cuda_evidence = facts.cuda_evidence
    result.warnings.extend(facts.warnings)
    return result
