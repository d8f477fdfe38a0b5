"""Judging settings of a problem: the one declaration of every problem.toml setting, and its parsing.

Trusted side; reads problem folders / files; never runs submission code.

Each setting is a field of ``ProblemSettings`` declaring its default, its type (the annotation), its
lower bound, its unit, a one-line help text, whether a run may override it and under which older names. One name
from the command line to the worker: the field's name is the ``problem.toml`` key, the key of a run's overrides
(``JudgeOptions.overrides``), the Python API's keyword, the ``run.json`` key and the field the judge reads
(``JudgeSettings`` extends ``ProblemSettings``); its option is that name in dashes without its unit
(``timing_budget_s``: ``--timing-budget``), its older names stay as aliases (``--trials``, ``trials=``).

A run resolves each problem's settings once, at its start, into a ``JudgingPlan`` (``judging_plan``: the problem's
id, the sha256 of its files, its settings with the run's overrides applied); the plan travels to the judge, which
judges by it and stamps the rows, and ``run.json`` records every plan. Everything else that shows a setting reads it
from here: the ``problem.toml`` templates (``commented_toml``), the options of ``evalkit score``
(``evalkit.cli.score``, made from ``PER_RUN``), ``run.json`` (``evalkit.schedule.run_settings``) and, kept in step by
tests/sources/test_problems.py, the table in docs/problems.md.

The KernelBench origin of a problem (the ``kernelbench_`` keys) is declared beside them, in
``evalkit.sources.origin``.
"""

from __future__ import annotations

import dataclasses
import math
import os
import typing
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, Iterable, Mapping, Protocol

from evalkit.sources.errors import ProblemError


def default_cache_dir() -> Path:
    """Builds, baselines and problems given as text: ``$EVALKIT_CACHE``, else ``~/.cache/evalkit``."""
    return Path(os.environ.get("EVALKIT_CACHE", Path.home() / ".cache" / "evalkit"))

WITH_DEFAULT_HEADER = "# Judging settings; uncomment a line to change a default (the values shown are the defaults)."
WITHOUT_DEFAULT_HEADER = "# Settings without a default (unset unless given; the values shown are examples):"


def _setting(default: float | str | None, *, help: str, low: float = 0, inclusive: bool = True, unit: str = "",
             example: float | None = None, per_run: bool = True, old_names: tuple[str, ...] = (),
             shapes_timing: bool = False, choices: tuple[str, ...] = (), client_max: float | None = None) -> Any:
    """A ProblemSettings field: its default, plus what problem.toml accepts and shows for it; ``per_run``: a run
    may override it (an option of ``evalkit score``, a keyword of the API); ``old_names``: what it was called
    before, still accepted; ``shapes_timing``: it changes how a baseline is timed (part of its cache key);
    ``choices``: the words a text setting takes (a number setting has none, and ``low`` bounds it instead);
    ``client_max``: the most a client of ``evalkit serve`` may ask for (``checked_client_value``)."""
    return field(default=default, metadata={"low": low, "inclusive": inclusive, "unit": unit, "help": help,
                                            "example": example, "per_run": per_run, "old_names": old_names,
                                            "shapes_timing": shapes_timing, "choices": choices,
                                            "client_max": client_max})


# The precisions a problem is judged in, named as KernelBench names them, and the dtype each casts to.
PRECISIONS: tuple[str, ...] = ("fp32", "fp16", "bf16")
PRECISION_DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}
# A timing never ends before this many of its timed requests were checked (all of them, when fewer are made): the
# floor of ``timing_checks``, which the budget may bring a slow answer's count down to (``judge.repetitions``).
MIN_TIMING_CHECKS = 3
# atol = rtol where a problem sets neither, per precision, against the float64 oracle. fp32: KernelBench v0.1's; fp16:
# KernelBench's; bf16 wider: PyTorch's own bf16 result of convtranspose2d_gelu_groupnorm needs 2.2e-2 (docs/problems.md).
DEFAULT_TOLERANCES = {"fp32": 1e-2, "fp16": 1e-2, "bf16": 5e-2}
_BY_PRECISION = ", ".join(f"{name} {value:g}" for name, value in DEFAULT_TOLERANCES.items())


