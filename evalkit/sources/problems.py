"""Problem folders: loading one, discovering them all, finding one by id (with "did you mean").

Trusted side; reads problem folders / files; never runs submission code. It imports a problem folder's own
reference.py, trusted problem code: the folders an operator gives (``--problems``). A problem given as text
(``Problem.from_source``, ``reference_code`` over HTTP) is untrusted (``Problem.trusted`` false): this process never
imports it (``load_module`` refuses), its reference runs in a sandbox (``evalkit.judge.sandboxed_reference``).

A problem is a folder ``<root>/<id>/`` holding ``reference.py`` (a KernelBench module:
``class Model(nn.Module)``, ``get_inputs()``, ``get_init_inputs()``) and an optional
``problem.toml`` of metadata (``title``, ``source``, ``level``, ``tags``, and the KernelBench origin
``kernelbench_*`` that ``evalkit problems import`` records) and judging settings, all at the top level. docs/problems.md documents every key and default; the settings are declared once, in
``evalkit.sources.settings``. Scaffolding lives in ``scaffold``, KernelBench import in ``kernelbench``. A problem
given as text (``Problem.from_source``) is kept as such a folder, named by its content's hash, in the cache.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import importlib.util
import itertools
import json
import logging
import re
import sys
import tempfile
import traceback
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from evalkit.sources.errors import ProblemError
from evalkit.sources.origin import ORIGIN_KEYS, KernelBenchOrigin, parse_origin
from evalkit.sources.settings import SETTING_KEYS, ProblemSettings, default_cache_dir, parse_settings

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

__all__ = ["METADATA_KEYS", "REFERENCE_FILE", "TOML_FILE", "TOML_KEYS", "KernelBenchOrigin", "Problem",
           "ProblemError", "ProblemSettings", "discover_problems", "get_problem", "load_problem", "problem_folders",
           "unknown_problem", "where_in"]

logger = logging.getLogger(__name__)

REFERENCE_FILE = "reference.py"
TOML_FILE = "problem.toml"
METADATA_KEYS = ("title", "source", "level", "tags")
TOML_KEYS = METADATA_KEYS + ORIGIN_KEYS + SETTING_KEYS
_module_counter = itertools.count()


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
    kernelbench: KernelBenchOrigin | None = None  # which KernelBench problem this is, when recorded
    broken: str = ""  # why the folder cannot be used (``discover_problems(..., lenient=True)``); "" when it can
    trusted: bool = True  # False: given as text, its reference runs only in a sandbox (never ``load_module``)

    @classmethod
    def from_source(cls, reference_code: str, name: str | None = None, **settings: Any) -> "Problem":
        """A problem from a reference file's text (RL datasets carry it inline), with ``settings`` keyed as in
        problem.toml; the same text is the same problem (``evalkit.sources.inline``)."""
        return problem_from_source(reference_code, name, **settings)

    @property
    def kernelbench_level(self) -> int | None:
        return self.kernelbench.level if self.kernelbench else None

    @property
    def kernelbench_number(self) -> int | None:
        return self.kernelbench.number if self.kernelbench else None

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
        """Import reference.py under a fresh, unique module name (so every call re-reads the file); a
        ``ProblemError`` for an untrusted problem, whose reference runs only in a sandbox."""
        if not self.trusted:
            raise ProblemError(f"problem {self.id!r} was given as text: its reference is untrusted and runs only in a "
                               f"sandbox, never in this process (evalkit.judge.sandboxed_reference)")
        return _import_file(self.reference_path, self.id)

    def init_inputs_or_none(self) -> list[Any] | None:
        """``get_init_inputs()`` as a list, or None when reference.py cannot be loaded or that call fails.

        For work done ahead of judging (builds warmed by ``ModelNew(*init_inputs)``), where a broken
        reference is not an error yet: the judge stage reports it properly. None for an untrusted problem, whose
        init inputs only its sandboxed check finds (``sandboxed_reference.checked_init_inputs``).
        """
        if not self.trusted:
            return None
        try:
            module = self.load_module()
        except Exception as err:  # noqa: BLE001 - any failure of problem code means "not available"
            logger.debug("%s: no init inputs (%s: %s)", self.reference_path, type(err).__name__, err)
            return None
        try:
            return list(module.get_init_inputs())
        except Exception as err:  # noqa: BLE001 - any failure of problem code means "not available"
            logger.debug("%s: no init inputs (%s: %s)", self.reference_path, type(err).__name__, err)
            return None
        finally:  # asked once per answer built: a module kept per call would grow without end
            sys.modules.pop(module.__name__, None)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "title": self.title, "source": self.source, "level": self.level,
                "tags": list(self.tags), "path": str(self.path), "settings": dataclasses.asdict(self.settings),
                "kernelbench": self.kernelbench.to_dict() if self.kernelbench else None, "trusted": self.trusted}


# What a reference must define, and how to write each.
REQUIRED_NAMES = {"Model": "class Model(nn.Module)", "get_inputs": "get_inputs()",
                  "get_init_inputs": "get_init_inputs()"}


def check_module(module: types.ModuleType, where: str, then: str = "") -> None:
    """``ProblemError`` when the imported reference ``module`` (of the file ``where`` names) lacks one of
    ``REQUIRED_NAMES``; ``then`` ends its message (what to run once it is fixed)."""
    missing = [name for name in REQUIRED_NAMES if not callable(getattr(module, name, None))]
    if missing:
        wanted = " and ".join(REQUIRED_NAMES[name] for name in missing)
        raise ProblemError(f"{where}: defines no {', '.join(missing)}; every reference.py needs class "
                           f"Model(nn.Module), get_inputs() and get_init_inputs(): add {wanted} (see docs/problems.md)"
                           f"{then}")


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
    origin = parse_origin(data, toml_path)
    if meta["level"] is None and origin is not None:
        meta["level"] = origin.level
    settings = parse_settings(data, toml_path)
    return Problem(id=folder.name, path=folder, settings=settings, kernelbench=origin, **meta)


def problem_folders(root: Path) -> list[Path]:
    """The candidate problem folders under ``root``, sorted (hidden folders and __pycache__ left out)."""
    root = Path(root)
    if not root.is_dir():
        raise ProblemError(f"problems folder {root} does not exist; create it (`evalkit problems new <id>`) "
                           f"or point --problems-dir / EVALKIT_PROBLEMS at the right one")
    return sorted((p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")
                   and p.name != "__pycache__"), key=lambda p: p.name)


def discover_problems(root: Path, lenient: bool = False) -> dict[str, Problem]:
    """Every problem under ``root``, by id (sorted); one ProblemError lists every broken folder. ``lenient`` (scoring
    and listing): a folder with a reference.py but a broken problem.toml is kept as a ``Problem`` that says why
    (``broken``), with a warning naming it, so that answers to the other problems are judged and its own answers
    get a row saying why they were not; folders without a reference.py are still an error."""
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
            if not lenient:
                errors.append(str(err))
                continue
            logger.warning("problem %s is left out: %s", folder.name, err)
            problems[folder.name] = Problem(id=folder.name, path=folder, title=folder.name, broken=str(err))
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


# ---- problems given as text: kept as folders named by their content's hash, so the same reference is one
# problem (its builds and baselines cached once) however often it arrives

ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_]*$")


def validate_id(problem_id: str) -> str:
    """``problem_id`` if it is a valid problem id, else a ProblemError showing a valid one."""
    if not isinstance(problem_id, str) or not ID_PATTERN.match(problem_id):
        raise ProblemError(f"invalid problem id {problem_id!r}: use lowercase letters, digits and _ "
                           f"(starting with a letter or digit), e.g. 'conv2d_relu'")
    return problem_id


INLINE_FOLDER = "inline_problems"  # under the cache folder, unless a root is given
MAX_REFERENCE_BYTES = 1024 * 1024


def default_inline_root() -> Path:
    """Where problems given as text are kept: ``inline_problems`` in the cache folder."""
    return default_cache_dir() / INLINE_FOLDER


def problem_from_source(reference_code: str, name: str | None = None, root: Path | None = None, *,
                        from_client: bool = False, **settings: Any) -> Problem:
    """The problem whose reference.py is ``reference_code`` (and whose problem.toml holds ``settings``), kept in
    ``root/<hash>/<id>``; its id is ``name``, or ``inline_<hash>`` without one. ``ProblemError`` names what is wrong.
    ``from_client``: sent by a client of ``evalkit serve``: only judging settings, each within what a client may ask
    for (``settings.checked_client_value``), checked before anything is written and named as sent; and an id that
    ends in the content's hash whatever the name (``<name>_<hash>``), so that no client takes a name from another."""
    if not isinstance(reference_code, str) or not reference_code.strip():
        raise ProblemError("reference_code: expected the text of a reference file (class Model, get_inputs, "
                           f"get_init_inputs), got {type(reference_code).__name__} {reference_code!r:.40}")
    if len(reference_code.encode("utf-8", "surrogatepass")) > MAX_REFERENCE_BYTES:
        raise ProblemError(f"reference_code: {len(reference_code)} characters, more than a reference file's "
                           f"{MAX_REFERENCE_BYTES} bytes")
    if from_client:
        _check_client_settings(settings)
    toml = settings_toml(settings)
    digest = hashlib.sha256(f"{reference_code}\0{toml}".encode("utf-8", "surrogatepass")).hexdigest()[:16]
    problem_id = validate_id(name) if name is not None else "inline"
    if name is None or from_client:
        problem_id = f"{problem_id}_{digest}"
    folder = (root or default_inline_root()) / digest / problem_id
    if not (folder / REFERENCE_FILE).is_file():
        _write_folder(folder, reference_code, toml)
    return dataclasses.replace(load_problem(folder), trusted=False)


