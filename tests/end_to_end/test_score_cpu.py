"""End to end on CPU: every verdict produced by `evalkit score` on tiny fixtures, through the CLI."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import FIXTURES
from evalkit.cli.main import main
from feedback_checks import check_feedback
from shared_builds import cache_sharing_builds

PROBLEMS = FIXTURES / "judge_problems"
SUBMISSIONS = FIXTURES / "judge_submissions"

EXPECTED = {
    ("linear_relu", "correct_python"): "correct",
    ("linear_relu", "correct_cpp"): "correct",
    ("linear_relu", "seeded_weights"): "correct",
    ("linear_relu", "compile_error"): "compile_error",
    ("linear_relu", "incorrect"): "incorrect",
    ("linear_relu", "wrong_shape"): "incorrect",
    ("linear_relu", "mutates_input"): "incorrect",
    ("linear_relu", "runtime_error"): "runtime_error",
    ("linear_relu", "interface_not_module"): "interface_error",
    ("linear_relu", "interface_ctor"): "interface_error",
    ("linear_relu", "interface_forward_args"): "interface_error",
    ("linear_relu", "crash"): "crash",
    ("linear_relu", "hang"): "timeout",
    ("linear_relu", "syntax_error"): "syntax_error",
    ("linear_relu", "no_code"): "no_code",
    ("linear_relu", "needs_cuda"): "skipped",
    ("scale_rows", "correct"): "correct",
}


def _score(out: Path, cache: Path, *extra: str, submissions: Path = SUBMISSIONS):
    args = ["score", str(submissions), "--problems", str(PROBLEMS), "--out", str(out), "--device", "cpu",
            "--baselines", "eager", "--timing-trials", "5", "--warmup", "1",
            "--cache-dir", str(cache), "--seed", "1", "--jobs", "2", *extra]
    return CliRunner().invoke(main, args, catch_exceptions=False)


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory, prebuilt: Path) -> tuple[Path, Path, list[dict]]:
    base = tmp_path_factory.mktemp("score")
    out, cache = base / "report", cache_sharing_builds(prebuilt, base / "cache")
    result = _score(out, cache)
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    return out, cache, rows


def _by_key(rows: list[dict]) -> dict[tuple[str, str], dict]:
    return {(r["problem"], r["sample"]): r for r in rows}


def test_every_fixture_gets_its_verdict(scored):
    _, _, rows = scored
    got = {key: row["verdict"] for key, row in _by_key(rows).items()}
    assert got == EXPECTED


def test_rows_carry_the_required_fields(scored):
    _, _, rows = scored
    for row in rows:
        for field in ("run", "problem", "sample", "path", "sha256", "verdict", "reason", "stage_seconds",
                      "schema_version"):
            assert field in row, (field, row["sample"])
        assert row["run"] == "fixtures"
        assert row["reason"] and "\n" not in row["reason"]


def test_correct_rows_have_errors_timings_and_speedups(scored):
    _, _, rows = scored
    row = _by_key(rows)[("linear_relu", "correct_cpp")]
    assert row["correctness"]["trials"] == 5
    assert row["correctness"]["reference_precision"] == "float64"
    assert row["correctness"]["max_abs_err"] < 1e-5
    assert row["correctness"]["pytorch_own"]["max_abs_err"] < 1e-5
    assert row["correctness"]["weights"] == "state_dict"
    assert row["correctness"]["precision_class"] == "float32"
    for key in ("median_ms", "mean_ms", "std_ms", "min_ms", "max_ms", "iqr_ms", "count"):
        assert key in row["timing"]
    assert row["timing"]["count"] == row["timing"]["requests"] == 5  # --timing-trials 5: the most, and here the least
    assert row["timing"]["stopped_by"] in ("precision", "max_trials")
    assert row["speedup_vs_eager"] and row["speedup_vs_eager"] > 0
    assert row["baselines"]["eager"]["median_ms"] > 0
    assert _by_key(rows)[("linear_relu", "seeded_weights")]["correctness"]["weights"] == "seeded"


def test_times_are_the_judges_own_and_baselines_take_the_same_path(scored):
    _, _, rows = scored
    row = _by_key(rows)[("linear_relu", "correct_cpp")]
    timing, eager = row["timing"], row["baselines"]["eager"]
    assert timing["clock"] == eager["clock"] == "judge"  # the reference judged like a submission
    assert timing["overhead_ms"] > 0 and eager["overhead_ms"] > 0
    assert timing["requests"] == eager["requests"] == 5 and eager["stopped_by"] in ("precision", "max_trials")
    assert timing["median_ms"] == pytest.approx(timing["wall_median_ms"] - timing["overhead_ms"], abs=1e-6) or \
        timing["below_resolution"]


def test_on_cpu_an_answer_that_calls_no_native_code_it_built_is_flagged_no_custom_kernel(scored):
    _, _, rows = scored
    assert "no_custom_kernel" in _by_key(rows)[("linear_relu", "correct_python")]["flags"]
    cpp = _by_key(rows)[("linear_relu", "correct_cpp")]
    assert "no_custom_kernel" not in cpp["flags"]
    assert cpp["correctness"]["kernels"] == ["conv2d.relu_forward"]  # the function of its extension forward called


def test_an_answer_that_builds_nothing_skips_the_build_sandbox_and_is_judged_all_the_same(scored):
    _, _, rows = scored
    by = _by_key(rows)
    for sample in ("correct_python", "incorrect", "runtime_error", "hang"):  # judged, each with its own verdict
        assert by[("linear_relu", sample)]["build"]["message"].startswith("nothing to build"), sample
        assert by[("linear_relu", sample)]["build"]["seconds"] == 0.0
    assert not by[("linear_relu", "correct_cpp")]["build"]["message"].startswith("nothing to build")


def test_error_rows_point_into_the_submission(scored):
    _, _, rows = scored
    by = _by_key(rows)
    runtime = by[("linear_relu", "runtime_error")]
    assert "NameError" in runtime["reason"] and "'F' is not defined" in runtime["reason"]
    frame = [f for f in runtime["error"]["traceback"] if f["in_submission"]][-1]
    assert frame["source_line"] == 11  # the `return F.relu(...)` line of runtime_error.py
    assert "(line 11 of " in runtime["reason"]
    compile_row = by[("linear_relu", "compile_error")]
    first = compile_row["build"]["errors"][0]
    assert "undeclared_value" in first["message"]
    assert first["submission_line"] == 12  # the C++ loop line inside the Python string
    assert "(line 12 of the answer)" in compile_row["reason"]
    syntax = by[("linear_relu", "syntax_error")]
    assert syntax["error"]["source_line"] == 7  # `def __init__(self, features)` in syntax_error.txt
    crash = by[("linear_relu", "crash")]
    assert "SIGSEGV" in crash["reason"]
    assert "forward" in by[("linear_relu", "hang")]["reason"]
    assert "in place" in by[("linear_relu", "mutates_input")]["reason"]
    assert "shape" in by[("linear_relu", "wrong_shape")]["reason"]
    assert "needs a CUDA GPU" in by[("linear_relu", "needs_cuda")]["reason"]
    assert "does not derive from torch.nn.Module" in by[("linear_relu", "interface_not_module")]["reason"]
    assert "cannot take the reference's 1 input" in by[("linear_relu", "interface_forward_args")]["reason"]
    assert "missing 1 required positional argument" in by[("linear_relu", "interface_ctor")]["reason"]


def test_every_rows_feedback_is_one_a_model_can_act_on(scored):
    _, _, rows = scored
    for row in rows:
        check_feedback(row)
    by = _by_key(rows)
    assert by[("linear_relu", "runtime_error")]["feedback"].startswith(
        "Runtime error in forward: NameError: name 'F' is not defined\n  at line 11 of the answer, in forward:")
    assert by[("linear_relu", "hang")]["feedback"].startswith("Timeout: stage 'forward' exceeded its")
    assert "Pattern: off by a constant 0.1." in by[("linear_relu", "incorrect")]["feedback"]


def test_incorrect_reports_trial_errors_and_index(scored):
    _, _, rows = scored
    row = _by_key(rows)[("linear_relu", "incorrect")]
    details = row["correctness"]
    assert details["failed_trial"] == 1
    assert details["max_abs_err"] == pytest.approx(0.1, rel=1e-3)
    assert details["bad_fraction"] == 1.0
    assert details["first_bad_index"] == [0, 0]


def test_the_summary_says_how_long_judging_took_and_how_many_answers_an_hour(scored):
    out, _, rows = scored
    throughput = json.loads((out / "summary.json").read_text())["throughput"]
    assert throughput["answers_judged"] == len(rows) and throughput["wall_s"] > 0
    assert throughput["answers_per_hour"] == pytest.approx(len(rows) / throughput["wall_s"] * 3600, rel=0.01)
    assert throughput["gpu_busy"] == [None] * throughput["runs"]  # a CPU run samples no GPU


def test_resume_judges_nothing_twice_and_rebuilds_nothing(scored):
    out, cache, rows = scored
    result = _score(out, cache, "--resume")
    assert result.exit_code == 0, result.output
    assert "judged 0 submission(s)" in result.output
    assert len((out / "results.jsonl").read_text().splitlines()) == len(rows)


def test_rescoring_uses_the_build_cache(scored, tmp_path):
    # The two answers that build (the first run found them in the session's builds, tests/shared_builds.py; a
    # build recorded, then found, is tests/judge/test_builder_cache.py's), rescored alone: the rest adds nothing.
    _, cache, first_rows = scored
    built = ("correct_cpp", "compile_error")
    assert all(_by_key(first_rows)[("linear_relu", name)]["build"]["cached"] for name in built)
    again = tmp_path / "subs" / "fixtures" / "linear_relu"
    again.mkdir(parents=True)
    for name in ("correct_cpp.py", "compile_error.py"):
        shutil.copy(SUBMISSIONS / "fixtures" / "linear_relu" / name, again / name)
    result = _score(tmp_path / "again", cache, submissions=tmp_path / "subs")
    assert result.exit_code == 0, result.output
    rows = _by_key([json.loads(x) for x in (tmp_path / "again" / "results.jsonl").read_text().splitlines()])
    assert rows[("linear_relu", "correct_cpp")]["build"]["cached"] is True
    assert rows[("linear_relu", "compile_error")]["build"]["cached"] is True
    # and the baselines: measured once on this machine, not again
    first = _by_key(first_rows)[("linear_relu", "correct_cpp")]["baselines"]["eager"]
    assert rows[("linear_relu", "correct_cpp")]["baselines"]["eager"] == first


def test_existing_report_is_never_overwritten(scored):
    out, cache, _ = scored
    result = _score(out, cache)
    assert result.exit_code != 0
    assert "--resume" in result.output
