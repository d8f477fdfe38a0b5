"""Trusted side, nothing runs: cheap facts read from submission code without running it.

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


_LIBRARY_COMPUTE = re.compile(
    r"\b(?:F|functional|torch)\.(?:conv\w*|conv_transpose\w*|linear|matmul|mm|bmm|einsum|group_norm|gelu)\s*\("
    r"|\bnn\.(?:Conv\w*|ConvTranspose\w*|Linear|GroupNorm)\s*\(")
_GUARDED_BUILD = re.compile(r"\btry:\s*\n(?:[^\n]*\n){0,8}?[^\n]*\bload(?:_inline)?\s*\(")
_FALLBACK = re.compile(r"except\b[^\n]*:\s*\n(?:[ \t]+[^\n]*\n){0,6}?[ \t]+[^\n]*\b(?:F|torch|nn)\.\w+\s*\(")


@dataclass
class ScanResult:
    needs_cuda: bool
    cuda_evidence: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def scan(code: str) -> ScanResult:
    evidence = [why for pattern, why in _CUDA_PATTERNS if pattern.search(code)]
    return ScanResult(needs_cuda=bool(evidence), cuda_evidence=evidence, warnings=_substitute_warnings(code))


def _substitute_warnings(code: str) -> list[str]:
    """Advisory only: whether a kernel of its own really ran is judged from the kernels launched."""
    warnings = []
    if "load_inline" not in code and "cpp_extension" not in code:
        warnings.append("static scan: the code builds no extension of its own (no load_inline)")
    if _GUARDED_BUILD.search(code):
        warnings.append("static scan: the extension is built inside try/except: a failed build may fall back silently")
    if _FALLBACK.search(code):
        warnings.append("static scan: an except-branch calls PyTorch: a possible fallback to library ops")
    calls = sorted({m.group(0).rstrip("( ") for m in _LIBRARY_COMPUTE.finditer(code)})
    if calls:
        warnings.append(f"static scan: calls PyTorch compute ops ({', '.join(calls[:5])})")
    return warnings


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
