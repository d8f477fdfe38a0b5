"""Finding submissions on disk.

Layouts:
- ``<root>/<run>/<problem-id>/<sample>.(txt|md|py)``: a folder of runs;
- ``<run>/<problem-id>/<sample>.(txt|md|py)``: one run folder;
- ``<run>/<problem-id>/<sample>.txt``: one file (run and problem from its parent folders);
- ``<run>.jsonl`` with rows ``{"problem": ..., "sample": ..., "text": ...}``: a manifest;
- ``problems/<problem-id>/solutions/<name>.py``: the curated solutions, as run ``curated``;
- KernelBench's run folder ``runs/<run>/level_{L}_problem_{N}_sample_{S}_kernel.py``: each file is sample
  ``S`` of the problem that records ``kernelbench_level = L`` and ``kernelbench_number = N`` (written by
  ``evalkit problems import``); its ``*_prompt.txt`` files and ``eval_results.json`` are not answers. A kernel
  whose level and number several problems record stops discovery with a ProblemError naming them.
A folder of runs may mix run folders (of either kind) and ``.jsonl`` manifests.

Layout warnings (files that are ignored, kernels of no known problem) are logged as they are found (at
WARNING, which ``evalkit`` shows on stderr) and kept in ``Discovered.notes``.

Trusted side; reads submission files / manifests as text; never runs submission code.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

from evalkit.records import CURATED_RUN, EvalkitError, Submission
from evalkit.sources.kernelbench_layout import KernelFile, is_prompt_file, kernel_file, problems_by_origin
from evalkit.sources.problems import Problem, ProblemError, get_problem
from evalkit.sources.textio import UnreadableText, normalise_newlines, read_text

logger = logging.getLogger(__name__)

SUFFIXES = (".txt", ".md", ".py")
_LISTED = 10  # files named in one warning before "and N more"


class SubmissionError(EvalkitError):
    """A submission path or manifest cannot be used; the message says which and why."""


@dataclass
class Discovered:
    submissions: list[Submission] = field(default_factory=list)
    unreadable: list[tuple[Submission, str]] = field(default_factory=list)  # (placeholder, reason)
    warnings: dict[str, list[str]] = field(default_factory=dict)  # path -> decoding warnings (go into its row)
    notes: list[str] = field(default_factory=list)  # layout warnings, each also logged when found

    def note(self, message: str) -> None:
        """Keep and log (at WARNING) a warning about the layout, not about one submission's text."""
        self.notes.append(message)
        logger.warning("%s", message)


def discover(path: Path, problems: dict[str, Problem]) -> Discovered:
    """Every submission under ``path``, sorted by (problem, run, sample; numbered samples in numeric order)."""
    if not path.exists():
        raise SubmissionError(f"{path}: no such file or folder")
    found = Discovered()
    if path.is_file():
        _add_file_or_manifest(path, problems, found)
    elif _is_problems_root(path):
        for problem_dir in sorted(p for p in path.iterdir() if (p / "solutions").is_dir()):
            _add_problem_folder(problem_dir / "solutions", CURATED_RUN, problem_dir.name, problems, found)
    elif _is_run_folder(path, problems):
        _add_run_folder(path, path.name, problems, found)
    else:
        for child in sorted(path.iterdir()):
            if child.name.startswith((".", "_")):
                continue
            if child.is_dir():
                _add_run_folder(child, child.name, problems, found)
            elif child.suffix == ".jsonl":
                _add_manifest(child, problems, found)
    found.submissions.sort(key=lambda s: (s.problem, s.run, _sample_order(s.sample)))
    return found


def _sample_order(sample: str) -> tuple[int, int, str]:
    """Numbered samples (KernelBench's 0, 1, ... 10) in numeric order, before named ones."""
    return (0, int(sample), "") if sample.isascii() and sample.isdigit() else (1, 0, sample)


def _is_problems_root(path: Path) -> bool:
    return any((child / "reference.py").is_file() for child in path.iterdir() if child.is_dir())


def _is_run_folder(path: Path, problems: dict[str, Problem]) -> bool:
    return any((child.is_dir() and child.name in problems) or (child.is_file() and kernel_file(child))
               for child in path.iterdir())


def _problem_id(name: str, problems: dict[str, Problem], where: Path) -> str:
    try:
        return get_problem(problems, name).id
    except ProblemError as err:
        raise SubmissionError(f"{where}: {err}") from err


def _add_run_folder(run_dir: Path, run: str, problems: dict[str, Problem], found: Discovered) -> None:
    for problem_dir in sorted(p for p in run_dir.iterdir() if p.is_dir() and not p.name.startswith(".")):
        _add_problem_folder(problem_dir, run, _problem_id(problem_dir.name, problems, problem_dir), problems, found)
    files = sorted(p for p in run_dir.iterdir() if p.is_file() and not p.name.startswith("."))
    kernels = [k for k in map(kernel_file, files) if k is not None]
    _add_kernel_files(run_dir, run, kernels, problems, found)
    stray = [p.name for p in files if p.suffix in SUFFIXES and not kernel_file(p) and not is_prompt_file(p)]
    if stray:
        found.note(f"{run_dir}: files directly in the run folder are ignored ({_listed(stray)}); put them under "
                   f"{run_dir}/<problem-id>/, or name them as KernelBench does: "
                   f"level_<L>_problem_<N>_sample_<S>_kernel.py")


