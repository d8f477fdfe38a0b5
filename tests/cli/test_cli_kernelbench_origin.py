"""A problem's KernelBench origin reaches what the commands print and write: ``evalkit problems --json`` shows it,
every row ``evalkit score`` writes carries ``problem_level`` and ``kernelbench`` (so the summary scores per
level), and ``evalkit report --format kernelbench`` numbers the rows from them alone."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from conftest import FIXTURES
from evalkit.cli.main import main

JUDGE_PROBLEMS = FIXTURES / "judge_problems"


def run(*args: object) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture
def problems(tmp_path: Path) -> Path:
    """The CPU judge problems, ``linear_relu`` recording KernelBench level 1 problem 19 (``scale_rows``: none)."""
    root = tmp_path / "problems"
    for name in ("linear_relu", "scale_rows"):
        shutil.copytree(JUDGE_PROBLEMS / name, root / name)
    with (root / "linear_relu" / "problem.toml").open("a") as toml:
        toml.write("kernelbench_level = 1\nkernelbench_number = 19\n")
    return root


def prose_run(tmp_path: Path) -> Path:
    """Answers without code (judged at triage, in seconds, on any machine), one per problem."""
    for name in ("linear_relu", "scale_rows"):
        folder = tmp_path / "subs" / "mini" / name
        folder.mkdir(parents=True)
        (folder / "0.txt").write_text("I could not write this kernel.\n")
    return tmp_path / "subs"


def test_problems_json_shows_the_origin(problems: Path) -> None:
    result = run("problems", "--problems-dir", problems, "--json")
    assert result.exit_code == 0, result.output
    origin = {info["id"]: info["kernelbench"] for info in json.loads(result.stdout)}
    assert origin["scale_rows"] is None
    assert origin["linear_relu"] == {"level": 1, "number": 19, "file": "", "sha256": "", "version": ""}


def test_rows_carry_the_level_and_origin_and_export_by_them(problems: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "report"
    scored = run("score", prose_run(tmp_path), "--problems", problems, "--out", out, "--device", "cpu",
                 "--baselines", "eager", "--cache-dir", tmp_path / "cache", "--seed", "1", "-q")
    assert scored.exit_code == 0, scored.output
    rows = {r["problem"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    assert (rows["linear_relu"]["problem_level"], rows["linear_relu"]["kernelbench"]) == (1, {"level": 1, "number": 19})
    assert (rows["scale_rows"]["problem_level"], rows["scale_rows"]["kernelbench"]) == (None, None)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["problem_set"]["levels"] == {"1": ["linear_relu"]}
    assert set(summary["runs"]["mini"]["by_level"]) == {"1"}
    monkeypatch.chdir(tmp_path / "subs")  # no ./problems: the rows' own origin numbers them
    monkeypatch.delenv("EVALKIT_PROBLEMS", raising=False)
    exported = run("report", out, "--format", "kernelbench")
    assert exported.exit_code == 0, exported.output
    data = json.loads((out / "eval_results.json").read_text())
    assert list(data) == ["19", "scale_rows"]  # scale_rows records no origin: kept under its id, with a warning
    assert data["19"][0]["metadata"]["evalkit"]["verdict"] == "no_code" and data["19"][0]["compiled"] is False
