"""`benchmarks/builds_alone.py` on CPU: an RL step's builds through evalkit's build stage, with no judging beside them
(the denominator of issue 43's cold step). The session's prebuilt builds stand in for cold ones: the plumbing is
what is tested (which answers build, in one pool, their statuses, when the last ended), not a compiler's speed."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT

ANSWERS = FIXTURES / "judge_submissions" / "fixtures" / "linear_relu"


def test_the_builds_of_a_step_are_built_in_one_pool_and_the_answers_that_build_nothing_are_skipped(
        warm_cache: Path, tmp_path: Path) -> None:
    answers = tmp_path / "answers" / "linear_relu"
    answers.mkdir(parents=True)
    for name in ("compile_error.py", "correct_cpp.py", "correct_python.md", "no_code.txt"):
        shutil.copy(ANSWERS / name, answers / name)
    out = tmp_path / "builds.json"
    done = subprocess.run([sys.executable, "benchmarks/builds_alone.py", "--device", "cpu", "--problems",
                           str(FIXTURES / "judge_problems"), "--answers", str(answers.parent), "--group", "6",
                           "--cache", str(warm_cache), "--json", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    figures = json.loads(out.read_text())
    # group 6 cycles through the 4 files (sorted): compile_error, correct_cpp, correct_python, no_code, then the
    # first two again: four builds, two of each text, every one found in the session's cache
    assert figures["builds"] == 4 and figures["statuses"] == {"compile_error": 2, "ok": 2}
    assert figures["skipped"] == {"builds_nothing": 1, "no_code": 1}
    assert all(build["cached"] and build["ended_s"] is not None for build in figures["per_build"])
    assert figures["makespan_s"] == max(build["ended_s"] for build in figures["per_build"])
    assert "4 builds" in done.stdout and figures["jobs"] >= 1


def test_a_group_below_one_is_refused_before_anything_builds() -> None:
    done = subprocess.run([sys.executable, "benchmarks/builds_alone.py", "--answers", "nowhere", "--group", "0"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "--group must be at least 1" in done.stderr


def test_answers_that_are_no_folder_are_named_before_anything_builds(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "benchmarks/builds_alone.py", "--device", "cpu", "--answers",
                           str(tmp_path / "nowhere")], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1 and f"--answers {tmp_path / 'nowhere'} is no folder" in done.stderr
    assert "Traceback" not in done.stderr


def test_builds_for_a_gpu_on_a_machine_without_one_are_refused_with_what_to_do(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    answers = tmp_path / "answers" / "linear_relu"
    answers.mkdir(parents=True)
    shutil.copy(ANSWERS / "correct_cpp.py", answers / "correct_cpp.py")
    done = subprocess.run([sys.executable, "benchmarks/builds_alone.py", "--device", "cuda", "--problems",
                           str(FIXTURES / "judge_problems"), "--answers", str(answers.parent), "--group", "1"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1 and "torch sees no CUDA GPU" in done.stderr and "--device cpu" in done.stderr
    assert "Traceback" not in done.stderr
