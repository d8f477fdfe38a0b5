"""Trusted side: the checks a scoring run makes before it builds or judges anything, so that a bad input
fails at once with one line naming the file, the problem and what to do, and never as a row of every
submission. It imports a problem's own reference.py (trusted problem code), never submission code.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from evalkit.judge.torch_headers import stray_torch_header
from evalkit.schedule.options import ScoreError
from evalkit.sources.problems import Problem, ProblemError, check_module
from evalkit.sources.submissions import Discovered, SubmissionError

# The layouts ``evalkit.sources.submissions.discover`` understands.
LAYOUTS = ("a folder of runs <run>/<problem-id>/<sample>.txt|.md|.py", "one run folder <problem-id>/<sample>.txt",
           "one answer file", "a <run>.jsonl manifest of {\"problem\", \"sample\", \"text\"} rows",
           "a problems folder whose <problem-id>/solutions/ hold curated .py answers",
           "a KernelBench run folder runs/<name>/level_<L>_problem_<N>_sample_<S>_kernel.py (or runs/, or one such "
           "file), after `evalkit problems import` of level L")


def check_out_dir(out_dir: Path) -> None:
    """``--out`` must be a folder or not exist yet."""
    if out_dir.exists() and not out_dir.is_dir():
        raise ScoreError(f"--out {out_dir}: that is a file, not a report folder; give a folder "
                         f"(created if missing), e.g. --out {out_dir.with_name(out_dir.name + '-report')}")


def check_torch_include() -> None:
    """No precompiled header of torch's own in torch's include folder: every sandboxed build would fail."""
    stray = stray_torch_header()
    if stray is not None:
        raise ScoreError(f"{stray}: torch's include folder holds a precompiled header (left by load_inline("
                         f"use_pch=True) run by a user who may write there); every sandboxed build would fail trying "
                         f"to remove it. Delete it and {stray.with_suffix('.sign')} (evalkit precompiles its own: "
                         f"docs/judge.md, Builds), then run again")


def require_submissions(found: Discovered, where: Path) -> None:
    """At least one submission (readable or not) must have been found under ``where``."""
    if not found.submissions and not found.unreadable:
        raise SubmissionError(f"{where}: no submissions found; expected one of: {'; '.join(LAYOUTS)} "
                              f"(a <problem-id> folder must be named after a problem of --problems)")


def check_references(problems: Iterable[Problem]) -> dict[str, str]:
    """Import each problem's reference.py and check it defines Model, get_inputs and get_init_inputs.

    Returns what is wrong with each unusable problem, by id (its file, line and what to fix), so that its answers
    are reported as not judged while the others' are judged. Raises one ``ProblemError`` listing them all when
    no problem is usable: then the run would judge nothing.
    """
    problems = list(problems)
    errors = {}
    for problem in problems:
        if problem.broken:  # its problem.toml: answers to it cannot be judged
            errors[problem.id] = problem.broken
            continue
        try:
            check_reference(problem)
        except ProblemError as err:
            errors[problem.id] = str(err)
    if errors and len(errors) == len(problems):
        raise ProblemError("\n".join(errors.values()))
    return errors


def check_reference(problem: Problem) -> None:
    """``ProblemError`` when ``problem``'s reference.py (a trusted folder's) does not import, or lacks one of
    ``sources.problems.REQUIRED_NAMES``."""
    module = problem.load_module()  # a syntax error or an exception names the file and line
    check_module(module, str(problem.reference_path), f", then check it with `evalkit problems check {problem.id}`")