@dataclass(frozen=True)
class ProblemSettings:
    """Judging settings of one problem (top-level keys of problem.toml); each field declares one setting."""

    precision: str = _setting("fp32", choices=PRECISIONS, shapes_timing=True,
                              help="the dtype inputs, weights and outputs have: fp32, fp16 or bf16")
    atol: float | None = _setting(None, example=1e-2, client_max=1e3,
                                  help=f"absolute tolerance; unset: by precision ({_BY_PRECISION})")
    rtol: float | None = _setting(None, example=1e-2, client_max=1.0,
                                  help="relative tolerance; unset: by precision, as atol")
    correctness_trials: int = _setting(5, low=1, help="input seeds a submission must match", old_names=("trials",),
                                       client_max=100)
    timing_trials: int = _setting(100, low=1, help="timed requests at most (docs/judge.md, How many calls)",
                                  shapes_timing=True, client_max=1000)
    warmup_trials: int = _setting(5, low=0, help="untimed calls before timing", old_names=("warmup",),
                                  shapes_timing=True, client_max=100)
    min_timing_trials: int = _setting(10, low=1, help="timed requests before the median's precision may end a timing",
                                      shapes_timing=True, client_max=1000)
    timing_checks: int = _setting(10, low=MIN_TIMING_CHECKS, shapes_timing=True, client_max=1000,
                                  help="timed requests checked against the float64 reference before a timing may end "
                                       "(docs/judge.md, Nothing to predict)")
    timing_precision: float = _setting(1e-2, low=0, inclusive=False, shapes_timing=True, client_max=1.0,
                                       help="a timing ends once its median is known to this relative precision")
    timing_budget_s: float = _setting(10.0, low=0, inclusive=False, unit="s", shapes_timing=True, client_max=120.0,
                                      help="a timing ends once its timed requests took this long (3 at least)")
    request_length_ms: float = _setting(20.0, low=0, inclusive=False, unit="ms", shapes_timing=True, client_max=1000.0,
                                        help="a timed request makes calls for about this long by the reference's "
                                             "time (docs/judge.md, How many calls)")
    build_timeout_s: float = _setting(900.0, low=0, inclusive=False, unit="s", client_max=1800.0,
                                      help="time allowed to build one submission")
    run_timeout_s: float | None = _setting(None, low=0, inclusive=False, unit="s", example=60.0, client_max=600.0,
                                           help="time allowed per judging step (loading, one call); unset: "
                                                "derived from the reference's own time (docs/judge.md)",
                                           old_names=("timeout_s",))
    hang_limit_s: float = _setting(60.0, low=0, inclusive=False, unit="s", client_max=3600,
                                   help="the most one judging step of an answer may take when its limit is derived "
                                        "from the reference's time: what a hang costs at most (docs/judge.md)")
    flops: float | None = _setting(None, low=0, inclusive=False, unit="FLOP", example=1e9, per_run=False,
                                   client_max=1e18,
                                   help="work one forward call must do at least (implausible-speedup check)")
    min_bytes: float | None = _setting(None, low=0, inclusive=False, unit="bytes", example=1e6, per_run=False,
                                       client_max=1e15,
                                       help="memory one forward call must move at least: inputs + outputs")

    def tolerances(self) -> tuple[float, float]:
        """``(atol, rtol)``: the ones given, else the precision's default (``DEFAULT_TOLERANCES``)."""
        default = DEFAULT_TOLERANCES[self.precision]
        return (default if self.atol is None else self.atol, default if self.rtol is None else self.rtol)


@dataclass(frozen=True)
class Setting:
    """One problem.toml setting as ``ProblemSettings`` declares it."""

    key: str
    kind: type  # int, float or str
    default: float | str | None  # None: unset unless problem.toml gives it
    low: float  # lower bound
    inclusive: bool  # whether the bound itself is allowed
    unit: str
    help: str
    example: float | None  # the value templates show when there is no default
    per_run: bool  # a run may override it
    old_names: tuple[str, ...]  # what it was called before (a keyword, and an option in dashes)
    shapes_timing: bool  # it changes how a baseline is timed: part of a cached baseline's key
    choices: tuple[str, ...]  # the words a text setting takes; () for a number
    client_max: float | None  # the most a client of ``evalkit serve`` may ask for; None for a text setting

    @property
    def flags(self) -> tuple[str, ...]:
        """Its options on the command line: its name, then its older names, in dashes, without a unit suffix."""
        return tuple(_flag(name) for name in (self.key, *self.old_names))

    @property
    def shown(self) -> float | str | None:
        """The value templates and error messages show: the default, else the example."""
        return self.example if self.default is None else self.default


def _declared() -> dict[str, Setting]:
    hints = typing.get_type_hints(ProblemSettings)
    kinds = {int: int, str: str}
    return {f.name: Setting(key=f.name, kind=kinds.get(hints[f.name], float), default=f.default, **f.metadata)
            for f in dataclasses.fields(ProblemSettings)}


