"""``evalkit problems import``: KernelBench ``level{L}/{N}_{Name}.py`` files -> problem folders.

Trusted side; reads KernelBench files and writes problem folders; never runs submission code (nor the
imported files: they are copied verbatim, and parsed with ``ast`` only to compare them).

Each file becomes, in this order of preference (docs/problems.md, import):

1. nothing, when a problem already records its level and number (``kernelbench_level``/``_number``);
2. a link, when a problem without a recorded origin has the same code up to formatting, comments and
   docstrings (``kernelbench_layout.normal_form``): its problem.toml gets the ``kernelbench_*`` keys
   appended, and nothing else of it changes;
3. a new folder ``l{L}_{N}_{name}`` (``kernelbench_layout.stable_id``), never overwriting one.

``reference.py`` of a new folder is the KernelBench file byte for byte: its ``Model`` stays backend- and
dtype-neutral. A requested precision (``--precision``) is written into the new folder's problem.toml only; a
folder that was already there (present or linked) keeps its own, with a warning when it differs.

Files are taken in (level, number) order, and an id depends on its file alone, so the result does not
depend on the order files are found or imported in.
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from evalkit.sources.errors import ProblemError
from evalkit.sources.kernelbench_layout import (file_sha256, kernelbench_id, level_of, normal_form, origin_claims,
                                                problem_file_parts, shared_origin_text, stable_id)
from evalkit.sources.problems import REFERENCE_FILE, TOML_FILE, load_problem, problem_folders
from evalkit.sources.origin import KernelBenchOrigin, origin_toml
from evalkit.sources.settings import SETTINGS, commented_toml, describe, format_number, toml_string

__all__ = ["ImportOutcome", "import_kernelbench", "kernelbench_id"]

logger = logging.getLogger(__name__)

UNSET_BY_DEFAULT = ("flops", "min_bytes")  # the plausibility bounds an importer should fill in
Say = Callable[[str], None]


@dataclass(frozen=True)
class _Candidate:
    """A KernelBench problem file to import, with what its name and folder say."""

    file: Path
    level: int
    number: int
    name: str

    @property
    def origin_file(self) -> str:
        return f"level{self.level}/{self.file.name}"


@dataclass
class ImportOutcome:
    """What an import did, folder by folder (``present``: files some problem already is)."""

    created: list[Path] = field(default_factory=list)
    linked: list[Path] = field(default_factory=list)
    present: list[Path] = field(default_factory=list)
    skipped: list[Path] = field(default_factory=list)  # the KernelBench files left out, each said why
    kept_precision: list[Path] = field(default_factory=list)  # folders there before, judged in another precision

    def line(self, files: int, root: Path) -> str:
        return (f"imported {len(self.created)}, linked {len(self.linked)}, already present {len(self.present)}, "
                f"skipped {len(self.skipped)} of {files} file(s) into {root}")


@dataclass
class _Known:
    """The problems folder as the import sees it, kept up to date as folders are made and linked."""

    taken: set[str]
    by_origin: dict[tuple[int, int], Path] = field(default_factory=dict)
    code_of: dict[Path, str] = field(default_factory=dict)  # normal form of each usable problem's reference
    unlinked: set[Path] = field(default_factory=set)  # usable problems without a recorded origin
    precision_of: dict[Path, str] = field(default_factory=dict)  # the precision each usable problem is judged in

    def twin(self, code: str) -> Path | None:
        """The first (by name) problem without an origin whose code is ``code``."""
        return next((p for p in sorted(self.unlinked) if self.code_of[p] == code), None)

    def add(self, folder: Path, code: str, key: tuple[int, int], precision: str) -> None:
        self.taken.add(folder.name)
        self.code_of[folder] = code
        self.precision_of[folder] = precision
        self.by_origin[key] = folder
        self.unlinked.discard(folder)


def _survey(root: Path, say: Say) -> _Known:
    known = _Known(taken={p.name for p in root.iterdir()})
    loaded = []
    for folder in problem_folders(root):
        if not (folder / REFERENCE_FILE).is_file():
            continue
        try:
            problem = load_problem(folder)
        except ProblemError as err:
            say(f"note: {folder} is not considered for linking: {err}")
            continue
        loaded.append(problem)
        known.code_of[folder] = normal_form((folder / REFERENCE_FILE).read_bytes())
        known.precision_of[folder] = problem.settings.precision
        if problem.kernelbench is None:
            known.unlinked.add(folder)
    for key, claimants in origin_claims(loaded).items():  # by id: the first of folders sharing one stands for it
        known.by_origin[key] = claimants[0].path
        if len(claimants) > 1:
            say(f"warning: {shared_origin_text(key, claimants)} (`evalkit problems check` fails them; importing "
                f"compares the file with {claimants[0].path} only)")
    return known


def _kernelbench_files(source: Path) -> list[Path]:
    if source.is_file():
        return [source]
    if not source.is_dir():
        raise ProblemError(f"{source}: no such file or folder to import; give a KernelBench level folder "
                           f"(.../KernelBench/level1), the folder holding them, or one <n>_<Name>.py file")
    return sorted(p for p in source.rglob("*.py")
                  if not any(part.startswith(".") or part == "__pycache__" for part in p.relative_to(source).parts))


def _candidate(file: Path, level: int | None, say: Say) -> _Candidate | None:
    parts = problem_file_parts(file)
    if parts is None:
        say(f"skipped {file}: not a KernelBench problem file (<n>_<Name>.py)")
        return None
    level = level_of(file) or level
    if level is None:
        say(f"skipped {file}: its KernelBench level is unknown (no parent folder is named level<L>); "
            f"move it into one, or pass --level L")
        return None
    return _Candidate(file, level, *parts)


def _precision_toml(precision: str | None) -> list[str]:
    """The lines recording a requested precision (none when none was requested)."""
    if precision is None:
        return []
    return ["# Requested with `evalkit problems import --precision`; reference.py is KernelBench's file as is.",
            f"precision = {format_number(precision)}  # {describe('precision')}", ""]


def _problem_toml(candidate: _Candidate, origin: KernelBenchOrigin, precision: str | None) -> str:
    """problem.toml of an imported file: title, source, tag, its origin, the precision requested, and the unset
    settings."""
    version = f" {origin.version}" if origin.version else ""
    source = f"KernelBench{version} {origin.file.removesuffix('.py')}"
    lines = ["# Imported from KernelBench by `evalkit problems import`; see docs/problems.md for the keys.",
             f"title = {toml_string(' '.join(candidate.name.replace('_', ' ').split()))}",
             f"source = {toml_string(source)}",
             'tags = ["kernelbench"]', *origin_toml(origin), "", *_precision_toml(precision),
             *commented_toml(UNSET_BY_DEFAULT), ""]
    return "\n".join(lines)


def _create(candidate: _Candidate, origin: KernelBenchOrigin, folder: Path, precision: str | None) -> None:
    folder.mkdir(parents=True)
    shutil.copyfile(candidate.file, folder / REFERENCE_FILE)  # as is: a precision never edits the reference
    (folder / TOML_FILE).write_text(_problem_toml(candidate, origin, precision), encoding="utf-8")


def _link(folder: Path, origin: KernelBenchOrigin) -> None:
    """Append ``origin`` to ``folder``'s problem.toml; restore it and raise ProblemError when that breaks it."""
    toml = folder / TOML_FILE
    before = toml.read_text(encoding="utf-8") if toml.is_file() else None
    block = ["# KernelBench origin, recorded by `evalkit problems import`: reference.py has the code of",
             f"# {origin.file} up to formatting, comments and docstrings.", *origin_toml(origin), ""]
    head = (before + ("\n" if not before.endswith("\n") else "") + "\n") if before else ""
    toml.write_text(head + "\n".join(block), encoding="utf-8")
    try:
        load_problem(folder)
    except ProblemError:
        if before is None:
            toml.unlink()
        else:
            toml.write_text(before, encoding="utf-8")
        raise


