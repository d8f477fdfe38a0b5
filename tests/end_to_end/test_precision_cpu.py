"""Precision modes end to end on CPU: a problem judged in bf16 (``--precision bf16``) casts the weights and inputs,
demands bf16 outputs, keeps the float64 oracle, times the baseline in bf16, and records its precision and its plan; a
resume in another precision is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import FIXTURES
from evalkit.cli.main import main
from feedback_checks import check_feedback
from shared_builds import cache_sharing_builds

PROBLEMS = FIXTURES / "judge_problems"
ANSWERS = FIXTURES / "precision_submissions"

# Three runs of every precision answer, each timed in bf16 or fp16 against its baseline: minutes on 2 cores.
pytestmark = pytest.mark.slow


def _score(out: Path, cache: Path, *extra: str, problems: Path = PROBLEMS):
    args = ["score", str(ANSWERS), "--problems", str(problems), "--out", str(out), "--device", "cpu",
            "--baselines", "eager", "--timing-trials", "5", "--warmup", "1",
            "--cache-dir", str(cache), "--seed", "1", "--jobs", "2", *extra]
    return CliRunner().invoke(main, args, catch_exceptions=False)


@pytest.fixture(scope="module")
def bf16(tmp_path_factory: pytest.TempPathFactory, prebuilt: Path) -> tuple[Path, Path, dict[str, dict]]:
    base = tmp_path_factory.mktemp("bf16")
    out, cache = base / "report", cache_sharing_builds(prebuilt, base / "cache")
    result = _score(out, cache, "--precision", "bf16")
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    return out, cache, {row["sample"]: row for row in rows}


def test_an_extension_written_for_bf16_is_correct_against_float64(bf16):
    row = bf16[2]["dispatched_cpp"]
    assert row["verdict"] == "correct", row["reason"]
    correctness = row["correctness"]
    assert correctness["reference_precision"] == "float64"
    assert (correctness["atol"], correctness["rtol"]) == (5e-2, 5e-2)  # bf16's default tolerance
    # bf16 arithmetic is far coarser than float32's, and PyTorch's own bf16 result is just as coarse: not flagged.
    assert correctness["pytorch_own"]["rel_l2_err"] > 1e-4
    assert "reduced_precision" not in row["flags"]
    assert row["speedup_vs_eager"] is not None and row["baselines"]["eager"]["median_ms"] > 0


def test_a_zeroed_output_is_incorrect(bf16):
    row = bf16[2]["zeroed"]
    assert row["verdict"] == "incorrect"
    assert row["correctness"]["pattern"] == "all zeros"
    for every in bf16[2].values():
        check_feedback(every)


def test_a_float32_only_extension_fails_with_its_own_error(bf16):
    row = bf16[2]["float32_only_cpp"]
    assert row["verdict"] == "runtime_error"
    assert "BFloat16" in row["error"]["message"], row["error"]["message"]


def test_an_output_of_another_dtype_is_the_wrong_form(bf16):
    row = bf16[2]["upcast_output"]
    assert row["verdict"] == "incorrect"
    assert "bfloat16" in row["reason"] and "float32" in row["reason"], row["reason"]


def test_rows_and_run_json_record_the_precision(bf16):
    out, _, rows = bf16
    assert {row["precision"] for row in rows.values()} == {"bf16"}
    recorded = json.loads((out / "run.json").read_text())
    assert recorded["settings"]["precision"] == "bf16"
    plan = recorded["plans"]["linear_relu"]  # the run's plan of the problem: its files, its resolved settings
    assert (plan["settings"]["precision"], plan["settings"]["atol"]) == ("bf16", 5e-2)
    assert {row["problem_sha256"] for row in rows.values()} == {plan["problem_sha256"]}


def test_a_resume_in_another_precision_is_refused(bf16):
    out, cache, _ = bf16
    result = _score(out, cache, "--resume", "--precision", "fp16")
    assert result.exit_code != 0
    assert "--precision: recorded bf16, now fp16" in result.output, result.output


def test_a_resume_after_the_problems_precision_changed_is_refused(tmp_path, bf16):
    problems = tmp_path / "problems"
    (problems / "linear_relu").mkdir(parents=True)
    (problems / "linear_relu" / "reference.py").write_text((PROBLEMS / "linear_relu" / "reference.py").read_text())
    toml = problems / "linear_relu" / "problem.toml"
    toml.write_text('precision = "bf16"\n')
    out, cache = tmp_path / "report", bf16[1]
    first = _score(out, cache, problems=problems)
    assert first.exit_code == 0, first.output
    assert {json.loads(line)["precision"] for line in (out / "results.jsonl").read_text().splitlines()} == {"bf16"}
    toml.write_text('precision = "fp16"\n')
    result = _score(out, cache, "--resume", problems=problems)
    assert result.exit_code != 0
    assert "linear_relu (its files" in result.output, result.output  # each change of its plan named
    assert "precision: recorded bf16, now fp16" in result.output, result.output
