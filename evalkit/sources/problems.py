"""Problem folders: loading, settings, discovery, scaffolding and KernelBench import.

A problem is a folder ``<root>/<id>/`` holding ``reference.py`` (a KernelBench module:
``class Model(nn.Module)``, ``get_inputs()``, ``get_init_inputs()``) and an optional
``problem.toml``. The folder name is the problem id.

``problem.toml`` (every key optional and at the top level, no tables; unknown keys are an error)::

    title = "Conv2d + GELU"        # default: the id
    source = "KernelBench v0.1 level2/67_Conv2d_GELU_GlobalAvgPool"   # default: ""
    level = 2                      # a positive integer; default: none
    tags = ["conv2d", "fused"]     # default: []
    # judging settings (ProblemSettings), next to the metadata:
    atol = 1e-2                    # absolute tolerance        (default 1e-2, KernelBench v0.1)
    rtol = 1e-2                    # relative tolerance        (default 1e-2, KernelBench v0.1)
    correctness_trials = 5         # input seeds checked       (default 5)
    timing_trials = 50             # timed calls               (default 50)
    warmup_trials = 5              # untimed calls before them (default 5)
    build_timeout_s = 900.0        # seconds to build one submission               (default 900)
    run_timeout_s = 300.0          # seconds per stage of judging one submission   (default 300)
    flops = 76e9                   # FLOP per forward call, a lower bound          (default: unknown)
    min_bytes = 0.27e9             # bytes a forward call must move, a lower bound (default: unknown)

The same defaults are documented in ``docs/problems.md``.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import importlib.util
import itertools
import logging
import re
import sys
import traceback
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

logger = logging.getLogger(__name__)

REFERENCE_FILE = "reference.py"
TOML_FILE = "problem.toml"
ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_]*$")
METADATA_KEYS = ("title", "source", "level", "tags")
_module_counter = itertools.count()


class ProblemError(Exception):
    """A problem folder or file cannot be used; the message names it and says what to do."""


@dataclass(frozen=True)
class ProblemSettings:
    """Judging settings of one problem (top-level keys of problem.toml)."""

    atol: float = 1e-2
    rtol: float = 1e-2
    correctness_trials: int = 5
    timing_trials: int = 50
    warmup_trials: int = 5
    build_timeout_s: float = 900.0
    run_timeout_s: float = 300.0
    flops: float | None = None
    min_bytes: float | None = None


SETTING_KEYS = tuple(f.name for f in dataclasses.fields(ProblemSettings))
TOML_KEYS = METADATA_KEYS + SETTING_KEYS
# key -> (kind, lower bound, whether the bound itself is allowed)
_SETTING_RULES: dict[str, tuple[type, float, bool]] = {
    "atol": (float, 0, True), "rtol": (float, 0, True),
    "correctness_trials": (int, 1, True), "timing_trials": (int, 1, True), "warmup_trials": (int, 0, True),
    "build_timeout_s": (float, 0, False), "run_timeout_s": (float, 0, False),
    "flops": (float, 0, False), "min_bytes": (float, 0, False),
}


@dataclass(frozen=True)
class Problem:
    """One problem folder, loaded and validated (the reference module is imported lazily)."""

    id: str
    path: Path
    title: str
    source: str = ""
    level: int | None = None
    tags: tuple[str, ...] = ()
    settings: ProblemSettings = field(default_factory=ProblemSettings)

    @property
    def reference_path(self) -> Path:
        return self.path / REFERENCE_FILE

    @property
    def toml_path(self) -> Path:
        return self.path / TOML_FILE

    @property
    def sha256(self) -> str:
        """Hash of reference.py and problem.toml (if any): changes whenever either file does."""
        digest = hashlib.sha256()
        for file in (self.reference_path, self.toml_path):
            data = file.read_bytes() if file.is_file() else b""
            digest.update(f"{file.name}:{len(data)}:".encode())
            digest.update(data)
        return digest.hexdigest()

    def load_module(self) -> types.ModuleType:
        """Import reference.py under a fresh, unique module name (so every call re-reads the file)."""
        return _import_file(self.reference_path, self.id)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "title": self.title, "source": self.source, "level": self.level,
                "tags": list(self.tags), "path": str(self.path), "settings": dataclasses.asdict(self.settings)}



def _import_file(path: Path, problem_id: str) -> types.ModuleType:
    try:
        source = path.read_bytes()
    except OSError as err:
        raise ProblemError(f"{path}: cannot read it ({err.strerror or err})") from err
    try:
        code = compile(source, str(path), "exec", dont_inherit=True)
    except SyntaxError as err:
        text = f"\n    {err.text.strip()}" if err.text and err.text.strip() else ""
        raise ProblemError(f"{path}:{err.lineno}: syntax error: {err.msg}{text}\n"
                           f"Fix line {err.lineno} of {path}.") from err
    safe = re.sub(r"\W", "_", problem_id)
    name = f"evalkit_problem_{safe}_{next(_module_counter)}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None  # a .py path always gives a spec
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # unique per load: dataclasses/pickle inside reference.py can find it
    try:
        exec(code, module.__dict__)  # noqa: S102 - reference.py is trusted problem code
    except (Exception, SystemExit) as err:
        del sys.modules[name]
        raise ProblemError(f"{path}: importing it raised {type(err).__name__}: {err}"
                           f"{where_in(err, path)}") from err
    return module


def where_in(err: BaseException, path: Path) -> str:
    """`` (line N of reference.py)`` for the deepest frame of ``err``'s traceback in ``path``, or ``""``."""
    lines = [frame.lineno for frame in traceback.extract_tb(err.__traceback__)
             if Path(frame.filename) == path and frame.lineno]
    return f" (line {lines[-1]} of {path.name})" if lines else ""



