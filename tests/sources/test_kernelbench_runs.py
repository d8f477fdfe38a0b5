"""KernelBench run folders (``runs/<name>/level_{L}_problem_{N}_sample_{S}_kernel.py``) as submissions: each
file is sample S of the problem recording level L, number N; what maps to nothing is warned about, in the log."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import FIXTURES, ROOT
from evalkit.cli.main import main
from evalkit.sources.kernelbench import import_kernelbench
from evalkit.sources.problems import Problem, ProblemError, discover_problems
from evalkit.sources.submissions import SubmissionError, discover

LAYOUT = FIXTURES / "kernelbench_layout"
KB = LAYOUT / "KernelBench"
RUN = LAYOUT / "runs" / "kb_run"


@pytest.fixture(scope="module")
def imported_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped problems plus the fixture's KernelBench levels, imported (so the shipped ones are linked)."""
    root = tmp_path_factory.mktemp("kb") / "problems"
    shutil.copytree(ROOT / "problems", root, ignore=shutil.ignore_patterns("__pycache__"))
    import_kernelbench(KB, root, report=lambda line: None)
    return root


@pytest.fixture(scope="module")
def imported(imported_root: Path) -> dict[str, Problem]:
    return discover_problems(imported_root)


def _with_a_copy(imported_root: Path, tmp_path: Path, of: str, copy: str) -> Path:
    """A copy of the imported problems in which folder ``copy`` is a copy of ``of`` (so records its origin too)."""
    root = tmp_path / "problems"
    shutil.copytree(imported_root, root, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(root / of, root / copy)
    return root


def _keys(found) -> list[tuple[str, str, str]]:
    return [(s.run, s.problem, s.sample) for s in found.submissions]


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_a_run_folder_maps_each_kernel_to_its_problem_and_sample(imported, caplog) -> None:
    with caplog.at_level(logging.WARNING):
        found = discover(RUN, imported)
    assert _keys(found) == [("kb_run", "alexnet_conv1", "0"), ("kb_run", "l1_19_relu", "0"),
                            ("kb_run", "l1_1_square_matrix_multiplication", "0"),
                            ("kb_run", "l1_1_square_matrix_multiplication", "1"),
                            ("kb_run", "l2_2_matmul_scale_tiny", "3")]
    assert found.submissions[0].path == str(RUN / "level_1_problem_50_sample_0_kernel.py")
    assert "class ModelNew" in found.submissions[0].text
    unknown, stray = found.notes
    assert "level_1_problem_99_sample_0_kernel.py" in unknown and "kernelbench_number 99" in unknown
    assert "evalkit problems import path/to/KernelBench/KernelBench/level1" in unknown
    assert "notes.md" in stray and "prompt" not in stray
    assert _warnings(caplog) == found.notes  # logged, not only kept


def test_without_the_level_imported_nothing_maps_and_the_warning_says_what_to_do(caplog) -> None:
    with caplog.at_level(logging.WARNING):
        found = discover(RUN, discover_problems(ROOT / "problems"))
    assert found.submissions == []
    level1, level2, _ = found.notes
    assert level1.startswith(f"{RUN}: 5 KernelBench kernel file(s) of level 1 are not judged: level_1_problem_1_")
    assert "level_1_problem_50_sample_0_kernel.py" in level1 and "kernelbench_number 1, 19, 50, 99" in level1
    assert "evalkit problems import path/to/KernelBench/KernelBench/level2 --problems-dir" in level2
    assert len(_warnings(caplog)) == 3


def test_a_folder_of_run_folders(imported, tmp_path: Path) -> None:
    shutil.copytree(RUN, tmp_path / "runs" / "kb_run")
    shutil.copytree(RUN, tmp_path / "runs" / "other")
    found = discover(tmp_path / "runs", imported)
    assert len(found.submissions) == 10 and {s.run for s in found.submissions} == {"kb_run", "other"}


def test_one_kernel_file(imported) -> None:
    [one] = discover(RUN / "level_2_problem_2_sample_3_kernel.py", imported).submissions
    assert (one.run, one.problem, one.sample) == ("kb_run", "l2_2_matmul_scale_tiny", "3")
    with pytest.raises(SubmissionError, match=r"level_1_problem_99_sample_0_kernel\.py: KernelBench level 1 "
                                              r"problem 99 is not judged: .*evalkit problems import"):
        discover(RUN / "level_1_problem_99_sample_0_kernel.py", imported)


def test_files_directly_in_an_evalkit_run_folder_are_warned_about_in_the_log(tmp_path: Path, caplog) -> None:
    run = tmp_path / "run"
    (run / "alexnet_conv1").mkdir(parents=True)
    (run / "alexnet_conv1" / "a.txt").write_text("no code")
    (run / "stray.txt").write_text("no code")
    with caplog.at_level(logging.WARNING):
        found = discover(run, discover_problems(ROOT / "problems"))
    assert _keys(found) == [("run", "alexnet_conv1", "a")]
    [warning] = _warnings(caplog)
    assert "files directly in the run folder are ignored (stray.txt)" in warning


@pytest.mark.slow  # a whole run on three imported problems, each with its reference and baseline timed
def test_score_judges_a_kernelbench_run_folder(tmp_path: Path, caplog) -> None:
    problems = tmp_path / "problems"
    for file in ("level1/1_Square_matrix_multiplication_.py", "level1/19_ReLU.py", "level2/2_Matmul_Scale_Tiny.py"):
        import_kernelbench(KB / file, problems, report=lambda line: None)
    out = tmp_path / "report"
    args = ["score", str(RUN), "--problems", str(problems), "--out", str(out), "--device", "cpu", "--baselines",
            "eager", "--timing-trials", "5", "--warmup", "1", "--cache-dir", str(tmp_path / "cache"),
            "--seed", "1", "--jobs", "2"]
    with caplog.at_level(logging.WARNING):
        result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "judged 4 submission(s)" in result.output
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    verdicts = {(r["problem"], r["sample"]): r["verdict"] for r in rows}
    assert verdicts == {("l1_1_square_matrix_multiplication", "0"): "correct",
                        ("l1_1_square_matrix_multiplication", "1"): "incorrect",
                        ("l1_19_relu", "0"): "correct", ("l2_2_matmul_scale_tiny", "3"): "correct"}
    assert {r["run"] for r in rows} == {"kb_run"}
    assert any("level_1_problem_50_sample_0_kernel.py" in w and "not judged" in w for w in _warnings(caplog))


def test_kernels_of_a_problem_two_folders_record_stop_the_run_naming_both(imported_root, tmp_path: Path) -> None:
    root = _with_a_copy(imported_root, tmp_path, of="l1_19_relu", copy="relu_again")
    problems = discover_problems(root)
    tomls = f"{root / 'l1_19_relu' / 'problem.toml'} and {root / 'relu_again' / 'problem.toml'} both record"
    with pytest.raises(ProblemError) as raised:
        discover(RUN, problems)
    message = str(raised.value)
    assert message.startswith(f"{RUN / 'level_1_problem_19_sample_0_kernel.py'}: cannot tell which problem it answers: "
                              f"{tomls} KernelBench level 1 problem 19 (kernelbench_level = 1, kernelbench_number = 19)")
    assert "remove the folder that duplicates another, or fix the kernelbench_number" in message
    with pytest.raises(ProblemError, match=r"level_1_problem_19_sample_0_kernel\.py: cannot tell .* both record"):
        discover(RUN / "level_1_problem_19_sample_0_kernel.py", problems)  # one kernel file given alone


def test_a_shared_origin_no_kernel_maps_to_does_not_stop_the_run(imported_root, imported, tmp_path: Path) -> None:
    root = _with_a_copy(imported_root, tmp_path, of="convtranspose2d_gelu_groupnorm", copy="gelu_again")  # level 2, 19
    assert _keys(discover(RUN, discover_problems(root))) == _keys(discover(RUN, imported))


def test_score_stops_before_judging_when_two_folders_record_a_kernels_problem(imported_root, tmp_path: Path) -> None:
    root = _with_a_copy(imported_root, tmp_path, of="l1_1_square_matrix_multiplication", copy="matmul_again")
    out = tmp_path / "report"
    result = CliRunner().invoke(main, ["score", str(RUN), "--problems", str(root), "--out", str(out), "--device",
                                       "cpu", "--baselines", "eager", "--cache-dir", str(tmp_path / "cache")])
    assert result.exit_code == 1, result.output
    assert "level_1_problem_1_sample_0_kernel.py: cannot tell which problem it answers" in result.output
    assert f"{root / 'matmul_again' / 'problem.toml'} both record KernelBench level 1 problem 1" in result.output
    assert "Traceback" not in result.output
    assert not out.exists() and not (tmp_path / "cache").exists()  # no report begun, nothing built