@dataclass
class _Session:
    """One import: where to, what was asked (the version to record, the precision of new folders), what is there,
    where lines go, and what has happened so far."""

    root: Path
    version: str
    precision: str | None  # None: not asked for (new folders leave it unset, at its default)
    known: _Known
    say: Say
    outcome: ImportOutcome = field(default_factory=ImportOutcome)

    def check_precision(self, folder: Path) -> None:
        """Warn when ``folder``, there before this import, is judged in another precision than the one asked for."""
        kept = self.known.precision_of[folder]
        if self.precision is None or kept == self.precision:
            return
        self.say(f"warning: {folder} keeps its precision {kept} (`precision` in its {TOML_FILE}; "
                 f"{SETTINGS['precision'].default} when unset), not the {self.precision} asked for: an import never "
                 f"changes the settings of a folder that was already there. To judge it in {self.precision}, set "
                 f"`precision = {format_number(self.precision)}` in {folder / TOML_FILE}, or pass "
                 f"`--precision {self.precision}` to `evalkit score` for one run")
        self.outcome.kept_precision.append(folder)


def _already_present(candidate: _Candidate, code: str, session: _Session) -> None:
    folder = session.known.by_origin[(candidate.level, candidate.number)]
    if session.known.code_of.get(folder) == code:
        session.say(f"already present: {candidate.file} is {folder}")
        session.outcome.present.append(folder)
        session.check_precision(folder)
        return
    session.say(f"skipped {candidate.file}: {folder} is already {_what(candidate)}, but its code differs (edited there, "
            f"or another KernelBench version); left as is. To keep both, import into another --problems-dir")
    session.outcome.skipped.append(candidate.file)


