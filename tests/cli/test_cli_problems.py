"""``evalkit problems`` (list, check, new, import), invoked through click's test runner."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from evalkit.cli.problems import problems

ROOT = Path(__file__).resolve().parents[2]
PROBLEMS = ROOT / "problems"
FIXTURES = ROOT / "tests" / "fixtures" / "problems"
BROKEN = ROOT / "tests" / "fixtures" / "broken_problems"
KB = ROOT / "tests" / "fixtures" / "kernelbench_layout" / "KernelBench"


def _run(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(problems, [str(a) for a in args], env=env)


def test_list_table_shows_shipped_problems() -> None:
    result = _run("--problems-dir", PROBLEMS)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split() == ["ID", "TITLE", "SOURCE", "INPUTS", "OUTPUT"]
    row = next(line for line in lines if line.startswith("conv2d_gelu_globalavgpool "))
    assert "(128, 8, 256, 256)" in row and row.endswith("(128, 64)")
    assert "KernelBench v0.1 level2/67_Conv2d_GELU_GlobalAvgPool" in row
    alex = next(line for line in lines if line.startswith("alexnet_conv1 "))
    assert alex.index("KernelBench") == row.index("KernelBench")  # aligned columns


def test_list_json() -> None:
    result = _run("--problems-dir", FIXTURES, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert [d["id"] for d in data] == ["tiny_conv", "tiny_relu"]
    assert {"id", "title", "source", "path"} <= set(data[0])
    assert data[0]["input_shapes"] == [[2, 3, 8, 8]] and data[0]["output_shape"] == [2, 4, 6, 6]


def test_env_var_and_default_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert "tiny_relu" in _run(env={"EVALKIT_PROBLEMS": str(FIXTURES)}).output
    shutil.copytree(FIXTURES / "tiny_relu", tmp_path / "problems" / "tiny_relu")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("EVALKIT_PROBLEMS", raising=False)
    result = _run()
    assert result.exit_code == 0 and "tiny_relu" in result.output and "tiny_conv" not in result.output


def test_missing_dir_is_a_clean_error(tmp_path: Path) -> None:
    result = _run("--problems-dir", tmp_path / "nope")
    assert result.exit_code == 1
    assert "Error: problems folder" in result.output and "Traceback" not in result.output


def test_check_valid_fixtures() -> None:
    result = _run("--problems-dir", FIXTURES, "check")
    assert result.exit_code == 0, result.output
    assert "OK   tiny_conv  (2, 3, 8, 8) -> (2, 4, 6, 6)" in result.output
    assert "2 of 2 problem(s) OK" in result.output


def test_check_broken_fixtures_fails_each_with_its_reason() -> None:
    result = _run("check", "--problems-dir", BROKEN)
    assert result.exit_code == 1
    out = result.output
    for name in ("no_model", "syntax_error", "inputs_not_tensor", "forward_fails", "unknown_key"):
        assert f"FAIL {name}" in out
    assert "OK   degenerate_zero" in out
    assert "warning: degenerate: output is so close to zero" in out
    assert "error: forward on cpu raised RuntimeError" in out
    assert "(did you mean 'atol'?)" in out
    assert "Traceback" not in out


def test_check_selected_ids_and_did_you_mean() -> None:
    result = _run("--problems-dir", BROKEN, "check", "degenerate_zero")
    assert result.exit_code == 0 and "1 of 1 problem(s) OK" in result.output
    result = _run("--problems-dir", PROBLEMS, "check", "alexnet_conv")
    assert result.exit_code == 1
    assert "unknown problem 'alexnet_conv' (did you mean 'alexnet_conv1'?)" in result.output
    assert "Traceback" not in result.output


def test_check_large_problem_notes_it_was_not_run() -> None:
    result = _run("--problems-dir", PROBLEMS, "check", "alexnet_conv1")
    assert result.exit_code == 0
    assert "note: forward not run on CPU: problem is large (0.45 GB)" in result.output


def test_new_then_check(tmp_path: Path) -> None:
    result = _run("new", "my_op", "--problems-dir", tmp_path)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "my_op" / "reference.py").is_file() and (tmp_path / "my_op" / "problem.toml").is_file()
    check = _run("--problems-dir", tmp_path, "check", "my_op")
    assert check.exit_code == 0 and "OK   my_op" in check.output
    again = _run("--problems-dir", tmp_path, "new", "my_op")
    assert again.exit_code == 1 and "refusing to overwrite" in again.output
    bad = _run("--problems-dir", tmp_path, "new", "My-Op")
    assert bad.exit_code == 1 and "invalid problem id" in bad.output


def test_import(tmp_path: Path) -> None:
    level2 = tmp_path / "kb" / "level2"
    level2.mkdir(parents=True)
    shutil.copy(KB / "level2" / "2_Matmul_Scale_Tiny.py", level2)
    result = _run("import", tmp_path / "kb", "--problems-dir", tmp_path / "problems", "--source-version", "v0.1")
    assert result.exit_code == 0, result.output
    folder = tmp_path / "problems" / "l2_2_matmul_scale_tiny"
    assert f"imported {level2 / '2_Matmul_Scale_Tiny.py'} -> {folder}" in result.output
    assert 'kernelbench_version = "v0.1"' in (folder / "problem.toml").read_text()
    listing = _run("--problems-dir", tmp_path / "problems")
    assert "KernelBench v0.1 level2/2_Matmul_Scale_Tiny" in listing.output and "(4, 8)" in listing.output
    missing = _run("import", tmp_path / "nothing", "--problems-dir", tmp_path / "problems")
    assert missing.exit_code == 1 and "no such file or folder" in missing.output


def test_import_links_the_shipped_problems_and_takes_a_level(tmp_path: Path) -> None:
    shutil.copytree(PROBLEMS, tmp_path / "problems", ignore=shutil.ignore_patterns("__pycache__"))
    result = _run("import", KB / "level2", "--problems-dir", tmp_path / "problems")
    assert result.exit_code == 0, result.output
    assert f"linked {KB / 'level2' / '19_ConvTranspose2d_GELU_GroupNorm.py'} -> " \
           f"{tmp_path / 'problems' / 'convtranspose2d_gelu_groupnorm'}" in result.output
    assert result.output.splitlines()[-1].startswith("imported 1, linked 2, already present 0, skipped 0 of 3")
    loose = tmp_path / "7_Loose.py"
    shutil.copy(KB / "level1" / "19_ReLU.py", loose)
    skipped = _run("import", loose, "--problems-dir", tmp_path / "problems")
    assert skipped.exit_code == 1 and "pass --level L" in skipped.output  # imported nothing: a failure
    taken = _run("import", loose, "--level", "3", "--problems-dir", tmp_path / "problems")
    assert f"-> {tmp_path / 'problems' / 'l3_7_loose'}" in taken.output
    assert _run("import", loose, "--level", "0").exit_code == 2


def test_cuda_without_gpu_is_a_clean_error() -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    result = _run("--problems-dir", FIXTURES, "check", "--device", "cuda")
    assert result.exit_code == 1 and "no CUDA GPU is usable here" in result.output


def test_an_import_that_imports_nothing_fails(tmp_path: Path) -> None:
    loose = tmp_path / "kb"
    loose.mkdir()
    shutil.copy(KB / "level2" / "2_Matmul_Scale_Tiny.py", loose)  # no level<L> folder, no --level: skipped
    result = _run("import", loose, "--problems-dir", tmp_path / "problems")
    assert result.exit_code == 1, result.output
    assert "skipped 1 of 1" in result.output and "nothing was imported" in result.output


def test_a_broken_problem_toml_leaves_out_its_folder_alone_unless_its_answers_are_being_scored(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    problems = tmp_path / "problems"
    shutil.copytree(ROOT / "tests" / "fixtures" / "judge_problems" / "linear_relu", problems / "linear_relu")
    shutil.copytree(ROOT / "tests" / "fixtures" / "judge_problems" / "linear_relu", problems / "broken_one")
    (problems / "broken_one" / "problem.toml").write_text("title = [unclosed\n")
    listing = _run("--problems-dir", problems)
    assert listing.exit_code == 0 and "linear_relu" in listing.output
    assert "problem broken_one is left out" in caplog.text and listing.output.count("left out") <= 1  # said once
    answers = tmp_path / "answers" / "run"
    for problem in ("linear_relu", "broken_one"):
        (answers / problem).mkdir(parents=True)
        (answers / problem / "a.txt").write_text("no code here")
    shutil.copy(ROOT / "tests" / "fixtures" / "judge_submissions" / "fixtures" / "linear_relu" / "correct_python.md",
                answers / "broken_one" / "b.md")
    from evalkit.cli.main import main

    def score(*args: object) -> Result:
        return CliRunner().invoke(main, ["score", *map(str, args), "--baselines", "none", "--cache-dir",
                                         tmp_path / "cache"])
    other = score(answers / "linear_relu" / "a.txt", "--problems", problems, "--device", "cpu", "--out", tmp_path / "r1")
    assert other.exit_code == 0, other.output
    # Answers to it among others': the others are judged, its code answer is a skipped row that says why.
    mixed = score(answers, "--problems", problems, "--device", "cpu", "--out", tmp_path / "r2")
    assert mixed.exit_code == 0, mixed.output
    assert "answers to problem 'broken_one' were not judged" in mixed.output and "need a CUDA GPU" not in mixed.output
    rows = {(r["problem"], r["sample"]): r for r in map(json.loads, (tmp_path / "r2" / "results.jsonl").read_text().splitlines())}
    assert rows[("linear_relu", "a")]["verdict"] == "no_code"
    assert rows[("broken_one", "b")]["verdict"] == "skipped" and "problem.toml" in rows[("broken_one", "b")]["reason"]
    # Only its answers: nothing could be judged, so the run stops before anything, naming the file.
    own = score(answers / "broken_one" / "b.md", "--problems", problems, "--device", "cpu", "--out", tmp_path / "r3")
    assert own.exit_code == 1 and "broken_one" in own.output and "problem.toml" in own.output


def _claiming(tmp_path: Path, origins: dict[str, str]) -> Path:
    """A copy of the tiny fixture problems, each given the KernelBench origin keys in ``origins``."""
    root = tmp_path / "problems"
    shutil.copytree(FIXTURES, root, ignore=shutil.ignore_patterns("__pycache__"))
    for name, keys in origins.items():
        with (root / name / "problem.toml").open("a") as toml:
            toml.write(keys)
    return root


def test_check_fails_both_folders_that_record_the_same_kernelbench_problem(tmp_path: Path) -> None:
    root = _claiming(tmp_path, {"tiny_conv": "kernelbench_level = 1\nkernelbench_number = 19\n",
                                "tiny_relu": "kernelbench_level = 1\nkernelbench_number = 19\n"})
    result = _run("--problems-dir", root, "check")
    assert result.exit_code == 1, result.output
    assert "FAIL tiny_conv" in result.output and "FAIL tiny_relu" in result.output
    error = (f"error: {root / 'tiny_conv' / 'problem.toml'} and {root / 'tiny_relu' / 'problem.toml'} both record "
             f"KernelBench level 1 problem 19 (kernelbench_level = 1, kernelbench_number = 19)")
    assert result.output.count(error) == 2  # one error in each folder's report
    assert "remove the folder that duplicates another, or fix the kernelbench_number" in result.output
    assert "0 of 2 problem(s) OK" in result.output
    one = _run("--problems-dir", root, "check", "tiny_relu")  # the other folder is named though not checked
    assert one.exit_code == 1 and one.output.count(error) == 1 and "FAIL tiny_relu" in one.output


def test_check_accepts_folders_that_record_different_kernelbench_problems(tmp_path: Path) -> None:
    root = _claiming(tmp_path, {"tiny_conv": "kernelbench_level = 1\nkernelbench_number = 19\n",
                                "tiny_relu": "kernelbench_level = 2\nkernelbench_number = 19\n"})
    result = _run("--problems-dir", root, "check")
    assert result.exit_code == 0, result.output
    assert "2 of 2 problem(s) OK" in result.output


def test_import_with_a_precision(tmp_path: Path) -> None:
    relu = KB / "level1" / "19_ReLU.py"
    result = _run("import", relu, "--problems-dir", tmp_path / "problems", "--precision", "bf16")
    assert result.exit_code == 0, result.output
    folder = tmp_path / "problems" / "l1_19_relu"
    assert '\nprecision = "bf16"' in (folder / "problem.toml").read_text()
    assert (folder / "reference.py").read_bytes() == relu.read_bytes()
    again = _run("import", relu, "--problems-dir", tmp_path / "problems", "--precision", "fp16")
    assert again.exit_code == 0, again.output  # nothing wrong with the folder: said, not failed
    assert f"warning: {folder} keeps its precision bf16" in again.output
    assert '\nprecision = "bf16"' in (folder / "problem.toml").read_text()
    wrong = _run("import", relu, "--problems-dir", tmp_path / "other", "--precision", "fp64")
    assert wrong.exit_code == 2 and "'fp64' is not one of 'fp32', 'fp16', 'bf16'" in wrong.output
