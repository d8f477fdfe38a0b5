"""The Python API: ``Evaluator.judge`` / ``judge_many`` return results.jsonl rows, reuse one engine, hold no global
state, turn any answer into a row, and refuse a caller's mistakes before anything is built."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

from conftest import FIXTURES, ROOT
from evalkit import Evaluator, Problem
from evalkit.records import ResultRow
from evalkit.schedule.engine import DeadlinePassed
from evalkit.sources.problems import ProblemError, problem_from_source
from shared_builds import cache_sharing_builds

PROBLEMS = FIXTURES / "judge_problems"
ANSWERS = FIXTURES / "judge_submissions" / "fixtures" / "linear_relu"
SETTINGS = dict(device="cpu", baselines=("eager",), timing_trials=5, warmup=1, seed=3)
HANG_LIMIT_S = 900.0  # a hanging answer's step limit where a test needs it far above any judging's time


def _answer(name: str) -> str:
    return next(ANSWERS.glob(f"{name}.*")).read_text()


@pytest.fixture(scope="module")
def evaluator(tmp_path_factory: pytest.TempPathFactory, prebuilt: Path):
    cache = cache_sharing_builds(prebuilt, tmp_path_factory.mktemp("api") / "cache")
    with Evaluator(problems=PROBLEMS, cache_dir=cache, **SETTINGS) as ev:
        yield ev


def test_judge_returns_the_row_results_jsonl_would_hold(evaluator):
    row = evaluator.judge("linear_relu", _answer("correct_cpp"), sample="mine")
    assert row["verdict"] == "correct" and row["sample"] == "mine" and row["run"] == "api"
    assert row["judge"] == "cpu:0" and row["timing"]["median_ms"] > 0
    assert ResultRow.from_dict(row).to_dict() == row  # the same schema as a results.jsonl row
    assert "eager" in row["baselines"]
    assert row["feedback"].startswith("Correct.") and "x vs PyTorch eager (95% interval" in row["feedback"]


def test_a_correct_rows_speedup_carries_an_interval_that_holds_it(evaluator):
    # Whether another judging lands inside the interval depends on how loaded the machine is, so that is measured on
    # the GPU (benchmarks/reproducibility.py, docs/gpu-runs); its coverage on known samples is tests/judge/test_speedups.py.
    row = evaluator.judge("linear_relu", _answer("correct_cpp"), sample="interval")
    assert row["verdict"] == "correct", row["reason"]
    low, high = row["speedup_vs_eager_ci"]
    assert 0 < low <= row["speedup_vs_eager"] <= high


def test_judge_many_yields_rows_as_they_are_decided_and_a_crash_is_a_row(evaluator):
    rows = list(evaluator.judge_many([("linear_relu", _answer("crash")), ("linear_relu", "no code at all"),
                                      ("linear_relu", _answer("runtime_error"))]))
    assert rows[0]["verdict"] == "no_code", "an answer triage decides waits for nothing"
    assert sorted(row["verdict"] for row in rows) == ["crash", "no_code", "runtime_error"]
    assert len({row["sample"] for row in rows}) == 3  # each named apart, to match rows to answers
    assert all(row["feedback"] for row in rows), "every row carries feedback for the model's next turn"


def test_calls_from_many_threads_share_the_judges_and_an_answer_with_no_code_waits_for_none(evaluator):
    rows: dict[str, dict] = {}

    def judge(name: str) -> None:
        rows[name] = evaluator.judge("linear_relu", _answer(name), sample=f"threaded-{name}")

    threads = [threading.Thread(target=judge, args=(name,)) for name in ("hang", "correct_cpp", "incorrect")]
    for thread in threads:
        thread.start()
    no_code = evaluator.judge("linear_relu", "I ran out of time.", sample="threaded-no-code")
    assert no_code["verdict"] == "no_code" and threads[0].is_alive(), "a no-code answer waited behind the hang"
    for thread in threads:
        thread.join(timeout=600)
    assert {name: row["verdict"] for name, row in rows.items()} == {"hang": "timeout", "correct_cpp": "correct",
                                                                    "incorrect": "incorrect"}


def test_a_batch_abandoned_midway_leaves_the_judges_as_a_finished_one(evaluator):
    rows = evaluator.judge_many([("linear_relu", "no code here"), ("linear_relu", _answer("incorrect")),
                                 ("linear_relu", _answer("correct_cpp"))])
    assert next(rows)["verdict"] == "no_code"
    rows.close()  # a trainer that stops iterating: the rest of that batch is cancelled
    again = list(evaluator.judge_many([("linear_relu", _answer("correct_cpp")), ("linear_relu", _answer("incorrect"))]))
    assert sorted(row["verdict"] for row in again) == ["correct", "incorrect"]
    assert all(row["error"] is None or row["error"].get("kind") != "judge_failed" for row in again), again


def test_awaited_calls_share_the_judges_and_a_cancelled_one_disturbs_no_other(evaluator):
    async def scenario() -> list[dict]:
        hang = asyncio.create_task(evaluator.judge_async("linear_relu", _answer("hang"), sample="async-hang"))
        no_code = await evaluator.judge_async("linear_relu", "no code", sample="async-no-code")
        assert not hang.done(), "the hang is still being judged: an answer with no code did not wait for it"
        hang.cancel()
        with pytest.raises(asyncio.CancelledError):
            await hang
        judged = await asyncio.gather(evaluator.judge_async("linear_relu", _answer("incorrect"), sample="async-bad"))
        streamed = [row async for row in evaluator.judge_many_async([("linear_relu", _answer("correct_cpp"))])]
        return [no_code, *judged, *streamed]

    rows = asyncio.run(scenario())
    assert [row["verdict"] for row in rows] == ["no_code", "incorrect", "correct"]
    assert all(row["feedback"] for row in rows)


@pytest.mark.slow  # an Evaluator of its own per kind of judge
@pytest.mark.parametrize("judges", [1, 2], ids=["judge-in-this-process", "judge-processes"])
def test_a_cancelled_answer_in_hand_is_ended_at_once_not_at_its_time_limit(warm_cache: Path, judges: int):
    # Each judge holds a hanging answer whose step limit is HANG_LIMIT_S; their callers leave. The judges must be
    # free for the next answer long before that limit: the hangs' workers were killed, not waited out.
    with Evaluator(problems=PROBLEMS, cache_dir=warm_cache, judges=judges, run_timeout_s=HANG_LIMIT_S,
                   **SETTINGS) as ev:
        async def scenario() -> tuple[dict, float]:
            hangs = [asyncio.create_task(ev.judge_async("linear_relu", _answer("hang"), sample=f"hang-{n}"))
                     for n in range(judges)]
            # every judge was sent one (white box: nothing else says so); a cancel that reaches a judge before the
            # answer's worker runs is kept for it, so the hang is killed however far it got
            while sum(station._judging is not None for station in ev._engine.stations) < judges:
                await asyncio.sleep(0.05)
            await asyncio.sleep(1.0)
            for hang in hangs:
                hang.cancel()
            started = time.monotonic()
            rows = await asyncio.gather(*(ev.judge_async("linear_relu", _answer("incorrect"), sample=f"after-{n}")
                                          for n in range(judges)))
            return rows, time.monotonic() - started

        rows, waited_s = asyncio.run(scenario())
    assert [row["verdict"] for row in rows] == ["incorrect"] * judges
    assert waited_s < HANG_LIMIT_S / 2, f"the next answers waited {waited_s:.0f} s: the hangs ran to their limit"


def test_a_problem_given_as_text_is_judged_like_a_folder(evaluator, tmp_path: Path):
    reference = (PROBLEMS / "linear_relu" / "reference.py").read_text()
    problem = problem_from_source(reference, root=tmp_path)
    row = evaluator.judge(problem, _answer("correct_cpp"))
    assert row["verdict"] == "correct" and row["problem"] == problem.id, row["reason"]
    assert evaluator.judge(problem.id, _answer("incorrect"))["verdict"] == "incorrect"  # known by its id from now on
    clash = problem_from_source(reference + "\n# another\n", problem.id, root=tmp_path / "other")
    with pytest.raises(ProblemError, match="another problem named"):
        evaluator.judge(clash, "x")


# Hole A of issue 42: a reference that rewrites the evaluator, to turn every row "correct" at 999x.
HIJACKING_REFERENCE = (PROBLEMS / "linear_relu" / "reference.py").read_text() + '''
import evalkit.schedule.evaluator as _evaluator

_finished = _evaluator.Evaluator._finished


def _always_correct(self, row, text=None):
    row = _finished(self, row, text)
    row.verdict, row.speedup_vs_eager = "correct", 999.0
    return row


_evaluator.Evaluator._finished = _always_correct
'''


def test_a_reference_given_as_text_cannot_change_another_answers_verdict(evaluator, tmp_path: Path):
    hijacker = problem_from_source(HIJACKING_REFERENCE, root=tmp_path)
    own = evaluator.judge(hijacker, _answer("incorrect"))  # checked, loaded and run: only ever in its sandboxes
    assert own["verdict"] == "incorrect", own["reason"]
    other = evaluator.judge("linear_relu", _answer("incorrect"))
    assert (other["verdict"], other["speedup_vs_eager"]) == ("incorrect", None), other["reason"]


@pytest.mark.slow  # an Evaluator of its own with two judge processes
def test_judge_processes_learn_a_problem_given_after_they_started(tmp_path: Path, warm_cache: Path):
    reference = (PROBLEMS / "linear_relu" / "reference.py").read_text()
    with Evaluator(problems=PROBLEMS, cache_dir=warm_cache, judges=2, **SETTINGS) as ev:
        assert ev.judge("linear_relu", _answer("incorrect"))["verdict"] == "incorrect"  # both judges started
        problem = problem_from_source(reference, root=tmp_path)
        rows = list(ev.judge_many([(problem, _answer("correct_cpp")), (problem, _answer("incorrect")),
                                   (problem, _answer("runtime_error"))]))
    assert sorted(row["verdict"] for row in rows) == ["correct", "incorrect", "runtime_error"], rows
    assert {row["judge"] for row in rows} <= {"cpu:0", "cpu:1"}


def test_a_deadline_cancels_what_is_left_and_an_unknown_id_can_be_a_row(evaluator):
    with pytest.raises(DeadlinePassed, match="1 of 1 answer"):
        evaluator.judge("linear_relu", _answer("hang"), timeout_s=1.0)  # builds and hangs far longer than that
    rows = list(evaluator.judge_many([("linear_reul", "x"), ("linear_relu", "no code")], on_error="row"))
    assert [(row["verdict"], row["error"] and row["error"]["kind"]) for row in rows] == [
        ("skipped", "caller_error"), ("no_code", None)]
    assert "did you mean 'linear_relu'" in rows[0]["reason"]
    assert evaluator.judge("linear_relu", _answer("incorrect"))["verdict"] == "incorrect"  # judges unharmed


@pytest.mark.slow  # an Evaluator of its own, the same C++ answer judged twice over
def test_an_identical_answer_reuses_its_row_when_asked_and_another_is_judged(warm_cache: Path):
    with Evaluator(problems=PROBLEMS, cache_dir=warm_cache, reuse_verdicts=True, **SETTINGS) as ev:
        first = ev.judge("linear_relu", _answer("correct_cpp"), sample="first")
        again = ev.judge("linear_relu", _answer("correct_cpp"), sample="again")
        other = ev.judge("linear_relu", _answer("correct_cpp") + "\n# another text\n", sample="other")
    assert first["verdict"] == again["verdict"] == other["verdict"] == "correct"
    assert again["sample"] == "again" and again["timing"] == first["timing"]
    assert any("reused the row of an identical answer" in w and "sample first" in w for w in again["warnings"])
    assert not any("reused" in w for w in other["warnings"]) and other["timing"] != first["timing"]


def test_a_callers_mistake_raises_before_anything_is_built(evaluator):
    with pytest.raises(ProblemError, match="did you mean 'linear_relu'"):
        evaluator.judge_many([("linear_relu", "x"), ("linear_reul", "x")])
    with pytest.raises(TypeError, match="must be a str"):
        evaluator.judge("linear_relu", b"bytes")


def test_two_evaluators_share_nothing_and_close_cleanly(tmp_path: Path):
    first = Evaluator(problems=PROBLEMS, cache_dir=tmp_path, **{**SETTINGS, "seed": None})
    second = Evaluator(problems=PROBLEMS, cache_dir=tmp_path, **{**SETTINGS, "seed": None})
    try:
        assert first._engine.limits.group != second._engine.limits.group
        first.close()
        first.close()  # closing twice is harmless
        assert second.judge("linear_relu", "nothing here")["verdict"] == "no_code"
    finally:
        second.close()


def test_an_evaluator_needs_no_problems_folder_for_problems_given_as_text(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no ./problems here
    reference = (PROBLEMS / "linear_relu" / "reference.py").read_text()
    with Evaluator(device="cpu", cache_dir=tmp_path / "cache", baselines=()) as ev:
        assert ev.problems == {}
        row = ev.judge(Problem.from_source(reference), "I could not write it.")
    assert row["verdict"] == "no_code" and row["problem"].startswith("inline_")
    with pytest.raises(ProblemError, match="missing does not exist"):
        Evaluator(problems=tmp_path / "missing", device="cpu", cache_dir=tmp_path / "cache")


@pytest.mark.skipif(torch.cuda.is_available(), reason="asks for a GPU where there is none")
def test_a_gpu_asked_for_where_there_is_none_is_an_error_not_a_cpu_run(tmp_path: Path):
    from evalkit.schedule.options import ScoreError

    with pytest.raises(ScoreError, match="--gpus 1,: asks for GPUs"):
        Evaluator(device="auto", gpus="1,", cache_dir=tmp_path)


def test_importing_evalkit_loads_no_torch_until_the_api_is_used():
    code = "import sys, evalkit; assert 'torch' not in sys.modules, 'import evalkit loaded torch'; print('ok')"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_the_api_import_is_silent_and_keeps_the_callers_warning_filters():
    code = ("import warnings, evalkit; warnings.filterwarnings('error', message='mine'); before = list(warnings.filters)"
            "; evalkit.Evaluator; assert all(f in warnings.filters for f in before), 'a filter was lost'; print('ok')")
    done = subprocess.run([sys.executable, "-W", "default", "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
    assert done.stderr == "", done.stderr  # torch's NumPy warning among others, where NumPy is missing


@pytest.mark.parametrize(("settings", "message"), [
    ({"timeout": 10}, "unknown setting(s) 'timeout' (did you mean 'run_timeout_s'?)"),
    ({"timing_trials": "5"}, "'timing_trials' must be an integer, got '5'"),
    ({"correctness_trials": 0}, "'correctness_trials' must be a finite number >= 1, got 0"),
    ({"atol": -1}, "'atol' must be a finite number >= 0, got -1"),
    ({"timing_budget_s": 0}, "'timing_budget_s' must be a finite number > 0, got 0"),
    ({"judges": 0}, "'judges' must be at least 1, got 0"),
    ({"memory_gib": 0.01}, "'memory_gib' must be at least 0.5, got 0.01"),
    ({"seed": "3"}, "'seed' must be a number (int), got '3'"),
    ({"baselines": ["eager", "eagre"]}, "unknown baseline(s) 'eagre'"),
    ({"baselines": "none,eager"}, "'none' means no baseline, so it cannot be listed with others"),  # as --baselines
    ({"baselines": ["eager", "eager"]}, "a baseline is listed twice"),
    ({"precision": "fp8"}, """'precision' must be one of "fp32", "fp16", "bf16", got 'fp8'"""),
])
def test_a_wrong_keyword_setting_is_refused_with_what_would_do(settings, message):
    from evalkit.schedule.options import SettingError

    with pytest.raises(SettingError) as refused:
        Evaluator(problems=FIXTURES / "judge_problems", device="cpu", **settings)
    assert message in str(refused.value)


def test_a_precision_keyword_sets_the_dtype_and_the_default_tolerances():
    from evalkit.schedule.options import judge_options
    from evalkit.sources.problems import load_problem

    problems = {"linear_relu": load_problem(FIXTURES / "judge_problems" / "linear_relu")}

    def plan(settings):
        return judge_options("cpu", settings).plans(problems)["linear_relu"]
    bf16 = plan({"precision": "bf16"}).settings
    assert (bf16.precision, bf16.atol, bf16.rtol) == ("bf16", 5e-2, 5e-2)
    given = plan({"precision": "bf16", "atol": 1e-3}).settings
    assert (given.atol, given.rtol) == (1e-3, 5e-2)  # a tolerance given wins; the other stays the precision's
    assert plan({}).precision == "fp32"


def test_baselines_take_the_command_lines_spelling():
    from evalkit.schedule.options import judge_options

    assert judge_options("cpu", {"baselines": "eager"}).baselines == ("eager",)
    assert judge_options("cpu", {"baselines": "eager,compile"}).baselines == ("eager", "compile")
    assert judge_options("cpu", {"baselines": "none"}).baselines == ()


def test_a_cpu_evaluator_says_that_the_compile_baseline_takes_minutes(tmp_path: Path, caplog):
    with caplog.at_level("WARNING"):
        Evaluator(problems=PROBLEMS, device="cpu", cache_dir=tmp_path).close()
    assert "torch.compile baseline" in caplog.text and "baselines='eager'" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING"):
        Evaluator(problems=PROBLEMS, device="cpu", baselines="eager", cache_dir=tmp_path).close()
    assert "torch.compile baseline" not in caplog.text
