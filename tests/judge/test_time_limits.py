"""Time limits come from the reference's own time: a hang costs seconds, a slow correct answer is not cut off."""

from __future__ import annotations

import json
import re
import shutil
from types import SimpleNamespace

from click.testing import CliRunner

from conftest import FIXTURES
from evalkit.cli.main import main
from evalkit.judge import submission_judge, time_limits
from evalkit.judge.submission_judge import Judge, JudgeSettings
from evalkit.judge.reference import ReferenceProblem
from evalkit.judge.time_limits import TimeLimits, reference_ms, time_limits as limits_for
from evalkit.sandbox.launcher import Limits
from evalkit.schedule.options import judge_options
from evalkit.sources.problems import load_problem


def test_a_fast_reference_gets_the_floors():
    limits = TimeLimits.derived(reference_ms=2.0)
    assert (limits.load_s, limits.first_call_s, limits.call_s) == (60.0, 10.0, 10.0)


def test_a_slow_reference_allows_a_thousand_times_its_time():
    limits = TimeLimits.derived(reference_ms=100.0)
    assert limits.call_s == 100.0 and limits.first_call_s == 100.0


def test_an_override_sets_every_step():
    assert TimeLimits.fixed(7.0) == TimeLimits(7.0, 7.0, 7.0)


def test_the_hang_limit_caps_every_derived_limit_of_an_answer_but_not_a_baselines():
    slow = TimeLimits.derived(reference_ms=150.0)  # a CPU reference: 150 s a call at 1000x
    capped = limits_for(150.0, None, hang_limit_s=60.0)
    assert capped == slow.capped(60.0) and capped.ceiling_s == 60.0
    assert (capped.load_s, capped.first_call_s, capped.call_s) == (60.0, 60.0, 60.0)
    assert capped.for_answer(True).first_call_s == 60.0  # an answer that may compile then too
    assert capped.request_s(32, first=False) == 60.0  # a request of many calls: the ceiling does not multiply
    assert limits_for(150.0, None) == slow and slow.request_s(2, first=False) == 300.0  # a baseline's: uncapped
    # below the floors, the ceiling wins: a hang costs what an RL loop asked for
    low = limits_for(2.0, None, hang_limit_s=4.0)
    assert (low.load_s, low.first_call_s, low.call_s, low.for_answer(True).first_call_s) == (4.0, 4.0, 4.0, 4.0)
    assert limits_for(2.0, 7.0, hang_limit_s=4.0) == TimeLimits.fixed(7.0)  # --timeout is every step's limit


def test_the_hang_limit_is_one_setting_from_the_options_to_the_judge():
    problems = {"linear_relu": load_problem(FIXTURES / "judge_problems" / "linear_relu")}

    def judged(settings):
        return JudgeSettings.of(judge_options("cpu", settings).plans(problems)["linear_relu"], seed=1)
    assert judged({}).hang_limit_s == 60.0  # the declared default
    assert judged({"hang_limit_s": 5}).hang_limit_s == 5.0


def test_a_baseline_keeps_the_derived_limits_above_the_hang_limit(tmp_path, monkeypatch):
    ref = ReferenceProblem(load_problem(FIXTURES / "judge_problems" / "linear_relu"), "cpu", init_seed=1)
    judge = Judge(ref, JudgeSettings(atol=1e-2, rtol=1e-2, correctness_trials=1, timing_trials=3, warmup_trials=1,
                                     run_timeout_s=None, seed=1, hang_limit_s=1.0), Limits())
    given: list[TimeLimits] = []

    class Prepared:  # records the limits the baseline's session was given, runs nothing
        def __init__(self, judge, settings, session, verify=True):
            given.append(session.limits)
            self.stage_seconds: dict[str, float] = {}

        def prepare(self, code_path, stages):
            return SimpleNamespace(flags=[])

    monkeypatch.setattr(submission_judge, "Contender", Prepared)
    judge.start_baseline("eager", SimpleNamespace(workdir=tmp_path))
    assert judge.time_limits.first_call_s == 1.0  # an answer's: the ceiling
    assert given[0].first_call_s >= time_limits.JIT_FIRST_CALL_S and given[0].ceiling_s is None  # trusted code


def test_the_reference_is_timed_on_its_device():
    ref = ReferenceProblem(load_problem(FIXTURES / "judge_problems" / "linear_relu"), "cpu", init_seed=1)
    assert 0 < reference_ms(ref, seed=1) < 1000


