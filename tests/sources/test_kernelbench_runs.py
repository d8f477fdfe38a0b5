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
from evalkit.sources.problems import Problem, discover_problems
from evalkit.sources.submissions import SubmissionError, discover

LAYOUT = FIXTURES / "kernelbench_layout"
KB = LAYOUT / "KernelBench"
RUN = LAYOUT / "runs" / "kb_run"


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Problem]:
    """The shipped problems plus the fixture's KernelBench levels, imported (so the shipped ones are linked)."""
    root = tmp_path_factory.mktemp("kb") / "problems"
    shutil.copytree(ROOT / "problems", root, ignore=shutil.ignore_patterns("__pycache__"))
    import_kernelbench(KB, root, report=lambda line: None)
    return discover_problems(root)


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
