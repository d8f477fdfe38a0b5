"""Trusted side: ``run.json``, the settings of a report's run, so that ``--resume`` never mixes settings.

A run records, in its report folder, every setting that changes a verdict or a time: the overrides
given on the command line (``None`` where one was left unset, meaning the problem's own setting), the
baselines, the device and GPU, the evalkit version and the base seed; and every problem's plan (``plans``: the
sha256 of its files and its settings as the run resolved them, ``sources.settings.JudgingPlan``). ``--resume``
compares this run's values with the recorded ones and refuses any difference before judging anything; the comparison
is strict (an option left unset is ``None``, not "as recorded"), so a resume repeats the first run's options.
Only the seed may be left out: a resume without ``--seed`` reuses the recorded one. Plans are compared problem by
problem: a problem whose answers the report holds must be judged by the plan they were judged by (its files and
settings unchanged); one without answers there yet takes its new plan, and the change is said.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import random
from pathlib import Path
from typing import Any

import torch

from evalkit.version import __version__
from evalkit.report_folder import ReportFolder
from evalkit.results_file import RESULTS_FILE, RUN_SETTINGS_FILE
from evalkit.schedule.options import ScoreError, ScoreOptions
from evalkit.sources.settings import OLD_NAMES, PER_RUN, SETTINGS, JudgingPlan

RUN_SETTINGS_VERSION = 3  # 2: the overrides under their problem.toml names (1: trials, warmup, timeout_s); 3: plans
OVERRIDES = PER_RUN  # every problem setting a run may override (``sources.settings``)
# How each setting is named in a message: the command-line option that sets it, where there is one.
LABELS = {**{key: SETTINGS[key].flags[0] for key in OVERRIDES},
          "baselines": "--baselines", "device": "device", "gpu": "GPU", "evalkit_version": "evalkit version",
          "seed": "--seed"}
logger = logging.getLogger(__name__)
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


def read_recorded_plans(out_dir: Path) -> dict[str, Any] | None:
    """The plans recorded in ``out_dir/run.json``, by problem id; None where it records none (written before plans
    were, or missing)."""
    try:
        plans = json.loads((out_dir / RUN_SETTINGS_FILE).read_text(encoding="utf-8")).get("plans")
    except (OSError, ValueError, AttributeError):
        return None
    return plans if isinstance(plans, dict) else None


def refuse_changed_plans(out_dir: Path, recorded: dict[str, Any] | None, plans: dict[str, JudgingPlan],
                         rows: list[dict[str, Any]]) -> None:
    """Raise ``ScoreError`` naming, problem by problem, what changed in the plan of every problem whose answers the
    report holds (its files, a setting): a report holds one version of each problem, judged one way. Where
    ``run.json`` records no plan of it (an older evalkit's), what its rows say is compared: their precision, and
    the sha256 of the problem's files where they carry one. A change of a problem without rows is logged."""
    judged = sorted({row["problem"] for row in rows if row.get("problem") in plans})
    changed = []
    for problem_id in judged:
        if recorded is not None and isinstance(recorded.get(problem_id), dict):
            found = plan_changes(recorded[problem_id], plans[problem_id])
        else:
            found = _row_changes([row for row in rows if row.get("problem") == problem_id], plans[problem_id])
        if found:
            changed.append(f"{problem_id} ({', '.join(found)})")
    if changed:
        raise ScoreError(f"{out_dir / RESULTS_FILE}: cannot --resume: problems whose answers this report holds "
                         f"changed since they were judged: {'; '.join(changed)}; a report holds one version of each "
                         f"problem, judged one way; {_NEW_REPORT}")
    for problem_id, recorded_plan in sorted((recorded or {}).items()):
        if problem_id in plans and problem_id not in judged and isinstance(recorded_plan, dict) \
                and (found := plan_changes(recorded_plan, plans[problem_id])):
            logger.warning("%s: problem %s changed since this report's first run (%s); none of its answers is in the "
                           "report yet, so they are judged by its new plan", out_dir, problem_id, ", ".join(found))


def plan_changes(recorded: dict[str, Any], plan: JudgingPlan) -> list[str]:
    """What differs between a plan as ``run.json`` recorded it and ``plan``: its files, then each setting."""
    now = plan.to_dict()
    found = []
    if recorded.get("problem_sha256") != plan.problem_sha256:
        found.append(f"its files (reference.py, problem.toml): sha256 {_short(recorded.get('problem_sha256'))} "
                     f"recorded, {_short(plan.problem_sha256)} now")
    then = recorded.get("settings") if isinstance(recorded.get("settings"), dict) else {}
    return found + [f"{key}: recorded {_shown(then.get(key))}, now {_shown(value)}"
                    for key, value in now["settings"].items() if then.get(key) != value]


def _row_changes(rows: list[dict[str, Any]], plan: JudgingPlan) -> list[str]:
    """What a problem's rows say they were judged by that ``plan`` differs from."""
    precisions = sorted({str(row.get("precision", "fp32")) for row in rows} - {plan.precision})
    hashes = sorted({row["problem_sha256"] for row in rows if row.get("problem_sha256")} - {plan.problem_sha256})
    return ([f"precision: judged {', '.join(precisions)}, now {plan.precision}"] if precisions else []) + \
        ([f"its files: sha256 {', '.join(map(_short, hashes))} judged, {_short(plan.problem_sha256)} now"]
         if hashes else [])


def merged_plans(recorded: dict[str, Any] | None, plans: dict[str, JudgingPlan]) -> dict[str, Any]:
    """The plans ``run.json`` records after a run: those recorded (problems no longer in the problems folder
    included), each problem of this run's replaced by its plan now (the same, where the report holds its answers)."""
    return {**(recorded or {}), **{problem_id: plan.to_dict() for problem_id, plan in plans.items()}}


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


def record(folder: ReportFolder, settings: dict[str, Any], plans: dict[str, Any] | None = None,
           recorded_at: str | None = None) -> Path:
    """Write the folder's ``run.json``: the run's ``settings`` and every problem's plan (as ``JudgingPlan.to_dict``
    gives it, by id), recorded at ``recorded_at`` (default: now); return its path."""
    return folder.record_run({"run_settings_version": RUN_SETTINGS_VERSION,
                              "recorded_at": recorded_at or dt.datetime.now(dt.timezone.utc).isoformat(
                                  timespec="seconds"),
                              "settings": settings, "plans": plans or {}})


def record_run(folder: ReportFolder, settings: dict[str, Any], plans: dict[str, JudgingPlan], resume: bool) -> Path:
    """Record the run in the folder's ``run.json``: a first run its settings and plans; a resume (whose settings and
    plans were found to match) adds the plans of problems the report holds no answer of, the first run's settings
    and time kept."""
    recorded = read_recorded(folder.path) if resume else None
    if recorded is None:
        return record(folder, settings, merged_plans(None, plans))
    then = json.loads((folder.path / RUN_SETTINGS_FILE).read_text(encoding="utf-8")).get("recorded_at")
    return record(folder, recorded, merged_plans(read_recorded_plans(folder.path), plans),
                  recorded_at=then if isinstance(then, str) else None)


def _short(sha256: Any) -> str:
    return f"{sha256[:12]}..." if isinstance(sha256, str) and sha256 else "unknown"


def _shown(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, list):
        return ",".join(map(str, value)) or "none"
    return str(value)
