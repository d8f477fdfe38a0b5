"""Trusted side: what a scoring run is asked to do, and the defaults it falls back on."""

from __future__ import annotations

import dataclasses
import difflib
import logging
import os
import uuid
from collections import Counter
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from evalkit.records import BASELINE_KINDS, EvalkitError, baseline_kinds
from evalkit.sandbox.identity import unprivileged_identity
from evalkit.sandbox.launcher import Limits
from evalkit.sources.problems import Problem
from evalkit.sources.settings import (OLD_NAMES, PER_RUN, RUN_MINIMUMS, JudgingPlan, checked_overrides,
                                      default_cache_dir, judging_plan)


class ScoreError(EvalkitError):
    """A run that cannot start as asked (its report folder, or settings that differ from the ones recorded
    there); the message names the file, the problem and what to do."""


class ResultsExist(ScoreError, FileExistsError):
    """The report folder already holds results and the run was not asked to resume them (still a
    ``FileExistsError``, as it was before it became one of evalkit's errors)."""


logger = logging.getLogger(__name__)

@dataclass(frozen=True, kw_only=True)
class JudgeOptions:
    """How answers are built, judged and timed, wherever they come from (``evalkit score`` or the Python API): the
    machines, and ``overrides``, the run's own values of problem settings (checked against their declaration,
    ``sources.settings.checked_overrides``); a setting it does not give is the problem's own. Each problem's
    settings are resolved from them once, into its plan (``plans``)."""

    device: str = "auto"
    gpus: str = "all"  # cuda: "all", a count "N", or a list "0,2"; one judge per GPU
    judges: int = 1  # cpu: how many judges run at once; cuda: how many per GPU
    # A GPU's only judge judges the next answer beside one's checks and profile (``overlap``). Off by default: on the
    # H200 it gained no step yet (docs/gpu-runs/2026-12-02-overlap-h200).
    overlap: bool = False
    backend: str = "local"  # "local" (this machine) or "ray" (an existing Ray cluster: evalkit[ray])
    ray_address: str | None = None  # ray.init's address; None: RAY_ADDRESS, else a local cluster
    jobs: int = 0
    # Per-run overrides of the problem settings (``sources.settings.PER_RUN``, named as problem.toml names them).
    overrides: dict[str, int | float | str] = field(default_factory=dict)
    seed: int | None = None
    baselines: tuple[str, ...] = BASELINE_KINDS
    remeasure_baselines: bool = False  # time the baselines again even where the shared cache holds them
    cache_dir: Path = field(default_factory=default_cache_dir)
    memory_gib: float | None = None
    reuse_verdicts: bool = False  # the API: an identical answer to an identical problem gets the row judged first

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "overrides", checked_overrides(self.overrides))
        except ValueError as wrong:
            raise SettingError(f"setting {wrong}") from None

    def plans(self, problems: Mapping[str, Problem]) -> dict[str, JudgingPlan]:
        """Each problem's plan in this run (``sources.settings.judging_plan``), by id."""
        return {problem_id: judging_plan(problem, self.overrides) for problem_id, problem in problems.items()}

    def build_jobs(self, cores: int | None = None, available_bytes: int | None = None, device: str = "cpu") -> int:
        """Parallel builds: ``jobs``, or one per core left to building (``cores``) as far as the memory free now
        (``available_bytes``, else the machine's ``MemAvailable``) holds a build's peak on ``device`` for each."""
        if self.jobs:
            return self.jobs
        free = available_bytes if available_bytes is not None else available_memory()
        by_memory = int(free // build_peak_bytes(device)) if free is not None else 2**31
        return max(1, min(cores or os.cpu_count() or 2, by_memory))


# What one build may hold at its peak. A C++ answer: cc1plus compiling a load_inline extension (torch/extension.h)
# peaked at 1.4 GiB resident (torch 2.13, a CPU build). A CUDA answer compiles its .cpp and its .cu at once
# (``builder``'s MAX_JOBS): cc1plus 1.3 GiB beside nvcc, whose largest process peaked at 2.6 GiB (a real answer,
# torch 2.11 on an H200 host: docs/gpu-runs/2026-11-27-two-gpus-and-builds-h200/).
BUILD_PEAK_BYTES = {"cpu": int(1.5 * 2**30), "cuda": int(4.25 * 2**30)}


def build_peak_bytes(device: str) -> int:
    """What one build on ``device`` may hold at its peak (the largest figure for a device not measured)."""
    return BUILD_PEAK_BYTES.get(device, max(BUILD_PEAK_BYTES.values()))


def available_memory() -> int | None:
    """``MemAvailable`` of /proc/meminfo in bytes: memory that can be had now without swapping; None where unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


class SettingError(EvalkitError, ValueError):
    """A keyword setting of the Python API that does not exist or has a value of the wrong kind."""


_NUMBERS = {"int": (int,), "float": (int, float)}


def judge_options(device: str, settings: dict[str, Any]) -> JudgeOptions:
    """``JudgeOptions`` from the Python API's keywords, each checked: an unknown name is refused with the valid
    ones and the nearest (``timeout`` -> ``run_timeout_s``), an older name (``trials``, ``warmup``, ``timeout_s``) is
    read as today's; ``baselines`` takes ``"eager,compile"``, ``"none"`` or a list; a problem setting is an override,
    checked against its declaration as problem.toml's are (``timing_trials="5"`` or ``correctness_trials=0`` is
    refused), and a run's own number against its least (``RUN_MINIMUMS``); None means unset."""
    known = {f.name: f for f in dataclasses.fields(JudgeOptions) if f.name not in ("device", "overrides")}
    settings = {OLD_NAMES.get(name, name): value for name, value in settings.items()}  # ``trials`` still works
    unknown = sorted(set(settings) - set(known) - set(PER_RUN))
    if unknown:
        names = sorted({*known, *PER_RUN})
        hints = [f"{name!r} (did you mean {close[0]!r}?)" if (close := difflib.get_close_matches(name, names, 1))
                 else repr(name) for name in unknown]
        raise SettingError(f"unknown setting(s) {', '.join(hints)}; the settings are: {', '.join(names)}")
    overrides = {name: value for name, value in settings.items() if name in PER_RUN}
    values: dict[str, Any] = {}
    for name, value in settings.items():
        if value is None or name in PER_RUN:
            continue
        kind = str(known[name].type).replace(" | None", "")
        if name == "baselines":
            try:
                value = baseline_kinds(value)
            except ValueError as wrong:
                raise SettingError(f"setting 'baselines' {value!r}: {wrong}") from None
        elif name == "cache_dir":
            value = Path(value)
        elif kind in _NUMBERS and (isinstance(value, bool) or not isinstance(value, _NUMBERS[kind])):
            raise SettingError(f"setting {name!r} must be a number ({kind}), got {value!r}")
        elif name in RUN_MINIMUMS and value < RUN_MINIMUMS[name]:
            raise SettingError(f"setting {name!r} must be at least {RUN_MINIMUMS[name]:g}, got {value!r}")
        values[name] = value
    return JudgeOptions(device=device, overrides=overrides, **values)