def _check_client_settings(settings: dict[str, Any]) -> None:
    """A client's settings: judging settings only, each within its declared bounds and the server's."""
    from evalkit.sources.settings import checked_client_value

    for key, value in settings.items():
        if key not in SETTING_KEYS:
            raise ProblemError(f"settings: unknown setting {key!r}{_did_you_mean(key, SETTING_KEYS)}; the settings "
                               f"are: {', '.join(SETTING_KEYS)}")
        try:
            checked_client_value(key, value)
        except ValueError as wrong:
            raise ProblemError(f"settings: {wrong}") from None


def settings_toml(settings: dict[str, Any]) -> str:
    """``settings`` as problem.toml lines (``load_problem`` checks each key and value as a folder's)."""
    lines = []
    for key, value in sorted(settings.items()):
        if not isinstance(value, (bool, int, float, str)) or (isinstance(value, float) and value != value):
            raise ProblemError(f"setting {key!r}: {value!r} is not a number, a string or a boolean")
        lines.append(f"{key} = {json.dumps(value)}")
    return "\n".join(lines) + ("\n" if lines else "")


def _write_folder(folder: Path, reference_code: str, toml: str) -> None:
    """Write the folder whole, then move it in place: a concurrent caller finds it complete or not at all."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".writing-", dir=folder.parent))
    (staging / REFERENCE_FILE).write_text(reference_code, encoding="utf-8", errors="surrogatepass")
    (staging / TOML_FILE).write_text(toml, encoding="utf-8")
    try:
        staging.rename(folder)
    except OSError:  # another caller wrote the same content first
        for file in staging.iterdir():
            file.unlink()
        staging.rmdir()