def test_a_hang_costs_the_derived_limit_not_minutes(tmp_path, monkeypatch):
    # The shipped call floors (10 s) are lowered so the test stays short, and the load limit raised so that no
    # loaded machine's slow worker start can reach it: the rule under test is that the hang is bounded by the
    # limits derived for calls, never by LOAD_S (its reason names the limit that ended it).
    monkeypatch.setattr(time_limits, "LOAD_S", 120.0)
    monkeypatch.setattr(time_limits, "FIRST_CALL_S", 3.0)
    monkeypatch.setattr(time_limits, "CALL_FLOOR_S", 3.0)
    rows = _scored(tmp_path, {"hang.py": "hang.py", "correct_python.md": "ok.md"}, "--timing-trials", "3", "--warmup", "1")
    assert rows["hang"]["verdict"] == "timeout"
    # the first request's limit: FIRST_CALL_S, or SLOWDOWN_ALLOWED x the reference's time for each of its calls
    # (about 3 s here; more on a loaded machine, where the reference itself measures slower), never LOAD_S's 120:
    # the wall clock of the whole run is not asked, since a loaded machine stretches the rest of it too
    limit = re.search(r"exceeded its (\d+(?:\.\d+)?) s limit", rows["hang"]["reason"])
    assert limit and 3.0 <= float(limit.group(1)) < time_limits.LOAD_S, rows["hang"]["reason"]
    assert "stage 'forward'" in rows["hang"]["reason"], rows["hang"]["reason"]
    assert rows["ok"]["verdict"] == "correct"


def test_a_request_of_several_calls_gets_their_time_but_floors_do_not_multiply():
    limits = TimeLimits.derived(reference_ms=2.0)  # 2 s a call at 1000x, under the 10 s floor
    assert limits.request_s(1, first=False) == limits.call_s == 10.0
    assert limits.request_s(10, first=False) == 20.0  # ten calls of up to 2 s each
    assert limits.request_s(10, first=True) == max(limits.first_call_s, 20.0)
    assert TimeLimits.fixed(7.0).request_s(32, first=False) == 7.0  # --timeout is every step's limit


def test_the_first_call_is_long_only_for_an_answer_that_may_compile_then(tmp_path):
    limits = TimeLimits.derived(reference_ms=2.0)
    assert limits.first_call_s == 10.0 and limits.for_answer(True).first_call_s == 60.0
    assert limits.for_answer(False) == limits
    assert TimeLimits.fixed(7.0).for_answer(True).first_call_s == 7.0  # --timeout is every step's limit
    built, lazy = tmp_path / "built", tmp_path / "lazy"
    (built / "ext_abc").mkdir(parents=True)
    (built / "ext_abc" / "ext_abc.so").write_bytes(b"")
    lazy.mkdir()
    plain = "from torch.utils.cpp_extension import load_inline\n# compile the CUDA code\next = load_inline(...)\n"
    assert not time_limits.compiles_on_first_call(plain, built)
    assert time_limits.compiles_on_first_call(plain, lazy)  # load_inline, nothing built ahead: it builds in forward
    assert not time_limits.compiles_on_first_call("import torch\nclass ModelNew: ...\n", lazy)
    for jit in ("import triton", "self.f = torch.compile(self.f)", "@torch.jit.script", "from numba import cuda",
                "extra_cuda_cflags=['-gencode=arch=compute_80,code=compute_80']"):  # PTX: the driver compiles it
        assert time_limits.compiles_on_first_call(f"{jit}\n{plain}", built), jit


def test_a_hang_frees_its_judge_within_the_hang_limit(tmp_path):
    # --hang-limit below the 10 s call floor: the judge applies the ceiling to the hang's first call, and its one
    # judge goes on to the next answer (the limit is read from the row's reason, never from the wall clock)
    rows = _scored(tmp_path, {"hang.py": "hang.py", "incorrect.py": "wrong.py"}, "--judges", "1", "--hang-limit", "8")
    assert rows["hang"]["verdict"] == "timeout"
    assert "stage 'forward' exceeded its 8 s limit" in rows["hang"]["reason"], rows["hang"]["reason"]
    assert rows["wrong"]["verdict"] == "incorrect", rows["wrong"]["reason"]
    assert json.loads((tmp_path / "out" / "run.json").read_text())["settings"]["hang_limit_s"] == 8.0


def _scored(tmp_path, answers: dict[str, str], *options: str) -> dict[str, dict]:
    """The rows of ``evalkit score`` on CPU over fixture answers of linear_relu (fixture name: name in the run)."""
    run = tmp_path / "subs" / "run" / "linear_relu"
    run.mkdir(parents=True)
    for fixture, name in answers.items():
        shutil.copy(FIXTURES / "judge_submissions" / "fixtures" / "linear_relu" / fixture, run / name)
    result = CliRunner().invoke(main, ["score", str(tmp_path / "subs"), "--problems", str(FIXTURES / "judge_problems"),
                                       "--out", str(tmp_path / "out"), "--device", "cpu", "--baselines", "none",
                                       "--seed", "1", "--cache-dir", str(tmp_path / "cache"), *options],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return {r["sample"]: r for r in map(json.loads, (tmp_path / "out" / "results.jsonl").read_text().splitlines())}
