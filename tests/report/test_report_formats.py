"""``evalkit report DIR --format text|json|kernelbench`` through click's CliRunner: ``--json`` is ``--format
json``; ``kernelbench`` writes KernelBench's eval_results.json (``--out``, ``--run``, ``--level``,
``--problems``), and a report it cannot export is a failure (exit 1), not a traceback."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from conftest import FIXTURES
from evalkit.cli.main import main

ROWS = [json.loads(line) for line in (FIXTURES / "reports" / "results.jsonl").read_text().splitlines()]
KB_RUN = Path("tests/fixtures/kernelbench_layout/runs/kb_run")  # as `evalkit score` records it, run from the root
TINY = FIXTURES / "problems" / "tiny_relu" / "reference.py"


def invoke(*args: Any) -> Result:
    return CliRunner().invoke(main, ["report", *map(str, args)])


def report_dir(folder: Path, rows: list[dict[str, Any]]) -> Path:
    folder.mkdir(parents=True)
    (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def kernel_row(verdict: str, level: int, number: int, sample: int, problem: str, **changes: Any) -> dict[str, Any]:
    """A fixture row of ``verdict`` re-dressed as the judging of a KernelBench run folder's kernel file."""
    row = copy.deepcopy(next(r for r in ROWS if r["verdict"] == verdict))
    row.update(run="kb_run", problem=problem, sample=str(sample),
               path=str(KB_RUN / f"level_{level}_problem_{number}_sample_{sample}_kernel.py"), **changes)
    return row


def problems_with_origins(root: Path, origins: dict[str, tuple[int, int]]) -> Path:
    """A problems folder whose problems record the KernelBench (level, number) given."""
    for problem_id, (level, number) in origins.items():
        (root / problem_id).mkdir(parents=True)
        shutil.copy(TINY, root / problem_id / "reference.py")
        (root / problem_id / "problem.toml").write_text(f"kernelbench_level = {level}\n"
                                                        f"kernelbench_number = {number}\n")
    return root


def keys_and_samples(path: Path) -> dict[str, list[tuple[int, bool]]]:
    data = json.loads(path.read_text())
    return {key: [(entry["sample_id"], entry["correctness"]) for entry in entries] for key, entries in data.items()}


# --- text and json ----------------------------------------------------------------------------------

def _undated(summary: dict) -> dict:
    """A summary without its ``generated_at`` (each ``evalkit report`` writes it anew: two calls may straddle a second)."""
    return {key: value for key, value in summary.items() if key != "generated_at"}


def test_format_json_is_the_json_flag_and_text_the_default(tmp_path: Path) -> None:
    folder = report_dir(tmp_path / "r", ROWS)
    as_format = invoke(folder, "--format", "json")
    assert as_format.exit_code == 0, as_format.output
    summary = _undated(json.loads((folder / "summary.json").read_text()))
    assert _undated(json.loads(as_format.stdout)) == summary == _undated(json.loads(invoke(folder, "--json").stdout))
    assert _undated(json.loads(invoke(folder, "--json", "--format", "json").stdout)) == summary
    text = invoke(folder, "--format", "text")
    assert text.exit_code == 0 and text.stdout == invoke(folder).stdout
    assert text.stdout.startswith("run ") and f"report: {folder / 'index.html'}" in text.stdout


# --- kernelbench ------------------------------------------------------------------------------------

def test_kernelbench_numbers_rows_by_their_kernel_file_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no ./problems here: numbers come from the rows alone
    monkeypatch.delenv("EVALKIT_PROBLEMS", raising=False)
    rows = [kernel_row("correct", 1, 19, 0, "l1_19_relu"), kernel_row("correct", 1, 1, 0, "l1_1_square"),
            kernel_row("incorrect", 1, 1, 1, "l1_1_square")]
    folder = report_dir(tmp_path / "r", rows)
    result = invoke(folder, "--format", "kernelbench")
    assert result.exit_code == 0, result.output
    assert result.stdout == f"eval_results: {folder / 'eval_results.json'}\n"
    assert keys_and_samples(folder / "eval_results.json") == {"1": [(0, True), (1, False)], "19": [(0, True)]}
    assert not (folder / "summary.json").exists()  # exports, rebuilds nothing
    quiet = invoke(folder, "--format", "kernelbench", "-q")
    assert quiet.exit_code == 0 and quiet.output == ""