def _did_you_mean(word: str, choices: list[str] | tuple[str, ...]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _read_toml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except tomllib.TOMLDecodeError as err:
        raise ProblemError(f"{path}: not valid TOML: {err}") from err
    except (OSError, UnicodeDecodeError) as err:
        raise ProblemError(f"{path}: cannot read it ({err})") from err


def _check_unknown(data: dict[str, Any], path: Path) -> None:
    for key, value in data.items():
        if key in TOML_KEYS:
            continue
        if isinstance(value, dict):
            raise ProblemError(f"{path}: unexpected table [{key}]; problem.toml has no tables: write its "
                               f"keys ({', '.join(value) or 'none'}) at the top level (see docs/problems.md)")
        raise ProblemError(f"{path}: unknown key '{key}'{_did_you_mean(key, TOML_KEYS)}; "
                           f"allowed keys: {', '.join(TOML_KEYS)}")


def _parse_setting(key: str, value: Any, path: Path) -> int | float:
    kind, low, inclusive = _SETTING_RULES[key]
    if kind is int and (not isinstance(value, int) or isinstance(value, bool)):
        raise ProblemError(f"{path}: {key!r} must be an integer, got {value!r}")
    if kind is float and not _is_number(value):
        raise ProblemError(f"{path}: {key!r} must be a number, got {value!r}")
    if value != value or value in (float("inf"), float("-inf")) or value < low or (value == low and not inclusive):
        bound = f">= {low}" if inclusive else f"> {low}"
        raise ProblemError(f"{path}: {key!r} must be a finite number {bound}, got {value!r}")
    return value if kind is int else float(value)


def parse_settings(data: dict[str, Any], path: Path) -> ProblemSettings:
    """The settings among the keys of ``path`` (already checked for unknown keys), over the defaults."""
    return ProblemSettings(**{key: _parse_setting(key, value, path) for key, value in data.items()
                              if key in SETTING_KEYS})


def _parse_metadata(data: dict[str, Any], path: Path, problem_id: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"title": data.get("title", problem_id), "source": data.get("source", "")}
    for key in ("title", "source"):
        if not isinstance(meta[key], str):
            raise ProblemError(f"{path}: '{key}' must be a string, got {meta[key]!r}")
    level = data.get("level")
    if level is not None and (not isinstance(level, int) or isinstance(level, bool) or level < 1):
        raise ProblemError(f"{path}: 'level' must be a positive integer, got {level!r}")
    tags = data.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise ProblemError(f"{path}: 'tags' must be a list of strings, got {tags!r}")
    meta.update(level=level, tags=tuple(tags))
    return meta


def load_problem(folder: Path) -> Problem:
    """The problem in ``folder`` (its reference.py is checked to exist, not imported)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ProblemError(f"{folder}: no such problem folder")
    if not (folder / REFERENCE_FILE).is_file():
        raise ProblemError(f"{folder}: no {REFERENCE_FILE}; every problem folder needs one "
                           f"(`evalkit problems new <id>` writes a template)")
    toml_path = folder / TOML_FILE
    data = _read_toml(toml_path)
    _check_unknown(data, toml_path)
    meta = _parse_metadata(data, toml_path, folder.name)
    settings = parse_settings(data, toml_path)
    return Problem(id=folder.name, path=folder, settings=settings, **meta)


def problem_folders(root: Path) -> list[Path]:
    """The candidate problem folders under ``root``, sorted (hidden folders and __pycache__ left out)."""
    root = Path(root)
    if not root.is_dir():
        raise ProblemError(f"problems folder {root} does not exist; create it (`evalkit problems new <id>`) "
                           f"or point --problems-dir / EVALKIT_PROBLEMS at the right one")
    return sorted((p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")
                   and p.name != "__pycache__"), key=lambda p: p.name)


def discover_problems(root: Path) -> dict[str, Problem]:
    """Every problem under ``root``, by id (sorted); one ProblemError lists every broken folder."""
    problems: dict[str, Problem] = {}
    missing: list[str] = []
    errors: list[str] = []
    for folder in problem_folders(root):
        if not (folder / REFERENCE_FILE).is_file():
            missing.append(folder.name)
            continue
        try:
            problems[folder.name] = load_problem(folder)
        except ProblemError as err:
            errors.append(str(err))
    if missing:
        errors.insert(0, f"{root}: folder(s) without {REFERENCE_FILE}: {', '.join(missing)}; add a "
                         f"{REFERENCE_FILE} to each, or move them out of the problems folder")
    if errors:
        raise ProblemError("\n".join(errors))
    return problems


def get_problem(problems: dict[str, Problem], problem_id: str) -> Problem:
    """``problems[problem_id]``, or a ProblemError suggesting the closest known id."""
    if problem_id in problems:
        return problems[problem_id]
    raise unknown_problem(problem_id, problems)


def unknown_problem(problem_id: str, known_ids: Iterable[str]) -> ProblemError:
    """The error for an id not among ``known_ids``, with the closest one suggested."""
    known = sorted(known_ids)
    if not known:
        return ProblemError(f"unknown problem '{problem_id}': no problems are loaded (check --problems-dir)")
    return ProblemError(f"unknown problem '{problem_id}'{_did_you_mean(problem_id, known)}; "
                        f"known: {', '.join(known)}")


_TEMPLATE_REFERENCE = '''\
"""{id}: describe what the model computes (this template is a Linear layer followed by ReLU)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """The reference computation; submissions must reproduce its output as `ModelNew`."""

    def __init__(self, features: int):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x))


