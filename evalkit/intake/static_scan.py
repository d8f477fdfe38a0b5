"""Trusted side, nothing runs: cheap facts read from submission code without running it.

Only ever advisory: what a submission *does* is judged from what runs, never from this. The code is
untrusted text, so every check is linear in its size: each pattern matches within one line and has no
nested quantifiers; the checks that span lines ("within n lines after ...") look up line numbers
instead of matching across lines.
"""

from __future__ import annotations

import ast
import re
from bisect import bisect_left
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
# "Extension built inside try/except": a load call on the first non-blank line after a line ending in
# ``try:``, or on one of the _GUARD_REACH lines below that one.
_TRY_LINE = re.compile(r"\btry:[^\S\n]*$", re.M)
_LOAD_CALL = re.compile(r"\bload(?:_inline)?[^\S\n]*\(")
_GUARD_REACH = 8
# "Fallback to PyTorch": an except line (ending in ":"), then, from its first non-blank line on, a run of
# indented lines, of which the first 1 + _FALLBACK_REACH are searched for a call F.x( / torch.x( / nn.x(.
_EXCEPT = re.compile(r"except\b")
_LIBRARY_CALL = re.compile(r"\b(?:F|torch|nn)\.\w+[^\S\n]*\(")
_FALLBACK_REACH = 6
MAX_CODE_BYTES = 2 * 1024 * 1024


@dataclass
class ScanResult:
    needs_cuda: bool
    cuda_evidence: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


# What could build or load native code when the module is imported; code naming none of these has nothing for the
# build stage to do (a JIT such as Triton's compiles at the first call, which the judge's first-call limit covers).
# Dynamic imports and exec are listed too: code that hides its calls gets the build sandbox, as before.
_BUILDS_AT_IMPORT = re.compile(
    r"load_inline|cpp_extension|\bload[^\S\n]*\(|ctypes|cffi|subprocess|\bos\.(?:system|popen|exec|spawn)|setuptools|"
    r"distutils|pybind11|cupy|numba|nvcc|\.so\b|cutlass|tilelang|importlib|__import__|\bexec[^\S\n]*\(|"
    r"\beval[^\S\n]*\(|\bcompile[^\S\n]*\(|\bopen[^\S\n]*\(")


def builds_nothing(code: str) -> bool:
    """Whether importing ``code`` (and constructing its ``ModelNew``) can build nothing: it names no compiler, no
    extension loader, no native library and no dynamic code. Such an answer skips the build sandbox."""
    return _BUILDS_AT_IMPORT.search(code) is None


def scan(code: str) -> ScanResult:
    evidence = [why for pattern, why in _CUDA_PATTERNS if pattern.search(code)]
    return ScanResult(needs_cuda=bool(evidence), cuda_evidence=evidence, warnings=_substitute_warnings(code))


def _substitute_warnings(code: str) -> list[str]:
    """Advisory only: whether a kernel of its own really ran is judged from the kernels launched."""
    warnings = []
    if "load_inline" not in code and "cpp_extension" not in code:
        warnings.append("static scan: the code builds no extension of its own (no load_inline)")
    lines = code.split("\n")
    if _guarded_build(code, lines):
        warnings.append("static scan: the extension is built inside try/except: a failed build may fall back silently")
    if _library_fallback(code, lines):
        warnings.append("static scan: an except-branch calls PyTorch: a possible fallback to library ops")
    calls = sorted({m.group(0).rstrip("( ") for m in _LIBRARY_COMPUTE.finditer(code)})
    if calls:
        warnings.append(f"static scan: calls PyTorch compute ops ({', '.join(calls[:5])})")
    return warnings


def _line_numbers(pattern: re.Pattern[str], code: str) -> list[int]:
    """0-based numbers of the lines where ``pattern`` matches, ascending, each once.

    After a hit the search goes on from the next line, so each line is searched once at most: linear as
    long as ``pattern`` is linear on one line and cannot run past its end.
    """
    numbers: list[int] = []
    line = counted = pos = 0
    while (match := pattern.search(code, pos)) is not None:
        line += code.count("\n", counted, match.start())
        counted = match.start()
        numbers.append(line)
        end_of_line = code.find("\n", match.start())
        if end_of_line < 0:
            break
        pos = end_of_line + 1
    return numbers


def _is_blank(line: str) -> bool:
    return not line or line.isspace()


def _first_non_blank(lines: list[str], start: int) -> int:
    while start < len(lines) and _is_blank(lines[start]):
        start += 1
    return start


def _any_in(numbers: list[int], first: int, last: int) -> bool:
    """Whether the ascending ``numbers`` hold one in ``first..last``."""
    i = bisect_left(numbers, first)
    return i < len(numbers) and numbers[i] <= last


def _guarded_build(code: str, lines: list[str]) -> bool:
    loads = _line_numbers(_LOAD_CALL, code)
    if not loads:
        return False
    for try_line in _line_numbers(_TRY_LINE, code):
        first = _first_non_blank(lines, try_line + 1)
        if _any_in(loads, first, first + _GUARD_REACH):
            return True
    return False


def _indented_run_end(lines: list[str], first: int, most: int) -> int:
    """The last of the (at most ``most``) consecutive indented lines from ``first`` on; first - 1 if none."""
    last = first - 1
    while last + 1 < min(len(lines), first + most) and lines[last + 1].startswith((" ", "\t")):
        last += 1
    return last


def _library_fallback(code: str, lines: list[str]) -> bool:
    calls = _line_numbers(_LIBRARY_CALL, code)
    if not calls:
        return False
    for except_line in _line_numbers(_EXCEPT, code):
        if not lines[except_line].rstrip().endswith(":"):
            continue
        first = _first_non_blank(lines, except_line + 1)
        if _any_in(calls, first, _indented_run_end(lines, first, 1 + _FALLBACK_REACH)):
            return True
    return False


@dataclass
class SyntaxProblem:
    line: int
    column: int
    message: str
    text: str


def syntax_problem(code: str) -> SyntaxProblem | None:
    """Parse (never execute) the code; return where it fails to parse, if it does.

    Code over ``MAX_CODE_BYTES`` is not parsed (parsing costs the trusted process about 400 MB per MB):
    no real ModelNew comes near it.
    """
    if len(code) > MAX_CODE_BYTES:
        return SyntaxProblem(line=0, column=0, text="",
                             message=f"the code is {len(code)} characters long, over the {MAX_CODE_BYTES} a "
                                     f"submission may have; evalkit does not parse it")
    try:
        ast.parse(code)
    except SyntaxError as err:
        return SyntaxProblem(line=err.lineno or 0, column=err.offset or 0, message=err.msg or "invalid syntax",
                             text=(err.text or "").rstrip("\n"))
    except ValueError as err:  # e.g. NUL bytes
        return SyntaxProblem(line=0, column=0, message=str(err), text="")
    except (RecursionError, MemoryError) as err:  # the parser's own limits on nesting, e.g. `not not ... x`
        return SyntaxProblem(line=0, column=0, message=f"too deeply nested to parse ({type(err).__name__})", text="")
    return None
