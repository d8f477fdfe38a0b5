"""KernelBench's file layout, as facts evalkit reads: problem files ``level{L}/{N}_{Name}.py``, the kernels
of a run folder ``runs/<name>/level_{L}_problem_{N}_sample_{S}_kernel.py``, the ids evalkit gives imported
problems, the normal form of Python code that recognises a problem whatever its formatting, and which
problem folder a kernel answers (``problems_by_origin``; two folders recording one level and number are an
error, ``shared_origins``).

Trusted side; reads KernelBench files and file names; never runs submission code (code is parsed with
``ast``, never executed).
"""

from __future__ import annotations

import ast
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

from evalkit.sources.errors import ProblemError
from evalkit.sources.problems import Problem

PROBLEM_FILE = re.compile(r"^(\d+)_([^/\\]+)\.py$")  # level4 names hold '-' and '.': 1_EleutherAI-gpt-neo-2p7B_...
LEVEL_DIR = re.compile(r"^level(\d+)$")
KERNEL_FILE = re.compile(r"^level_(\d+)_problem_(\d+)_sample_(\d+)_kernel\.py$")
PROMPT_FILE = re.compile(r"^level_(\d+)_problem_(\d+)_sample_(\d+)_prompt\.txt$")  # written beside the kernels


@dataclass(frozen=True)
class KernelFile:
    """One kernel of a KernelBench run folder: level ``level``, problem ``number``, sample ``sample``."""

    path: Path
    level: int
    number: int
    sample: int


def kernel_file(path: Path) -> KernelFile | None:
    """``path`` as a KernelBench run-folder kernel (``level_1_problem_50_sample_0_kernel.py``), or None."""
    match = KERNEL_FILE.match(path.name)
    if not match:
        return None
    level, number, sample = (int(group) for group in match.groups())
    return KernelFile(path, level, number, sample)


def is_prompt_file(path: Path) -> bool:
    """Whether ``path`` is a prompt KernelBench logs beside the kernels (not an answer)."""
    return bool(PROMPT_FILE.match(path.name))


def kernelbench_id(name: str) -> str:
    """``ConvTranspose2d_GELU_GroupNorm`` -> ``convtranspose2d_gelu_groupnorm`` (lowercase; anything but
    letters and digits becomes ``_``; runs of ``_`` collapse)."""
    return re.sub(r"_+", "_", re.sub(r"[^a-z0-9_]", "_", name.lower())).strip("_")


def stable_id(level: int, number: int, name: str) -> str:
    """The id of KernelBench level ``level``, problem ``number``: ``l1_50_conv_standard_2d_...``.

    It depends on the file alone, so it is the same whatever else is imported, and in whatever order.
    """
    return f"l{level}_{number}_{kernelbench_id(name)}"


def problem_file_parts(path: Path) -> tuple[int, str] | None:
    """(number, name) of a KernelBench problem file ``<n>_<Name>.py``, or None."""
    match = PROBLEM_FILE.match(path.name)
    if not match or not kernelbench_id(match.group(2)):
        return None
    return int(match.group(1)), match.group(2)


def level_of(file: Path) -> int | None:
    """The level of the nearest parent folder named ``level<L>``, or None."""
    for parent in file.resolve().parents:
        match = LEVEL_DIR.match(parent.name)
        if match:
            return int(match.group(1))
    return None


# ---------------------------------------------------------------------------------------- normal form


def _drop_docstring(node: ast.AST) -> None:
    body = getattr(node, "body", None)
    if (isinstance(body, list) and body and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)):
        node.body = body[1:] or [ast.Pass()]  # type: ignore[attr-defined]


def normal_form(source: str | bytes) -> str:
    """The code of ``source`` with formatting, comments and docstrings normalised away: the ``ast.dump`` of
    the module once every module, class and function docstring is dropped. Two files with the same normal
    form define the same problem. A file that does not parse is its own normal form (its text)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return source.decode("utf-8", "replace") if isinstance(source, bytes) else source
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            _drop_docstring(node)
    return ast.dump(tree, annotate_fields=True, include_attributes=False)


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ---------------------------------------------------------------------------------------- lookups


def origin_claims(problems: Iterable[Problem]) -> dict[tuple[int, int], list[Problem]]:
    """{(KernelBench level, number): the problems recording it, by id} over the problems that record one."""
    claims: dict[tuple[int, int], list[Problem]] = {}
    for problem in sorted(problems, key=lambda p: p.id):
        if problem.kernelbench is not None:
            claims.setdefault((problem.kernelbench.level, problem.kernelbench.number), []).append(problem)
    return claims


def shared_origins(problems: Iterable[Problem]) -> dict[tuple[int, int], list[Problem]]:
    """The (KernelBench level, number) pairs that two or more of ``problems`` record, each with those problems."""
    return {key: claimants for key, claimants in origin_claims(problems).items() if len(claimants) > 1}


def shared_origin_text(key: tuple[int, int], claimants: list[Problem]) -> str:
    """What is wrong when ``claimants`` (two or more) all record KernelBench problem ``key``, and what to do."""
    level, number = key
    files = [str(p.toml_path) for p in claimants]
    both, either = ("both", "either") if len(files) == 2 else ("all", "any")
    return (f"{', '.join(files[:-1])} and {files[-1]} {both} record KernelBench level {level} problem {number} "
            f"(kernelbench_level = {level}, kernelbench_number = {number}), so a KernelBench run's "
            f"level_{level}_problem_{number}_sample_<S>_kernel.py could answer {either} of them; remove the folder "
            f"that duplicates another, or fix the kernelbench_number of the one that is another KernelBench problem")


def problems_by_origin(problems: Iterable[Problem], kernels: Iterable[KernelFile] = ()) -> dict[tuple[int, int],
                                                                                                Problem]:
    """{(KernelBench level, number): the problem recording it}, over the pairs exactly one problem records.

    Raises ProblemError when one of ``kernels`` maps to a pair that several problems record (naming the kernel
    file, the folders and what to do; every such pair in one message). A shared pair no kernel maps to is only
    left out: ``evalkit problems check`` reports it.
    """
    claims = origin_claims(problems)
    first: dict[tuple[int, int], KernelFile] = {}
    for kernel in sorted(kernels, key=lambda k: (k.level, k.number, k.sample)):
        if len(claims.get((kernel.level, kernel.number), ())) > 1:
            first.setdefault((kernel.level, kernel.number), kernel)
    if first:
        raise ProblemError("; and ".join(f"{kernel.path}: cannot tell which problem it answers: "
                                         f"{shared_origin_text(key, claims[key])}" for key, kernel in first.items())
                           + ". Nothing was judged")
    return {key: claimants[0] for key, claimants in claims.items() if len(claimants) == 1}


def kernelbench_numbers(problems: Mapping[str, Problem]) -> dict[str, tuple[int, int]]:
    """{problem id: (KernelBench level, number)}, for ``evalkit.report.kernelbench_export`` (which reads rows
    only and cannot load problem folders)."""
    return {problem_id: (problem.kernelbench.level, problem.kernelbench.number)
            for problem_id, problem in problems.items() if problem.kernelbench is not None}
