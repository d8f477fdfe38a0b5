"""``run.json``: the settings a report was judged with, and ``--resume`` refusing to mix them."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Callable

import pytest

from evalkit import __version__
from evalkit.report_folder import ReportFolder
from evalkit.results_file import RUN_SETTINGS_FILE
from evalkit.schedule import run_settings
from evalkit.schedule.options import JudgeOptions, ScoreError, ScoreOptions, SettingError
from evalkit.sources.problems import Problem, load_problem
from evalkit.sources.settings import PER_RUN, judging_plan


def _options(out: Path, **changes: object) -> ScoreOptions:
    """Options of a run; a problem setting among ``changes`` is one of its overrides."""
    overrides = {key: changes.pop(key) for key in list(changes) if key in PER_RUN}
    base = ScoreOptions(submissions=out / "subs", problems_dir=out / "problems", out_dir=out / "report",
                        baselines=("eager",), seed=11)
    return dataclasses.replace(base, overrides={**base.overrides, **overrides}, **changes)


def _in_folder(path: Path, write: Callable[..., Path], *args: object, **kwargs: object) -> Path:
    """``write(folder, *args, **kwargs)`` into the report folder at ``path``, opened for it as a run opens it."""
    with ReportFolder.open(path) as folder:
        return write(folder, *args, **kwargs)


def _recorded(out: Path, **changes: object) -> ScoreOptions:
    """Options of a first run whose settings are recorded in the report folder."""
    options = _options(out, **changes)
    options.out_dir.mkdir(parents=True)
    _in_folder(options.out_dir, run_settings.record, run_settings.current_settings(options, "cpu", options.seed),
               {})
    return options


def _again(options: ScoreOptions, **changes: object) -> ScoreOptions:
    """``options`` with ``changes`` (an override among them replaces the one given; None unsets it)."""
    overrides = {key: changes.pop(key) for key in list(changes) if key in PER_RUN}
    return dataclasses.replace(options, overrides={**options.overrides, **overrides}, **changes)


def test_the_recorded_settings_are_every_one_that_changes_verdicts_or_times(tmp_path: Path) -> None:
    options = _options(tmp_path, atol=0.01, timing_trials=5, run_timeout_s=30.0)
    settings = run_settings.current_settings(options, "cpu", 11)
    assert settings == {"precision": None, "atol": 0.01, "rtol": None, "correctness_trials": None, "timing_trials": 5,
                        "min_timing_trials": None, "timing_checks": None, "timing_budget_s": None,
                        "timing_precision": None,
                        "warmup_trials": None, "run_timeout_s": 30.0, "hang_limit_s": None, "request_length_ms": None,
                        "build_timeout_s": None,
                        "baselines": ["eager"], "device": "cpu", "gpu": "cpu", "evalkit_version": __version__,
                        "seed": 11}
    options.out_dir.mkdir(parents=True)
    path = _in_folder(options.out_dir, run_settings.record, settings, {})
    assert path.name == RUN_SETTINGS_FILE == "run.json"
    assert json.loads(path.read_text())["settings"] == settings


def test_a_resume_with_the_same_options_reuses_the_recorded_seed(tmp_path: Path) -> None:
    first = _recorded(tmp_path, seed=1234, atol=0.5)
    again = dataclasses.replace(first, seed=None, resume=True)
    assert run_settings.run_seed(again, "cpu", holds_results=True) == 1234


def test_a_resume_with_other_settings_lists_each_difference(tmp_path: Path) -> None:
    first = _recorded(tmp_path, atol=0.5)
    changed = _again(first, resume=True, atol=0.1, seed=99, baselines=("eager", "compile"))
    with pytest.raises(ScoreError) as refused:
        run_settings.run_seed(changed, "cpu", holds_results=True)
    message = str(refused.value)
    assert str(first.out_dir / "run.json") in message
    assert "--atol: recorded 0.5, now 0.1" in message
    assert "--seed: recorded 11, now 99" in message
    assert "--baselines: recorded eager, now eager,compile" in message
    assert "--out NEW_DIR" in message and "\n" not in message


def test_an_option_left_unset_on_resume_is_a_difference_too(tmp_path: Path) -> None:
    first = _recorded(tmp_path, timing_trials=5)
    with pytest.raises(ScoreError, match="--timing-trials: recorded 5, now unset"):
        run_settings.run_seed(_again(first, resume=True, timing_trials=None), "cpu", True)


def test_a_resume_on_another_device_is_refused(tmp_path: Path) -> None:
    first = _recorded(tmp_path)
    with pytest.raises(ScoreError, match="device: recorded cpu, now cuda"):
        run_settings.refuse_differences(first.out_dir, run_settings.read_recorded(first.out_dir),
                                        {**run_settings.current_settings(first, "cpu", 11), "device": "cuda"})


def test_results_without_run_json_cannot_be_resumed(tmp_path: Path) -> None:
    options = _options(tmp_path, resume=True)
    with pytest.raises(ScoreError, match="older evalkit"):
        run_settings.run_seed(options, "cpu", holds_results=True)
    assert run_settings.run_seed(options, "cpu", holds_results=False) == 11  # nothing judged yet: a fresh start


def test_an_unreadable_run_json_names_the_file(tmp_path: Path) -> None:
    options = _options(tmp_path, resume=True)
    options.out_dir.mkdir(parents=True)
    (options.out_dir / "run.json").write_text("{not json")
    with pytest.raises(ScoreError, match="run.json: cannot read the settings"):
        run_settings.run_seed(options, "cpu", holds_results=True)


def test_a_fresh_run_draws_a_seed_unless_given_one(tmp_path: Path) -> None:
    assert run_settings.run_seed(_options(tmp_path), "cpu", holds_results=False) == 11
    drawn = {run_settings.run_seed(_options(tmp_path, seed=None), "cpu", False) for _ in range(5)}
    assert all(isinstance(seed, int) for seed in drawn) and len(drawn) > 1


def test_a_report_recorded_under_the_older_names_resumes_under_todays(tmp_path: Path) -> None:
    # run.json version 1 named three overrides trials, warmup and timeout_s.
    first = _options(tmp_path, correctness_trials=3, warmup_trials=1, run_timeout_s=20.0)
    first.out_dir.mkdir(parents=True)
    settings = run_settings.current_settings(first, "cpu", first.seed)
    old = {{"correctness_trials": "trials", "warmup_trials": "warmup", "run_timeout_s": "timeout_s"}.get(k, k): v
           for k, v in settings.items()}
    (first.out_dir / RUN_SETTINGS_FILE).write_text(json.dumps({"run_settings_version": 1, "settings": old}))
    again = dataclasses.replace(first, seed=None, resume=True)
    assert run_settings.run_seed(again, "cpu", holds_results=True) == first.seed
    with pytest.raises(ScoreError, match="--correctness-trials: recorded 3, now 4"):
        run_settings.run_seed(_again(again, correctness_trials=4), "cpu", holds_results=True)


def test_one_name_from_the_command_line_to_the_judge(tmp_path: Path) -> None:
    from evalkit.judge.submission_judge import JudgeSettings
    from evalkit.sources.settings import SETTINGS, ProblemSettings

    # One declaration: the options keep no copy of a problem setting, the judge's settings are the declared ones.
    options = {f.name for f in dataclasses.fields(JudgeOptions)}
    assert not options & set(SETTINGS) and "overrides" in options
    assert issubclass(JudgeSettings, ProblemSettings)
    assert {f.name for f in dataclasses.fields(JudgeSettings)} - set(SETTINGS) == {"seed", "time_submissions"}
    assert set(PER_RUN) == set(run_settings.OVERRIDES)
    assert SETTINGS["timing_budget_s"].flags == ("--timing-budget",)
    assert SETTINGS["correctness_trials"].flags == ("--correctness-trials", "--trials")  # the older one kept


def test_the_api_takes_todays_names_and_the_older_ones() -> None:
    from evalkit.schedule.options import judge_options

    older = judge_options("cpu", {"trials": 3, "warmup": 1, "timeout_s": 9.0})
    today = judge_options("cpu", {"correctness_trials": 3, "warmup_trials": 1, "run_timeout_s": 9.0})
    assert older == today and today.overrides == {"correctness_trials": 3, "warmup_trials": 1, "run_timeout_s": 9.0}


# ---- plans: each problem resolved once, recorded, compared problem by problem on --resume ----------------------


def _problem(folder: Path, toml: str = "", reference: str = "# a reference\n") -> Problem:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "reference.py").write_text(reference)
    (folder / "problem.toml").write_text(toml)
    return load_problem(folder)


def test_a_plan_is_the_problems_files_and_settings_with_the_runs_overrides(tmp_path: Path) -> None:
    problem = _problem(tmp_path / "p", 'precision = "bf16"\natol = 0.5\n')
    plan = judging_plan(problem, {"timing_trials": 7, "rtol": None})
    assert (plan.problem, plan.problem_sha256, plan.precision) == ("p", problem.sha256, "bf16")
    assert (plan.settings.atol, plan.settings.rtol, plan.settings.timing_trials) == (0.5, 5e-2, 7)  # rtol: bf16's
    assert judging_plan(problem, {"precision": "fp16"}).settings.rtol == 1e-2  # the run's precision's default
    for wrong, why in (({"flops": 1.0}, "'flops' is no setting a run may override"),
                       ({"timing_trials": 0}, "'timing_trials' must be a finite number >= 1")):
        with pytest.raises(ValueError, match=why):
            judging_plan(problem, wrong)
        with pytest.raises(SettingError, match=why):
            JudgeOptions(overrides=wrong)


def test_run_json_records_every_plan(tmp_path: Path) -> None:
    options = _options(tmp_path, atol=0.25)
    plans = options.plans({"p": _problem(tmp_path / "p"), "q": _problem(tmp_path / "q", "timing_trials = 3\n")})
    options.out_dir.mkdir(parents=True)
    _in_folder(options.out_dir, run_settings.record_run, run_settings.current_settings(options, "cpu", 11), plans,
               resume=False)
    recorded = json.loads((options.out_dir / RUN_SETTINGS_FILE).read_text())
    assert recorded["run_settings_version"] == 3
    assert recorded["plans"] == {"p": plans["p"].to_dict(), "q": plans["q"].to_dict()}
    assert recorded["plans"]["q"]["settings"]["timing_trials"] == 3 and recorded["plans"]["p"]["settings"]["atol"] == 0.25


def test_a_resume_names_every_change_of_a_judged_problems_plan(tmp_path: Path, caplog) -> None:
    options = _options(tmp_path)
    folders = {name: tmp_path / "problems" / name for name in ("p", "q", "r")}
    first = options.plans({name: _problem(folder) for name, folder in folders.items()})
    options.out_dir.mkdir(parents=True)
    _in_folder(options.out_dir, run_settings.record_run, {}, first, resume=False)
    recorded = run_settings.read_recorded_plans(options.out_dir)
    rows = [{"problem": "p"}, {"problem": "q"}]  # r has no row yet
    run_settings.refuse_changed_plans(options.out_dir, recorded, first, rows)  # nothing changed: no refusal
    now = options.plans({"p": _problem(folders["p"], reference="# edited\n"), "q": _problem(folders["q"], "atol = 0.5\n"),
                         "r": _problem(folders["r"], "timing_trials = 9\n")})
    with pytest.raises(ScoreError) as refused:
        run_settings.refuse_changed_plans(options.out_dir, recorded, now, rows)
    message = str(refused.value)
    assert f"p (its files (reference.py, problem.toml): sha256 {first['p'].problem_sha256[:12]}... recorded, " \
           f"{now['p'].problem_sha256[:12]}... now)" in message
    assert "q (its files" in message and "atol: recorded 0.01, now 0.5" in message
    assert "r (" not in message and "--out NEW_DIR" in message
    run_settings.refuse_changed_plans(options.out_dir, recorded, now, [])  # no answer judged: nothing mixes
    assert "problem r changed since this report's first run" in caplog.text


def test_a_resume_keeps_the_first_settings_and_takes_the_plans_of_problems_not_yet_judged(tmp_path: Path) -> None:
    options = _options(tmp_path)
    p, q = _problem(tmp_path / "p"), _problem(tmp_path / "q")
    options.out_dir.mkdir(parents=True)
    _in_folder(options.out_dir, run_settings.record_run, {"seed": 11}, options.plans({"p": p}), resume=False)
    first = json.loads((options.out_dir / RUN_SETTINGS_FILE).read_text())
    _in_folder(options.out_dir, run_settings.record_run, {"seed": 12}, options.plans({"q": q}), resume=True)
    again = json.loads((options.out_dir / RUN_SETTINGS_FILE).read_text())
    assert again["settings"] == {"seed": 11} and again["recorded_at"] == first["recorded_at"]
    assert set(again["plans"]) == {"p", "q"}


def test_a_report_without_plans_is_compared_on_what_its_rows_say(tmp_path: Path) -> None:
    options = _options(tmp_path)
    plans = options.plans({"p": _problem(tmp_path / "p", 'precision = "fp16"\n')})
    run_settings.refuse_changed_plans(options.out_dir, None, plans, [{"problem": "p", "precision": "fp16"}])
    with pytest.raises(ScoreError, match=r"p \(precision: judged bf16, now fp16\)"):
        run_settings.refuse_changed_plans(options.out_dir, None, plans, [{"problem": "p", "precision": "bf16"}])
    with pytest.raises(ScoreError, match=r"p \(its files: sha256 000000000000\.\.\. judged"):
        run_settings.refuse_changed_plans(options.out_dir, None, plans,
                                          [{"problem": "p", "precision": "fp16", "problem_sha256": "0" * 64}])