def _link_twin(candidate: _Candidate, twin: Path, code: str, origin: KernelBenchOrigin, session: _Session) -> None:
    try:
        _link(twin, origin)
    except ProblemError as err:
        session.say(f"skipped {candidate.file}: cannot record {_what(candidate)} in {twin / TOML_FILE} ({err}); "
                f"fix that file and import again")
        session.outcome.skipped.append(candidate.file)
        return
    session.known.add(twin, code, (candidate.level, candidate.number), session.known.precision_of[twin])
    session.say(f"linked {candidate.file} -> {twin} (the same code up to formatting; its {TOML_FILE} now records "
            f"{_what(candidate)})")
    session.outcome.linked.append(twin)
    session.check_precision(twin)


def _create_new(candidate: _Candidate, code: str, origin: KernelBenchOrigin, session: _Session) -> None:
    folder = session.root / stable_id(candidate.level, candidate.number, candidate.name)
    if folder.name in session.known.taken:
        session.say(f"skipped {candidate.file}: {folder} exists but does not record {_what(candidate)}; move it away, or "
                f"add kernelbench_level = {candidate.level} and kernelbench_number = {candidate.number} to its "
                f"{TOML_FILE}")
        session.outcome.skipped.append(candidate.file)
        return
    _create(candidate, origin, folder, session.precision)
    session.known.add(folder, code, (candidate.level, candidate.number), session.precision or SETTINGS["precision"].default)
    session.say(f"imported {candidate.file} -> {folder}")
    session.outcome.created.append(folder)


def _what(candidate: _Candidate) -> str:
    return f"KernelBench level {candidate.level} problem {candidate.number}"


def _import_one(candidate: _Candidate, session: _Session) -> None:
    """Recognise, link or create the problem of ``candidate`` (see the module's docstring)."""
    code = normal_form(candidate.file.read_bytes())
    if (candidate.level, candidate.number) in session.known.by_origin:
        _already_present(candidate, code, session)
        return
    origin = KernelBenchOrigin(candidate.level, candidate.number, candidate.origin_file,
                               file_sha256(candidate.file), session.version)
    twin = session.known.twin(code)
    if twin is not None:
        _link_twin(candidate, twin, code, origin, session)
    else:
        _create_new(candidate, code, origin, session)


def _requested_precision(precision: str | None) -> str | None:
    choices = SETTINGS["precision"].choices
    if precision is not None and precision not in choices:
        raise ProblemError(f"precision {precision!r} is not one evalkit judges in; give one of "
                           f"{', '.join(choices)} (see docs/problems.md, Precision)")
    return precision


def import_kernelbench(source: Path, root: Path, report: Say | None = None, *, version: str = "",
                       level: int | None = None, precision: str | None = None) -> ImportOutcome:
    """Import KernelBench ``<n>_<Name>.py`` files (one file, or a folder searched recursively) into ``root``.

    The level comes from the nearest parent folder ``level<L>``, else from ``level``. ``version`` (e.g.
    ``"v0.1"``) is recorded as ``kernelbench_version``. ``precision`` (``"fp32"``, ``"fp16"`` or ``"bf16"``) is
    written into each new problem.toml; reference.py stays the KernelBench file as is, and a folder already there
    keeps its own precision (a warning says so when it differs). Never overwrites a file. ``report`` receives one
    line per file and a last line counting them (default: the log, at INFO).
    """
    say = report or logger.info
    source, root = Path(source), Path(root)
    precision = _requested_precision(precision)
    files = _kernelbench_files(source)
    root.mkdir(parents=True, exist_ok=True)
    session = _Session(root, version, precision, _survey(root, say), say)
    candidates = []
    for file in files:
        candidate = _candidate(file, level, say)
        if candidate is None:
            session.outcome.skipped.append(file)
        else:
            candidates.append(candidate)
    for candidate in sorted(candidates, key=lambda c: (c.level, c.number, c.name, str(c.file))):
        _import_one(candidate, session)
    say(session.outcome.line(len(files), root))
    return session.outcome
