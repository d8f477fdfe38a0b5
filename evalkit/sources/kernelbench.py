"""``evalkit problems import``: KernelBench ``<n>_<Name>.py`` files -> problem folders.

Trusted side; reads KernelBench files and writes problem folders; never runs submission code (nor the
imported files: they are copied verbatim).
"""

from __future__ import annotations

import logging
import re
import shutil
from pathlib import Path
from typing import Callable

from evalkit.sources.errors import ProblemError
from evalkit.sources.problems import REFERENCE_FILE, TOML_FILE
from evalkit.sources.settings import commented_toml

logger = logging.getLogger(__name__)

UNSET_BY_DEFAULT = ("flops", "min_bytes")  # the plausibility bounds an importer should fill in
KERNELBENCH_NAME = re.compile(r"^(\d+)_(\w+)\.py$")
_LEVEL_DIR = re.compile(r"^level(\d+)$")


def kernelbench_id(name: str) -> str:
    """``ConvTranspose2d_GELU_GroupNorm`` -> ``convtranspose2d_gelu_groupnorm`` (lowercase, ``__`` -> ``_``)."""
    return re.sub(r"_+", "_", re.sub(r"[^a-z0-9_]", "_", name.lower())).strip("_")


def _toml_string(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + "".join(c if c >= " " and c != "\x7f" else f"\\u{ord(c):04x}" for c in escaped) + '"'


def _kernelbench_files(source: Path) -> list[Path]:
    if source.is_file():
        return [source]
    if not source.is_dir():
        raise ProblemError(f"{source}: no such file or folder to import")
    return sorted(p for p in source.rglob("*.py")
                  if not any(part.startswith(".") or part == "__pycache__" for part in p.relative_to(source).parts))


def _level_of(file: Path) -> int | None:
    for parent in file.resolve().parents:
        match = _LEVEL_DIR.match(parent.name)
        if match:
            return int(match.group(1))
    return None


def _free_id(file: Path, number: str, name: str, root: Path, taken: set[str],
             say: Callable[[str], None]) -> str | None:
    """The id for ``file`` (``<number>_<name>.py``): its own, or with its level and number appended when a
    different problem has that one; None (and why, to ``say``) when ``file`` is already imported or both
    ids are taken."""
    problem_id = kernelbench_id(name)
    if problem_id not in taken:
        return problem_id
    existing = root / problem_id / REFERENCE_FILE
    if existing.is_file() and existing.read_bytes() == file.read_bytes():
        say(f"skipped {file}: already imported as {root / problem_id}")
        return None
    level = _level_of(file)
    problem_id = f"{problem_id}_l{level}_{number}" if level is not None else f"{problem_id}_{number}"
    if problem_id in taken:
        say(f"skipped {file}: {root / problem_id} already exists")
        return None
    return problem_id


def _problem_toml(file: Path, name: str) -> str:
    """problem.toml of an imported file: title, source, level (if known), tag, and the unset settings."""
    level = _level_of(file)
    lines = ["# Imported from KernelBench by `evalkit problems import`; see docs/problems.md for the keys.",
             f"title = {_toml_string(' '.join(name.replace('_', ' ').split()))}",
             f"source = {_toml_string(file.name)}"]
    lines += [f"level = {level}"] if level is not None else []
    lines += ['tags = ["kernelbench"]', "", *commented_toml(UNSET_BY_DEFAULT), ""]
    return "\n".join(lines)


def _import_one(file: Path, root: Path, taken: set[str], say: Callable[[str], None]) -> Path | None:
    match = KERNELBENCH_NAME.match(file.name)
    if not match or not kernelbench_id(match.group(2)):
        say(f"skipped {file}: not a KernelBench problem file (<n>_<Name>.py)")
        return None
    number, name = match.groups()
    problem_id = _free_id(file, number, name, root, taken, say)
    if problem_id is None:
        return None
    folder = root / problem_id
    folder.mkdir(parents=True)
    shutil.copyfile(file, folder / REFERENCE_FILE)
    (folder / TOML_FILE).write_text(_problem_toml(file, name), encoding="utf-8")
    taken.add(problem_id)
    say(f"imported {file} -> {folder}")
    return folder


def import_kernelbench(source: Path, root: Path, report: Callable[[str], None] | None = None) -> list[Path]:
    """Turn KernelBench ``<n>_<Name>.py`` files (one file, or a folder searched recursively) into folders.

    The id is ``Name`` lowercased with runs of ``_`` collapsed; when it is taken by a different problem
    the number (and level) is appended. Never overwrites. ``report`` receives one line per file.
    """
    say = report or logger.info
    source, root = Path(source), Path(root)
    files = _kernelbench_files(source)
    root.mkdir(parents=True, exist_ok=True)
    taken = {p.name for p in root.iterdir()}
    created = [folder for file in files if (folder := _import_one(file, root, taken, say)) is not None]
    say(f"imported {len(created)} of {len(files)} file(s) into {root}")
    return created
