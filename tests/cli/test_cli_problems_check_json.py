"""``evalkit problems check --json``: one JSON object per problem on stdout, and the exit code as without it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from click.testing import CliRunner

from conftest import FIXTURES
from evalkit.cli.main import main

BROKEN = FIXTURES / "broken_problems"


def test_check_json_lists_every_problems_findings() -> None:
    result = CliRunner().invoke(main, ["problems", "--problems-dir", str(FIXTURES / "problems"), "check", "--json"])
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    assert [f["problem_id"] for f in found] == ["tiny_conv", "tiny_relu"]
    assert all(f["ok"] and f["errors"] == [] for f in found)
    assert found[0]["input_shapes"] == [[2, 3, 8, 8]] and found[0]["output_shape"] == [2, 4, 6, 6]
    assert set(found[0]) == {"ok", "problem_id", "errors", "warnings", "notes", "input_shapes", "output_shape"}


def test_check_json_of_broken_problems_exits_1_with_their_errors() -> None:
    result = CliRunner().invoke(main, ["problems", "check", "--problems-dir", str(BROKEN), "--json"])
    assert result.exit_code == 1
    found = {f["problem_id"]: f for f in json.loads(result.stdout)}
    assert not found["no_model"]["ok"] and found["no_model"]["errors"]
    assert found["degenerate_zero"]["ok"]
    assert any("degenerate" in w for w in found["degenerate_zero"]["warnings"])
    assert any("did you mean 'atol'?" in e for e in found["unknown_key"]["errors"])
    assert "problem(s) OK" not in result.stdout


def test_check_json_gives_each_folder_recording_a_shared_kernelbench_problem_an_error(tmp_path: Path) -> None:
    root = tmp_path / "problems"
    shutil.copytree(FIXTURES / "problems", root)
    for name in ("tiny_conv", "tiny_relu"):
        with (root / name / "problem.toml").open("a") as toml:
            toml.write("kernelbench_level = 3\nkernelbench_number = 7\n")
    result = CliRunner().invoke(main, ["problems", "check", "--problems-dir", str(root), "--json"])
    assert result.exit_code == 1
    found = {f["problem_id"]: f for f in json.loads(result.stdout)}
    for name in ("tiny_conv", "tiny_relu"):
        assert not found[name]["ok"]
        [error] = found[name]["errors"]
        assert "both record KernelBench level 3 problem 7" in error
        assert str(root / "tiny_conv" / "problem.toml") in error and str(root / "tiny_relu" / "problem.toml") in error
