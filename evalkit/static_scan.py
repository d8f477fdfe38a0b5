"""Cheap facts read from submission code without running it.

Only ever advisory: what a submission *does* is judged from what runs, never from this.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

_CUDA_PATTERNS = (
    (re.compile(r"\bcuda_sources\s*="), "passes cuda_sources to load_inline"),
    (re.compile(r"__global__"), "defines __global__ CUDA kernels"),
    (re.compile(r"\.cuda\(\)"), "calls .cuda()"),
    (re.compile(r"device\s*=\s*['\"]cuda"), "allocates on device='cuda'"),
    (re.compile(r"#include\s*[<\"]cuda"), "includes CUDA headers"),
)


@dataclass
class ScanResult:
    needs_cuda: bool
    cuda_evidence: list[str] = field(default_factory=list)


def scan(code: str) -> ScanResult:
    evidence = [why for pattern, why in _CUDA_PATTERNS if pattern.search(code)]
    return ScanResult(needs_cuda=bool(evidence), cuda_evidence=evidence)


@dataclass
class SyntaxProblem:
    line: int
    column: int
    message: str
    text: str


def syntax_problem(code: str) -> SyntaxProblem | None:
    """Parse (never execute) the code; return where it fails to parse, if it does."""
    try:
        ast.parse(code)
    except SyntaxError as err:
        return SyntaxProblem(line=err.lineno or 0, column=err.offset or 0, message=err.msg or "invalid syntax",
                             text=(err.text or "").rstrip("\n"))
    except ValueError as err:  # e.g. NUL bytes
        return SyntaxProblem(line=0, column=0, message=str(err), text="")
    return None
