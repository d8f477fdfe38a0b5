"""Time limits come from the reference's own time: a hang costs seconds, a slow correct answer is not cut off."""

from __future__ import annotations

import json
import re
import shutil

from click.testing import CliRunner

from conftest import FIXTURES
from evalkit.cli.main import main
from evalkit.judge import time_limits
from evalkit.judge.reference import ReferenceProblem
from evalkit.judge.time_limits import TimeLimits, reference_ms
from evalkit.sources.problems import load_problem


def test_a_fast_reference_gets_the_floors():
    limits = TimeLimits.derived(reference_ms=2.0)
    assert (limits.load_s, limits.first_call_s, limits.call_s) == (60.0, 10.0, 10.0)


def test_a_slow_reference_allows_a_thousand_times_its_time():
    limits = TimeLimits.derived(reference_ms=100.0)
    assert limits.call_s == 100.0 and limits.first_call_s == 100.0


def test_an_override_sets_every_step():
    assert TimeLimits.fixed(7.0) == TimeLimits(7.0, 7.0, 7.0)


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
    run = tmp_path / "subs" / "run" / "linear_relu"
    run.mkdir(parents=True)
    shutil.copy(FIXTURES / "judge_submissions" / "fixtures" / "linear_relu" / "hang.py", run / "hang.py")
    shutil.copy(FIXTURES / "judge_submissions" / "fixtures" / "linear_relu" / "correct_python.md", run / "ok.md")
    result = CliRunner().invoke(main, ["score", str(tmp_path / "subs"), "--problems", str(FIXTURES / "judge_problems"),
                                       "--out", str(tmp_path / "out"), "--device", "cpu", "--baselines", "none",
                                       "--timing-trials", "3", "--warmup", "1", "--seed", "1",
                                       "--cache-dir", str(tmp_path / "cache")], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    rows = {r["sample"]: r for r in map(json.loads, (tmp_path / "out" / "results.jsonl").read_text().splitlines())}
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
