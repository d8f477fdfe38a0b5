"""Finding submissions on disk.

Layouts:
- ``<root>/<run>/<problem-id>/<sample>.(txt|md|py)``: a folder of runs;
- ``<run>/<problem-id>/<sample>.(txt|md|py)``: one run folder;
- ``<run>/<problem-id>/<sample>.txt``: one file (run and problem from its parent folders);
- ``<run>.jsonl`` with rows ``{"problem": ..., "sample": ..., "text": ...}``: a manifest;
- ``problems/<problem-id>/solutions/<name>.py``: the curated solutions, as run ``curated``.
A folder of runs may mix run folders and ``.jsonl`` manifests.

Trusted side; reads submission files / manifests as text; never runs submission code.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from evalkit.sources.problems import Problem, ProblemError, get_problem
from evalkit.records import CURATED_RUN, Submission
from evalkit.sources.textio import UnreadableText, normalise_newlines, read_text

SUFFIXES = (".txt", ".md", ".py")


class SubmissionError(Exception):
    """A submission path or manifest cannot be used; the message says which and why."""


@dataclass
class Discovered:
    submissions: list[Submission] = field(default_factory=list)
    unreadable: list[tuple[Submission, str]] = field(default_factory=list)  # (placeholder, reason)
    warnings: dict[str, list[str]] = field(default_factory=dict)  # path -> decoding warnings


def discover(path: Path, problems: dict[str, Problem]) -> Discovered:
    """Every submission under ``path``, sorted by (problem, run, sample)."""
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
    found.submissions.sort(key=lambda s: (s.problem, s.run, s.sample))
    return found


def _is_problems_root(path: Path) -> bool:
    return any((child / "reference.py").is_file() for child in path.iterdir() if child.is_dir())


def _is_run_folder(path: Path, problems: dict[str, Problem]) -> bool:
    return any(child.is_dir() and child.name in problems for child in path.iterdir())


def _problem_id(name: str, problems: dict[str, Problem], where: Path) -> str:
    try:
        return get_problem(problems, name).id
    except ProblemError as err:
        raise SubmissionError(f"{where}: {err}") from err


def _add_run_folder(run_dir: Path, run: str, problems: dict[str, Problem], found: Discovered) -> None:
    for problem_dir in sorted(p for p in run_dir.iterdir() if p.is_dir() and not p.name.startswith(".")):
        _add_problem_folder(problem_dir, run, _problem_id(problem_dir.name, problems, problem_dir), problems, found)
    stray = [p.name for p in run_dir.iterdir() if p.is_file() and p.suffix in SUFFIXES]
    if stray:
        found.warnings[str(run_dir)] = [f"files directly in the run folder are ignored ({', '.join(stray[:5])}); "
                                        f"put them under {run_dir}/<problem-id>/"]


def _add_problem_folder(folder: Path, run: str, problem: str, problems: dict[str, Problem], found: Discovered) -> None:
    for file in sorted(folder.iterdir()):
        if file.is_file() and file.suffix in SUFFIXES:
            _add_text_file(file, run, problem, found)


def _add_file_or_manifest(path: Path, problems: dict[str, Problem], found: Discovered) -> None:
    if path.suffix == ".jsonl":
        _add_manifest(path, problems, found)
        return
    parent = path.parent
    run = parent.parent.name if parent.parent.name else "default"
    if parent.name == "solutions" and (parent.parent / "reference.py").is_file():
        run, parent = CURATED_RUN, parent.parent
    _add_text_file(path, run, _problem_id(parent.name, problems, path), found)


def _add_text_file(path: Path, run: str, problem: str, found: Discovered) -> None:
    try:
        text, warnings = read_text(path)
    except UnreadableText as err:
        found.unreadable.append((Submission(run, problem, path.stem, str(path), ""), str(err)))
        return
    if warnings:
        found.warnings[str(path)] = warnings
    found.submissions.append(Submission(run=run, problem=problem, sample=path.stem, path=str(path), text=text))


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