@dataclass(frozen=True, kw_only=True)
class ScoreOptions(JudgeOptions):
    """One ``evalkit score`` run: what to judge, against which problems, into which report folder."""

    submissions: Path
    problems_dir: Path
    out_dir: Path
    resume: bool = False


@dataclass
class ScoreOutcome:
    out_dir: Path
    device: str
    counts: Counter
    judged: int
    skipped_resume: int
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seed: int | None = None  # the run's base seed (recorded in run.json, reused by --resume)
    unusable: dict[str, str] = field(default_factory=dict)  # problem id -> why its answers cannot be judged
    unavailable: int = 0  # rows skipped because their problem cannot be used (not for want of a GPU)


def default_limits(device: str, memory_gib: float | None, group: str | None = None,
                   identity: Future[tuple[int, int] | None] | None = None) -> Limits:
    """The limits of every sandbox of one run. ``group`` (a fresh random token when None) marks all of
    them, so ``evalkit.sandbox.launcher.kill_group(limits.group)`` ends every one the run started.
    Workers run as uids of their own when one can run them (``unprivileged_identity``; ``identity``: its probe
    already started, else it runs now); a cache under a folder closed to them is opened to each worker in a mount
    namespace of its own (``sandbox.untrusted.mounts``)."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    memory = int(memory_gib * 2**30) if memory_gib else int(min(total * 0.5, 64 * 2**30))
    # Address space, not resident memory, is what RLIMIT_AS counts: leave torch's own mappings room.
    address_space = max(2 * memory, memory + 8 * 2**30) if device == "cpu" else None
    run_as = identity.result() if identity is not None else unprivileged_identity()
    return Limits(memory_bytes=memory, address_space_bytes=address_space, group=group or uuid.uuid4().hex,
                  run_as=run_as)
