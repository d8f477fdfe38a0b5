"""`benchmarks/rl_step.py` at small scale on CPU: a GRPO-like step against `evalkit serve` with references sent as
text, twice, every reward back, and the figures it prints (time to first reward, rewards per minute, the server's
memory across steps)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import FIXTURES, ROOT, benchmark_module



def test_a_step_past_its_limit_is_cut_short_with_the_rewards_back_and_the_answers_still_out(monkeypatch) -> None:
    """A step that does not end within ``--step-limit`` records what came back and which answers did not, rather than
    polling on until a time limit around the run kills it with nothing written (two judges' warm steps on one H200
    did not end: docs/gpu-runs/2026-11-29-judges-share-h200)."""
    rl_step = benchmark_module("rl_step")
    row = {"item": 1, "verdict": "correct", "stage_seconds": {"timing_s": 2.0}, "feedback": "ok", "timing": {}}
    replies = {"/v1/batch": [{"id": "a"}, {"id": "b"}], "/v1/batch/a": {"done": True, "rows": [dict(row, item=0)]},
               "/v1/batch/b": {"done": False, "rows": [row]}}

    def call(url: str, body=None):
        reply = replies[url.removeprefix("http://judge")]
        return reply.pop(0) if isinstance(reply, list) else reply
    monkeypatch.setattr(rl_step, "call", call)
    work = {"p": ("reference", ["x"]), "q": ("reference", ["x", "y", "z"])}
    figures = rl_step.step("http://judge", work, limit_s=0.0)
    assert figures["rewards"] == 2 and figures["outstanding"] == {"q": [0, 2]}
    assert figures["last_reward_s"] is None and set(figures["answers"]) == {"p#0", "q#1"}
    assert figures["stage_seconds_by_problem"] == {"p": {"answers": 1, "correct": 1, "timing_s": 2.0},
                                                   "q": {"answers": 1, "correct": 1, "timing_s": 2.0}}


def test_the_steps_whose_verdicts_moved_are_named_a_step_cut_short_aside() -> None:
    """Each step judges the same answers: a step whose verdicts differ from the first's is named, with the server's
    log (a CPU soak's ninth step once came back with 40 rows skipped, and its log was gone: docs/rl.md)."""
    rl_step = benchmark_module("rl_step")
    usual, moved = {"correct": 48, "no_code": 2}, {"correct": 40, "skipped": 40}
    steps = [{"verdicts": usual}, {"verdicts": dict(usual)}, {"verdicts": moved}, {"verdicts": usual},
             {"verdicts": {"correct": 3}, "outstanding": {"p": [1]}}]
    assert rl_step.moved_verdicts(steps) == [3]
    assert rl_step.moved_verdicts([]) == []


@pytest.mark.parametrize("limit", ["0", "-5", "nan"])
def test_a_step_limit_that_is_no_positive_number_of_seconds_is_refused_before_anything_starts(limit: str) -> None:
    done = subprocess.run([sys.executable, "benchmarks/rl_step.py", "--answers", "nowhere", "--step-limit", limit],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "--step-limit must be a number of seconds > 0" in done.stderr


# `evalkit serve` in a subprocess judging two GRPO steps, with cold builds in its own cache.
@pytest.mark.slow
def test_two_steps_bring_back_every_reward_and_print_the_figures(tmp_path: Path) -> None:
    pytest.importorskip("starlette")
    pytest.importorskip("uvicorn")
    out = tmp_path / "rl.json"
    done = subprocess.run([sys.executable, "benchmarks/rl_step.py", "--device", "cpu",
                           "--problems", str(FIXTURES / "judge_problems"),
                           "--answers", str(FIXTURES / "judge_submissions" / "fixtures"), "--steps", "2",
                           "--group", "3", "--extra=--timing-trials 3 --baselines eager", "--json",
                           str(out)], cwd=ROOT, capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stdout + done.stderr
    figures = json.loads(out.read_text())
    assert figures["problems"] == 2 and [s["rewards"] for s in figures["steps"]] == [6, 6]
    assert all(s["first_reward_s"] is not None and s["server_rss_mib"] > 0 for s in figures["steps"])
    assert figures["steps"][0]["verdicts"] == figures["steps"][1]["verdicts"], "the same answers, the same verdicts"
    answers = figures["steps"][-1]["answers"]
    assert len(answers) == 6 and all(a["stage_seconds"] for a in answers.values() if a["verdict"] != "no_code")
    assert all(a["requests"] and a["stopped_by"] and a["attempts"] and a["overhead_ms"] is not None
               for a in answers.values() if a["verdict"] == "correct")
    assert "step 2:" in done.stdout and "server memory from the first step to the last" in done.stdout


def test_each_steps_gpu_figures_are_the_samplers_window_over_that_step(monkeypatch) -> None:
    """Each step records the GPU's busy fraction and memory over that step alone: whether overlapped judges keep the
    GPU busier or only take turns on it (docs/gpu-runs/2026-11-30-two-judges-groups-h200)."""
    rl_step = benchmark_module("rl_step")
    windows = iter([{"0": {"samples": 3, "busy_pct_median": 50.0}}, {"0": {"samples": 0}}])

    class Sampler:
        def window_figures(self):
            return next(windows)

    monkeypatch.setattr(rl_step, "step", lambda base, work, limit: {"first_reward_s": None, "rewards": 0, "wall_s": 1.0,
                                                                     "rewards_per_minute": 0.0, "verdicts": {},
                                                                     "flags": {}, "stage_seconds": {},
                                                                     "stage_seconds_by_problem": {}})
    monkeypatch.setattr(rl_step, "resident_mib", lambda pid: 1.0)
    monkeypatch.setattr(rl_step, "kept_rows_mib", lambda base: 0.5)
    used = iter([(10.0, 100.0), (13.0, 140.0), (13.5, 141.0)])  # the server's CPU seconds: before, after each step
    monkeypatch.setattr(rl_step, "cpu_seconds", lambda pid: next(used))
    args = SimpleNamespace(steps=2, step_limit=math.inf, json=None)
    steps = rl_step.run_steps(args, "http://judge", {}, 1, Sampler())
    assert [figures["gpu"] for figures in steps] == [{"samples": 3, "busy_pct_median": 50.0}, {"samples": 0}]
    assert [figures["kept_rows_mib"] for figures in steps] == [0.5, 0.5]
    assert [figures["cpu_s"] for figures in steps] == [{"server": 3.0, "ended_children": 40.0},
                                                       {"server": 0.5, "ended_children": 1.0}]


def test_a_process_cpu_seconds_are_its_own_and_its_ended_childrens() -> None:
    """What a step's ``cpu_s`` is read from: this process's own CPU time grows as it works, and a child it reaped
    adds to its children's."""
    rl_step = benchmark_module("rl_step")
    own, children = rl_step.cpu_seconds(os.getpid())
    deadline = time.process_time() + 0.3
    while time.process_time() < deadline:  # CPU time, not wall time: holds on a loaded machine
        pass
    subprocess.run([sys.executable, "-c", "import time\nend = time.process_time() + 0.3\n"
                    "while time.process_time() < end: pass"], check=True)
    own_after, children_after = rl_step.cpu_seconds(os.getpid())
    assert own_after - own >= 0.25 and children_after - children >= 0.25


def test_distinct_rollouts_differ_in_the_code_evalkit_extracts_and_still_parse(tmp_path: Path) -> None:
    """``--distinct``: each answer of a group is a text of its own down to the code evalkit judges (a group cycling
    through one file would send one build again and again); an answer with no code stays as it is."""
    import ast

    from evalkit.intake.extract import extract

    rl_step = benchmark_module("rl_step")
    answers = tmp_path / "answers" / "linear_relu"
    answers.mkdir(parents=True)
    for name in ("correct_python.md", "correct_cpp.py", "no_code.txt"):
        (answers / name).write_text((FIXTURES / "judge_submissions" / "fixtures" / "linear_relu" / name).read_text())
    _, texts = rl_step.groups(FIXTURES / "judge_problems", tmp_path / "answers", 6, distinct=True)["linear_relu"]
    codes = [extract(text).code for text in texts]
    with_code = [code for code in codes if code]
    assert len(with_code) == 4 and len(set(with_code)) == 4, "each answer's code is its own"
    for code in with_code:
        ast.parse(code)
    _, same = rl_step.groups(FIXTURES / "judge_problems", tmp_path / "answers", 6)["linear_relu"]
    assert len({extract(text).code for text in same if extract(text).code}) == 2
