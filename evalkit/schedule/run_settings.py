"""Trusted side: ``run.json``, the settings of a report's run, so that ``--resume`` never mixes settings.

A run records, in its report folder, every setting that changes a verdict or a time: the overrides
given on the command line (``None`` where one was left unset, meaning the problem's own setting), the
baselines, the device and GPU, the evalkit version and the base seed. ``--resume`` compares this run's
values with the recorded ones and refuses any difference before judging anything; the comparison is
strict (an option left unset is ``None``, not "as recorded"), so a resume repeats the first run's options.
Only the seed may be left out: a resume without ``--seed`` reuses the recorded one.
"""

from __future__ import annotations

import datetime as dt
import json
import random
from pathlib import Path
from typing import Any

import torch

from evalkit.version import __version__
from evalkit.results_file import RESULTS_FILE, RUN_SETTINGS_FILE, write_file
from evalkit.schedule.options import ScoreError, ScoreOptions
from evalkit.sources.settings import OLD_NAMES, PER_RUN, SETTINGS, JudgingPlan

RUN_SETTINGS_VERSION = 2  # 2: the overrides under their problem.toml names (1: trials, warmup, timeout_s)
OVERRIDES = PER_RUN  # every problem setting a run may override (``sources.settings``)
# How each setting is named in a message: the command-line option that sets it, where there is one.
LABELS = {**{key: SETTINGS[key].flags[0] for key in OVERRIDES},
          "baselines": "--baselines", "device": "device", "gpu": "GPU", "evalkit_version": "evalkit version",
          "seed": "--seed"}
_NEW_REPORT = "to judge with these settings, start a new report instead: --out NEW_DIR (or drop --resume)"


def gpu_name(device: str) -> str:
    """The GPU a run times on, or "cpu"."""
    return torch.cuda.get_device_name() if device == "cuda" else "cpu"


def current_settings(options: ScoreOptions, device: str, seed: int) -> dict[str, Any]:
    """This run's settings as ``run.json`` holds them (JSON values: a tuple becomes a list)."""
    values: dict[str, Any] = {name: options.overrides.get(name) for name in OVERRIDES}
    values.update(baselines=list(options.baselines), device=device, gpu=gpu_name(device),
                  evalkit_version=__version__, seed=seed)
    return json.loads(json.dumps(values))


def run_seed(options: ScoreOptions, device: str, holds_results: bool) -> int:
    """This run's base seed; on ``--resume`` the recorded one, once every other setting is checked to match.

    Raises ``ScoreError`` when a resume would mix settings: a recorded value differs from this run's, or
    the report holds results but no ``run.json`` (written by an older evalkit).
    """
    recorded = read_recorded(options.out_dir) if options.resume else None
    if recorded is not None:
        seed = recorded["seed"] if options.seed is None else options.seed
        refuse_differences(options.out_dir, recorded, current_settings(options, device, seed))
        return seed
    if options.resume and holds_results:
        raise ScoreError(f"{options.out_dir}: this report has results but no {RUN_SETTINGS_FILE} (an older evalkit "
                         f"wrote it), so the settings it was judged with are unknown and it cannot be resumed "
                         f"safely; start a new report instead: --out NEW_DIR")
    return options.seed if options.seed is not None else random.SystemRandom().randrange(2**31)


def read_recorded(out_dir: Path) -> dict[str, Any] | None:
    """The settings recorded in ``out_dir/run.json``; None when there is no such file."""
    path = out_dir / RUN_SETTINGS_FILE
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        settings = data["settings"]
        if not isinstance(settings, dict) or not isinstance(settings.get("seed"), int):
            raise ValueError("no 'settings' object with an integer 'seed'")
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ScoreError(f"{path}: cannot read the settings this report was judged with ({err}), so it cannot be "
                         f"resumed safely; start a new report instead: --out NEW_DIR") from err
    if data.get("run_settings_version", 1) < 2:  # version 1 named three overrides otherwise
        settings = {OLD_NAMES.get(name, name): value for name, value in settings.items()}
    return settings


def refuse_mixed_precisions(out_dir: Path, plans: dict[str, JudgingPlan], rows: list[dict[str, Any]]) -> None:
    """Raise ``ScoreError`` when a row of the report was judged in another precision than its problem's plan says
    now (its ``problem.toml`` changed since): ``run.json`` holds ``--precision`` only, not each problem's own."""
    changed = sorted({f"{row['problem']} ({row.get('precision', 'fp32')} there, {now} now)" for row in rows
                      if row.get("problem") in plans
                      and row.get("precision", "fp32") != (now := plans[row["problem"]].precision)})
    if changed:
        raise ScoreError(f"{out_dir / RESULTS_FILE}: cannot --resume: answers to {', '.join(changed)} were "
                         f"judged in another precision than their problem asks for now (its problem.toml's "
                         f"precision changed); a report holds one precision per problem; {_NEW_REPORT}")


def differences(recorded: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """``"--atol: recorded 0.01, now 0.5"`` for every setting whose value changed."""
    return [f"{LABELS.get(name, name)}: recorded {_shown(recorded.get(name))}, now {_shown(value)}"
            for name, value in now.items() if recorded.get(name) != value]


def refuse_differences(out_dir: Path, recorded: dict[str, Any], now: dict[str, Any]) -> None:
    """Raise ``ScoreError`` listing every difference between the recorded settings and this run's."""
    changed = differences(recorded, now)
    if changed:
        raise ScoreError(f"{out_dir / RUN_SETTINGS_FILE}: cannot --resume with other settings than the run that "
                         f"wrote this report ({'; '.join(changed)}); a resume must repeat that run's options; "
                         f"{_NEW_REPORT}")


def record(out_dir: Path, settings: dict[str, Any]) -> Path:
    """Write ``out_dir/run.json`` (the folder must exist); return its path."""
    path = out_dir / RUN_SETTINGS_FILE
    data = {"run_settings_version": RUN_SETTINGS_VERSION,
            "recorded_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "settings": settings}
    write_file(path, json.dumps(data, indent=2) + "\n")
    return path


def _shown(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, list):
        return ",".join(map(str, value)) or "none"
    return str(value)