def _listed(names: list[str]) -> str:
    more = f", and {len(names) - _LISTED} more" if len(names) > _LISTED else ""
    return ", ".join(names[:_LISTED]) + more


def _add_kernel_files(run_dir: Path, run: str, kernels: list[KernelFile], problems: dict[str, Problem],
                      found: Discovered) -> None:
    """Each KernelBench kernel as sample S of the problem recording its level and number; one warning per
    level for those no problem records; ProblemError when several problems record one of them."""
    by_origin = problems_by_origin(problems.values(), kernels)
    unknown: dict[int, list[KernelFile]] = {}
    for kernel in sorted(kernels, key=lambda k: (k.level, k.number, k.sample)):
        problem = by_origin.get((kernel.level, kernel.number))
        if problem is None:
            unknown.setdefault(kernel.level, []).append(kernel)
        else:
            _add_text_file(kernel.path, run, problem.id, found, sample=str(kernel.sample))
    for level, files in sorted(unknown.items()):
        found.note(f"{run_dir}: {len(files)} KernelBench kernel file(s) of level {level} are not judged: "
                   f"{_unknown_text(files, problems)}")


def _unknown_text(files: list[KernelFile], problems: dict[str, Problem]) -> str:
    """Why ``files`` (of one level) map to no problem, and what to do."""
    level = files[0].level
    numbers = sorted({k.number for k in files})
    where = next(iter(problems.values())).path.parent if problems else Path("problems")
    return (f"{_listed([k.path.name for k in files])}. No problem in {where} records kernelbench_level = {level} "
            f"with kernelbench_number {_listed([str(n) for n in numbers])}; import the level first: "
            f"`evalkit problems import path/to/KernelBench/KernelBench/level{level} --problems-dir {where}` "
            f"(see docs/problems.md)")


def _add_problem_folder(folder: Path, run: str, problem: str, problems: dict[str, Problem], found: Discovered) -> None:
    for file in sorted(folder.iterdir()):
        if file.is_file() and file.suffix in SUFFIXES:
            _add_text_file(file, run, problem, found)


def _add_file_or_manifest(path: Path, problems: dict[str, Problem], found: Discovered) -> None:
    if path.suffix == ".jsonl":
        _add_manifest(path, problems, found)
        return
    kernel = kernel_file(path)
    if kernel is not None:
        _add_kernel_file(kernel, problems, found)
        return
    parent = path.parent
    run = parent.parent.name if parent.parent.name else "default"
    if parent.name == "solutions" and (parent.parent / "reference.py").is_file():
        run, parent = CURATED_RUN, parent.parent
    _add_text_file(path, run, _problem_id(parent.name, problems, path), found)


def _add_kernel_file(kernel: KernelFile, problems: dict[str, Problem], found: Discovered) -> None:
    """One KernelBench kernel file given alone: one problem must record its level and number."""
    problem = problems_by_origin(problems.values(), [kernel]).get((kernel.level, kernel.number))
    if problem is None:
        raise SubmissionError(f"{kernel.path}: KernelBench level {kernel.level} problem {kernel.number} is not "
                              f"judged: {_unknown_text([kernel], problems)}")
    run = kernel.path.parent.name or "default"
    _add_text_file(kernel.path, run, problem.id, found, sample=str(kernel.sample))


def _add_text_file(path: Path, run: str, problem: str, found: Discovered, sample: str | None = None) -> None:
    sample = path.stem if sample is None else sample
    try:
        text, warnings = read_text(path)
    except UnreadableText as err:
        found.unreadable.append((Submission(run, problem, sample, str(path), ""), str(err)))
        return
    if warnings:
        found.warnings[str(path)] = warnings
    found.submissions.append(Submission(run=run, problem=problem, sample=sample, path=str(path), text=text))


def _add_manifest(path: Path, problems: dict[str, Problem], found: Discovered) -> None:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise SubmissionError(f"{path}: cannot read the manifest ({err})") from err
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            row = json.loads(line)
        except ValueError as err:
            raise SubmissionError(f"{where}: not valid JSON ({err})") from err
        if not isinstance(row, dict) or not isinstance(row.get("problem"), str) or not isinstance(row.get("text"), str):
            raise SubmissionError(f'{where}: each row needs "problem" and "text" strings (and optionally "sample")')
        problem = _problem_id(row["problem"], problems, Path(where))
        sample = str(row.get("sample", number))
        found.submissions.append(Submission(run=path.stem, problem=problem, sample=sample, path=where,
                                            text=normalise_newlines(row["text"])))