def test_kernelbench_out_run_and_level_pick_what_is_written(tmp_path: Path) -> None:
    rows = [kernel_row("correct", 1, 19, 0, "relu", kernelbench={"level": 1, "number": 19}, problem_level=1),
            kernel_row("correct", 2, 2, 3, "scale", kernelbench={"level": 2, "number": 2}, problem_level=2),
            {**kernel_row("incorrect", 2, 2, 0, "scale", kernelbench={"level": 2, "number": 2}), "run": "other"}]
    folder = report_dir(tmp_path / "r", rows)
    out = tmp_path / "exports" / "level2.json"
    result = invoke(folder, "--format", "kernelbench", "--run", "kb_run", "--level", "2", "--out", out)
    assert result.exit_code == 0, result.output
    assert keys_and_samples(out) == {"2": [(3, True)]}
    assert not (folder / "eval_results.json").exists()


def test_kernelbench_numbers_come_from_the_problems_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EVALKIT_PROBLEMS", raising=False)
    folder = report_dir(tmp_path / "r", [r for r in ROWS if r["run"] == "model-a"])
    origins = {"1_matmul": (1, 1), "2_relu": (1, 19), "3_softmax": (1, 23), "4_conv2d": (1, 50)}
    given = problems_with_origins(tmp_path / "given", origins)
    result = invoke(folder, "--format", "kernelbench", "--problems", given)
    assert result.exit_code == 0, result.output
    assert list(json.loads((folder / "eval_results.json").read_text())) == ["1", "19", "23", "50"]
    monkeypatch.chdir(tmp_path)  # without --problems: ./problems when there is one
    problems_with_origins(tmp_path / "problems", {"1_matmul": (1, 7)})
    found = invoke(folder, "--format", "kernelbench", "--out", tmp_path / "found.json")
    assert found.exit_code == 0, found.output
    assert list(json.loads((tmp_path / "found.json").read_text()))[0] == "7"


def test_rows_not_one_run_of_one_level_fail_naming_the_option(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("EVALKIT_PROBLEMS", raising=False)
    folder = report_dir(tmp_path / "r", ROWS)
    runs = invoke(folder, "--format", "kernelbench")
    assert runs.exit_code == 1 and runs.stdout == ""
    assert runs.stderr.startswith(f"Error: {folder / 'results.jsonl'}: the rows hold 2 runs (model-a, model-b)")
    assert "choose one with --run NAME" in runs.stderr and "Traceback" not in runs.output
    unknown = invoke(folder, "--format", "kernelbench", "--run", "nope")
    assert unknown.exit_code == 1 and "no rows of run 'nope'" in unknown.stderr
    two_levels = [kernel_row("correct", 1, 19, 0, "a"), kernel_row("correct", 2, 2, 0, "b")]
    levels = report_dir(tmp_path / "levels", two_levels)
    mixed = invoke(levels, "--format", "kernelbench")
    assert mixed.exit_code == 1 and "levels 1, 2" in mixed.stderr and "choose one with --level L" in mixed.stderr
    missing = invoke(folder, "--format", "kernelbench", "--run", "model-a", "--problems", tmp_path / "nope")
    assert missing.exit_code == 1 and f"Error: --problems {tmp_path / 'nope'}: no such folder" in missing.stderr
    assert not any(p.name == "eval_results.json" for p in tmp_path.rglob("*"))


@pytest.mark.parametrize(("args", "message"), [
    (["--format", "kernelbench", "--compare", "B"], "--format kernelbench exports one report folder; it cannot go "
                                                    "with --compare"),
    (["--json", "--format", "text"], "--json means --format json, so it cannot go with --format text"),
    (["--run", "kb_run"], "--run: only for --format kernelbench"),
    (["--level", "1", "--problems", "."], "--level, --problems: only for --format kernelbench"),
    (["--format", "json", "--out", "x.json"], "--out writes the comparison page: use it with --compare"),
    (["--format", "kernelbench", "--level", "0"], "Invalid value for '--level'"),
])
def test_options_that_cannot_apply_are_usage_errors(tmp_path: Path, args: list[str], message: str) -> None:
    a, b = report_dir(tmp_path / "a", ROWS), report_dir(tmp_path / "b", ROWS)
    result = invoke(a, *[str(b) if arg == "B" else arg for arg in args])
    assert result.exit_code == 2, result.output
    assert message in result.stderr and result.stdout == ""
    assert not (a / "eval_results.json").exists() and not (a / "summary.json").exists()