def _flag(name: str) -> str:
    return "--" + name.removesuffix("_s").replace("_", "-")


SETTINGS: dict[str, Setting] = _declared()
SETTING_KEYS = tuple(SETTINGS)
PER_RUN = tuple(key for key, setting in SETTINGS.items() if setting.per_run)  # what a run may override
OLD_NAMES = {old: key for key, setting in SETTINGS.items() for old in setting.old_names}  # older name -> name
TIMING_KEYS = tuple(key for key, setting in SETTINGS.items() if setting.shapes_timing)
# The least each of a run's own numbers (no problem's setting) may be: its option's bound and the Python API's.
RUN_MINIMUMS: dict[str, float] = {"judges": 1, "jobs": 0, "memory_gib": 0.5}


# ------------------------------------------------------------------------------------------- showing


def format_number(value: float | str | None) -> str:
    """``value`` as problem.toml and the docs write it (``1e-2``, ``900``, ``0.5``, ``1e9``, ``"bf16"``); ``none``
    for None."""
    if value is None:
        return "none"
    if isinstance(value, str):
        return toml_string(value)
    if isinstance(value, int) or (value.is_integer() and abs(value) < 1e4):
        return str(int(value))
    if 0.1 <= abs(value) < 1e4:
        return repr(value)
    return f"{Decimal(repr(value)).normalize():e}".replace("e+", "e")  # repr: the shortest exact digits


def default_text(key: str) -> str:
    """The declared default of setting ``key`` as text (``"1e-2"``, ``"900"``; ``"none"`` when unset)."""
    return format_number(SETTINGS[key].default)


def _bound_text(setting: Setting) -> str:
    return f"{'>=' if setting.inclusive else '>'} {format_number(setting.low)}"


def type_text(key: str) -> str:
    """What setting ``key`` accepts, e.g. ``"integer >= 1"`` or ``"number > 0"``."""
    setting = SETTINGS[key]
    if setting.choices:
        return "one of " + ", ".join(f'"{word}"' for word in setting.choices)
    return f"{'integer' if setting.kind is int else 'number'} {_bound_text(setting)}"


def describe(key: str) -> str:
    """The one-line help of setting ``key``, with its unit (``time allowed to ... [s]``)."""
    setting = SETTINGS[key]
    return f"{setting.help} [{setting.unit}]" if setting.unit else setting.help


def commented_toml(keys: Iterable[str] = SETTING_KEYS) -> list[str]:
    """problem.toml lines with ``keys`` commented out: first those with a default, shown at it, then those
    without one, shown at an example value; each group under a header saying which it is (uncommented,
    the first group parses back to the defaults)."""
    chosen = [SETTINGS[key] for key in keys]
    assignments = {s.key: f"# {s.key} = {format_number(s.shown)}" for s in chosen}
    width = max((len(text) for text in assignments.values()), default=0)
    lines: list[str] = []
    for header, group in ((WITH_DEFAULT_HEADER, [s for s in chosen if s.default is not None]),
                          (WITHOUT_DEFAULT_HEADER, [s for s in chosen if s.default is None])):
        if group:
            lines += ["", header] if lines else [header]
            lines += [f"{assignments[s.key].ljust(width)}  # {describe(s.key)}" for s in group]
    return lines


# ------------------------------------------------------------------------------------------- parsing


def checked_value(key: str, value: Any) -> int | float | str:
    """``value`` for setting ``key``, checked against its declaration (its choices, or its kind and bounds), wherever
    it comes from (problem.toml, the Python API; click checks the command line's from the same declaration);
    ``ValueError`` saying what the setting must be."""
    setting = SETTINGS[key]
    if setting.choices:
        if value not in setting.choices:
            raise ValueError(f"{key!r} must be {type_text(key)}, got {value!r}")
        return value
    if setting.kind is int and (not isinstance(value, int) or isinstance(value, bool)):
        raise ValueError(f"{key!r} must be an integer, got {value!r}")
    if setting.kind is float and (not isinstance(value, (int, float)) or isinstance(value, bool)):
        raise ValueError(f"{key!r} must be a number, got {value!r}")
    if not math.isfinite(value) or value < setting.low or (value == setting.low and not setting.inclusive):
        raise ValueError(f"{key!r} must be a finite number {_bound_text(setting)}, got {value!r}")
    return value if setting.kind is int else float(value)