batch_size = 16
features = 64


def get_inputs():
    return [torch.rand(batch_size, features)]


def get_init_inputs():
    return [features]
'''

_TEMPLATE_TOML = '''\
# Problem metadata; every key is optional (see docs/problems.md).
title = "{id}"
source = ""            # where the problem comes from, e.g. "KernelBench v0.1 level1/19_ReLU"
# level = 1            # KernelBench level, a positive integer
tags = []

# Judging settings; uncomment to change a default (the values shown are the defaults).
# atol = 1e-2               # absolute tolerance
# rtol = 1e-2               # relative tolerance
# correctness_trials = 5    # input seeds a submission must match
# timing_trials = 50        # timed calls
# warmup_trials = 5         # untimed calls before timing
# build_timeout_s = 900.0   # seconds to build one submission
# run_timeout_s = 300.0     # seconds per judging stage of one submission
# Lower bounds for the implausible-speedup check (default: unknown):
# flops = 1e9               # FLOP one forward call must do
# min_bytes = 1e6           # bytes one forward call must read and write (inputs + outputs)
'''


def validate_id(problem_id: str) -> str:
    if not ID_PATTERN.match(problem_id):
        raise ProblemError(f"invalid problem id '{problem_id}': use lowercase letters, digits and _ "
                           f"(starting with a letter or digit), e.g. 'conv2d_relu'")
    return problem_id


def scaffold_problem(root: Path, problem_id: str) -> Path:
    """Write ``root/<id>/`` with a template reference.py and a commented problem.toml; never overwrites."""
    folder = Path(root) / validate_id(problem_id)
    if folder.exists():
        raise ProblemError(f"{folder} already exists; refusing to overwrite it (choose another id or remove it)")
    folder.mkdir(parents=True)
    (folder / REFERENCE_FILE).write_text(_TEMPLATE_REFERENCE.format(id=problem_id), encoding="utf-8")
    (folder / TOML_FILE).write_text(_TEMPLATE_TOML.format(id=problem_id), encoding="utf-8")
    logger.info("created %s", folder)
    return folder


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


def _import_one(file: Path, root: Path, taken: set[str], say: Callable[[str], None]) -> Path | None:
    match = KERNELBENCH_NAME.match(file.name)
    if not match or not kernelbench_id(match.group(2)):
        say(f"skipped {file}: not a KernelBench problem file (<n>_<Name>.py)")
        return None
    number, name = match.groups()
    level = _level_of(file)
    problem_id = kernelbench_id(name)
    data = file.read_bytes()
    if problem_id in taken:
        existing = root / problem_id / REFERENCE_FILE
        if existing.is_file() and existing.read_bytes() == data:
            say(f"skipped {file}: already imported as {root / problem_id}")
            return None
        problem_id = f"{problem_id}_l{level}_{number}" if level is not None else f"{problem_id}_{number}"
        if problem_id in taken:
            say(f"skipped {file}: {root / problem_id} already exists")
            return None
    folder = root / problem_id
    folder.mkdir(parents=True)
    (folder / REFERENCE_FILE).write_bytes(data)
    lines = ["# Imported from KernelBench by `evalkit problems import`; see docs/problems.md for the keys.",
             f"title = {_toml_string(' '.join(name.replace('_', ' ').split()))}",
             f"source = {_toml_string(file.name)}"]
    lines += [f"level = {level}"] if level is not None else []
    lines += ['tags = ["kernelbench"]', "",
              "# flops = ...      # FLOP per forward call (lower bound), for the implausible-speedup check",
              "# min_bytes = ...  # bytes per forward call (lower bound)", ""]
    (folder / TOML_FILE).write_text("\n".join(lines), encoding="utf-8")
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
