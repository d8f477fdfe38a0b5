"""`benchmarks/float64_costs.py` on CPU: one call's float64 work timed by part, in this process and through a
sandboxed reference worker, with PyTorch's own output passing its checks (a comparison refused for its dtype would
time nothing)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import FIXTURES, ROOT, benchmark_module


def test_a_call_is_timed_by_part_and_its_checks_pass():
    float64_costs = benchmark_module("float64_costs")
    problem = float64_costs.load_problem(FIXTURES / "judge_problems" / "linear_relu")
    parts = float64_costs.in_process(problem, "cpu", calls=1)
    assert set(float64_costs.PARTS) <= set(parts) and all(parts[part] >= 0 for part in float64_costs.PARTS)
    assert parts["precision"] == "float64"


@pytest.mark.slow
def test_the_script_prints_both_ways_and_writes_its_figures(tmp_path):
    out = tmp_path / "float64.json"
    problem = FIXTURES / "judge_problems" / "scale_rows"
    done = subprocess.run([sys.executable, "benchmarks/float64_costs.py", str(problem), "--device", "cpu", "--calls", "1",
                           "--json", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    figures = json.loads(out.read_text())["problems"]["scale_rows"]
    assert figures["sandboxed"]["precision"] == "float64" and figures["sandboxed"]["float64"] > 0
    assert "the sandboxed float64 request adds" in done.stdout


@pytest.mark.parametrize("args, says", [(["no-such-problem"], "no-such-problem: no such problem folder"),
                                        ([str(FIXTURES / "judge_problems" / "scale_rows"), "--calls", "0"],
                                         "at least one call is needed")])
def test_a_bad_folder_or_count_is_refused_before_anything_runs(args, says):
    done = subprocess.run([sys.executable, "benchmarks/float64_costs.py", *args, "--device", "cpu"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and says in done.stderr and "Traceback" not in done.stderr, done.stderr