def client_bound_text(key: str) -> str:
    """What a client of ``evalkit serve`` may send for setting ``key``: ``"integer from 1 to 100"``, ``"number > 0 and
    <= 600"``, or its choices."""
    setting = SETTINGS[key]
    if setting.choices:
        return type_text(key)
    low = f"from {format_number(setting.low)}" if setting.inclusive else f"> {format_number(setting.low)} and"
    to = "to" if setting.inclusive else "<="
    return f"{'integer' if setting.kind is int else 'number'} {low} {to} {format_number(setting.client_max)}"


def checked_client_value(key: str, value: Any) -> int | float | str:
    """``checked_value``, and within the most a client of ``evalkit serve`` may ask for (``client_max``): what one
    client sends must not cost the others the server (a million correctness trials, a timing budget of a day)."""
    checked = checked_value(key, value)
    limit = SETTINGS[key].client_max
    if limit is not None and not isinstance(checked, str) and checked > limit:
        raise ValueError(f"{key!r} must be {client_bound_text(key)} here (a server's bound), got {value!r}")
    return checked


def _parse_setting(key: str, value: Any, path: Path) -> int | float | str:
    try:
        return checked_value(key, value)
    except ValueError as wrong:
        example = f" (e.g. `{key} = {format_number(SETTINGS[key].shown)}`; see docs/problems.md)"
        raise ProblemError(f"{path}: {wrong}{example}") from None


def parse_settings(data: dict[str, Any], path: Path) -> ProblemSettings:
    """The settings among the keys of ``path`` (already checked for unknown keys), over the defaults."""
    return ProblemSettings(**{key: _parse_setting(key, value, path) for key, value in data.items()
                              if key in SETTINGS})


# ----------------------------------------------------------------------------------- a run's plan


class PlannedProblem(Protocol):
    """What a plan is made of (``evalkit.sources.problems.Problem``)."""

    @property
    def id(self) -> str: ...

    @property
    def sha256(self) -> str: ...  # of its files: reference.py and problem.toml

    @property
    def settings(self) -> ProblemSettings: ...


@dataclass(frozen=True)
class JudgingPlan:
    """How one problem is judged in one run: its id, the sha256 of its files when the run resolved it, and its
    settings with the run's overrides applied and the tolerances of their precision filled in (``judging_plan``)."""

    problem: str
    problem_sha256: str
    settings: ProblemSettings

    @property
    def precision(self) -> str:
        return self.settings.precision

    def to_dict(self) -> dict[str, Any]:
        """The plan as ``run.json`` records it, under its problem's id."""
        return {"problem_sha256": self.problem_sha256, "settings": dataclasses.asdict(self.settings)}

    def check_current(self, problem_sha256: str) -> None:
        """``ProblemChanged`` when its problem's files (now hashing to ``problem_sha256``) are no longer those the run
        planned to judge it by: a row says which version of its problem it was judged against, and a report holds
        one version of each."""
        if problem_sha256 != self.problem_sha256:
            raise ProblemChanged(f"its files changed since the run started (sha256 {self.problem_sha256[:12]}... "
                                 f"then, {problem_sha256[:12]}... now); its answers are judged in a new run")


class ProblemChanged(ProblemError):
    """A problem's files changed while a run judged it."""


def checked_overrides(overrides: Mapping[str, Any]) -> dict[str, int | float | str]:
    """A run's overrides of problem settings, each checked against its declaration: a setting a run may override
    (``PER_RUN``; an older name is read as today's), valued as problem.toml would have to value it; None (unset) is
    left out. ``ValueError`` saying which is wrong and why."""
    checked: dict[str, int | float | str] = {}
    for name, value in overrides.items():
        key = OLD_NAMES.get(name, name)
        if key not in PER_RUN:
            raise ValueError(f"{name!r} is no setting a run may override; those are: {', '.join(PER_RUN)}")
        if value is not None:
            checked[key] = checked_value(key, value)
    return checked


def judging_plan(problem: PlannedProblem, overrides: Mapping[str, Any]) -> JudgingPlan:
    """``problem``'s plan in a run with ``overrides``: its own settings, each override applied, and atol and rtol
    the precision's (``DEFAULT_TOLERANCES``) where neither gives one. The one place a problem's settings are
    resolved: once per problem at a run's start (``Evaluator.add_problem``: for a problem added later)."""
    settings = dataclasses.replace(problem.settings, **checked_overrides(overrides))
    atol, rtol = settings.tolerances()
    return JudgingPlan(problem.id, problem.sha256, dataclasses.replace(settings, atol=atol, rtol=rtol))


def toml_string(text: str) -> str:
    """``text`` as a TOML basic string (quotes, backslashes and control characters escaped)."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + "".join(c if c >= " " and c != "\x7f" else f"\\u{ord(c):04x}" for c in escaped) + '"'
