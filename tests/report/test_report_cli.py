"""``evalkit report DIR`` and ``evalkit report --compare A B`` through click's CliRunner."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from evalkit.cli.console import configure_logging
from evalkit.cli.main import main
from evalkit.report.summary import write_reports
from evalkit.report.run_diff import diff_rows
from evalkit.report.text import format_diff, format_leaderboard

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "reports" / "results.jsonl"


def rows() -> list[dict[str, Any]]:
    return [json.loads(line) for line in FIXTURE.read_text().splitlines()]


def report_dir(folder: Path, data: list[dict[str, Any]]) -> Path:
    folder.mkdir(parents=True)
    (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in data))
    return folder


def find(data: list[dict[str, Any]], run: str, problem: str, sample: str) -> dict[str, Any]:
    return next(r for r in data if (r["run"], r["problem"], r["sample"]) == (run, problem, sample))


def test_report_rebuilds_summary_and_html_from_results(tmp_path: Path) -> None:
    folder = tmp_path / "r"
    folder.mkdir()
    shutil.copy(FIXTURE, folder / "results.jsonl")
    result = CliRunner().invoke(main, ["report", str(folder)])
    assert result.exit_code == 0, result.output
    assert f"report: {folder / 'index.html'}" in result.output
    summary = json.loads((folder / "summary.json").read_text())
    assert list(summary["runs"]) == ["model-a", "model-b", "curated"]
    assert summary["overall"]["submissions"] == 13 and summary["problem_set"]["count"] == 5
    assert len(list((folder / "submissions").glob("*.html"))) == 18
    for line in ("model-a", "model-b", "curated", "overall"):
        assert any(row.startswith(line) for row in result.output.splitlines()), line
    assert (folder / "results.jsonl").read_bytes() == FIXTURE.read_bytes()  # judged nothing, changed nothing


def test_report_keeps_the_known_problems_of_the_previous_summary(tmp_path: Path) -> None:
    folder = report_dir(tmp_path / "r", rows())
    write_reports(folder, problems=["6_extra"])
    stale = folder / "submissions" / "gone__x__y-0000000000.html"
    stale.write_text("old")
    result = CliRunner().invoke(main, ["report", str(folder)])
    assert result.exit_code == 0, result.output
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["problem_set"]["count"] == 6 and summary["problem_set"]["known"] == ["6_extra"]
    assert summary["overall"]["fast_p"]["eager"]["1"] == 2 / 6 and summary["overall"]["problems_scored"] == 6
    assert not stale.exists()


def test_compare_prints_flips_moves_and_rows_in_one_only(tmp_path: Path) -> None:
    before = rows()
    after = [dict(r) for r in before]
    find(after, "model-a", "1_matmul", "1").update(verdict="correct", speedup_vs_eager=1.1)
    find(after, "model-a", "1_matmul", "0")["speedup_vs_eager"] = 1.5 * 1.10   # moved 10%: reported
    find(after, "model-b", "3_softmax", "1")["speedup_vs_eager"] = 1.2 * 1.03  # moved 3%: not reported
    find(after, "curated", "4_conv2d", "ref")["speedup_vs_compile"] = 1.4       # appeared: reported
    after = [r for r in after if (r["run"], r["problem"]) != ("model-b", "5_layernorm")]
    after.append({**find(before, "model-a", "2_relu", "0"), "sample": "9"})
    a, b = report_dir(tmp_path / "a", before), report_dir(tmp_path / "b", after)
    result = CliRunner().invoke(main, ["report", "--compare", str(a), str(b)])
    assert result.exit_code == 0, result.output
    out = result.output.splitlines()
    assert "verdict  model-a/1_matmul/1: incorrect -> correct" in out
    assert "speedup  model-a/1_matmul/0 vs eager: 1.50x -> 1.65x (+10.0%)" in out
    assert "speedup  curated/4_conv2d/ref vs compile: - -> 1.40x" in out
    assert not any("model-b/3_softmax/1" in line for line in out)
    assert f"only in {a}: model-b/5_layernorm/0 (timeout)" in out
    assert f"only in {b}: model-a/2_relu/9 (no_code)" in out
    assert out[-1] == (f"1 verdict(s) flipped, 2 speedup(s) moved by more than 5% with their 95% intervals apart, "
                       f"0 moved as far within them (no change), 1 only in {a}, 1 only in {b}, 14 unchanged")


def _timed(speedup: float, ci: list[float] | None) -> dict[str, Any]:
    return {"run": "m", "problem": "p", "sample": "0", "verdict": "correct", "speedup_vs_eager": speedup,
            "speedup_vs_eager_ci": ci}


@pytest.mark.parametrize(("before", "after", "kind", "apart"), [
    (_timed(1.00, [0.60, 1.90]), _timed(1.935, [1.50, 2.40]), "within", False),  # +93.5%, the intervals overlap
    (_timed(1.00, [0.95, 1.05]), _timed(1.935, [1.85, 2.00]), "moved", True),    # +93.5%, apart
    (_timed(1.00, [0.99, 1.01]), _timed(1.10, [1.01, 1.19]), "within", False),   # intervals that touch overlap
    (_timed(1.00, None), _timed(1.10, None), "moved", None),                      # no intervals: by 5% alone
    (_timed(1.00, [0.99, 1.01]), _timed(1.03, [1.02, 1.04]), None, None),        # apart, but under 5%
])
def test_a_speedup_moves_only_when_its_two_95_percent_intervals_do_not_overlap(
        before: dict[str, Any], after: dict[str, Any], kind: str | None, apart: bool | None) -> None:
    diff = diff_rows([before], [after])
    moved, within = diff["speedups_moved"], diff["speedups_within_intervals"]
    assert [len(moved), len(within)] == [kind == "moved", kind == "within"]
    assert diff["unchanged"] == (0 if kind == "moved" else 1)
    if kind:
        [entry] = moved or within
        assert entry["intervals_apart"] is apart and entry["before_ci"] == (tuple(before["speedup_vs_eager_ci"])
                                                                          if before["speedup_vs_eager_ci"] else None)
    text = format_diff(diff)
    assert ("within   m/p/0 vs eager: 1.00x [0.60, 1.90] -> 1.94x [1.50, 2.40] (+93.5%), 95% intervals overlap"
            in text.splitlines()) == (before["speedup_vs_eager_ci"] == [0.60, 1.90])


def test_compare_as_json(tmp_path: Path) -> None:
    a = report_dir(tmp_path / "a", rows())
    b = report_dir(tmp_path / "b", rows())
    result = CliRunner().invoke(main, ["report", "--compare", str(a), str(b), "--json"])
    assert result.exit_code == 0, result.output
    diff = json.loads(result.output)
    assert diff["unchanged"] == 18 and diff["verdicts_flipped"] == diff["speedups_moved"] == []


def test_report_refuses_combinations_that_cannot_apply(tmp_path: Path) -> None:
    a, b = report_dir(tmp_path / "a", rows()), report_dir(tmp_path / "b", rows())
    cases = {(): "give a REPORT_DIR to rebuild, or --compare A B [C ...]",
             (str(a), str(b)): "2 folders given: rebuild one REPORT_DIR at a time, or add --compare",
             ("--compare", str(a)): "--compare needs two or more report folders",
             (str(a), "--out", str(tmp_path / "c.html")): "--out writes the comparison page: use it with --compare",
             ("--compare", str(a), str(b), str(a)): f"the same report folder is given twice: {a}",
             ("-q", "-v", str(a)): "-q/--quiet and -v/--verbose contradict each other"}
    for args, message in cases.items():
        result = CliRunner().invoke(main, ["report", *args])
        assert result.exit_code == 2, (args, result.output)
        assert f"Error: {message}" in result.stderr, (args, result.stderr)
        assert result.stdout == "", args
    assert not (tmp_path / "c.html").exists()


def test_format_leaderboard_is_a_compact_table(tmp_path: Path) -> None:
    folder = report_dir(tmp_path / "r", rows())
    write_reports(folder, problems=["6_extra"])
    text = format_leaderboard(json.loads((folder / "summary.json").read_text()))
    lines = text.splitlines()
    assert lines[0].split()[:6] == ["run", "subs", "problems", "code", "compiled", "correct"]
    assert lines[2].split()[:6] == ["model-a", "6", "4/6", "83.3%", "50.0%", "33.3%"]  # the 4 problems it answered
    assert lines[5].split()[:3] == ["overall", "13", "6/6"]
    assert "fast_p of a run over the problems it answered (problems), of overall over all 6" in text
    assert lines[5].split()[0] == "overall" and "1.20x" in lines[3]
    assert len({len(line) for line in lines[:6]}) == 1  # columns line up


def test_report_json_prints_the_summary_and_only_it(tmp_path: Path) -> None:
    folder = report_dir(tmp_path / "r", rows())
    result = CliRunner().invoke(main, ["report", str(folder), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == json.loads((folder / "summary.json").read_text())
    assert f"report: {folder / 'index.html'}" in result.stderr


def test_quiet_report_prints_nothing_and_verbose_logs_to_stderr(tmp_path: Path) -> None:
    folder = report_dir(tmp_path / "r", rows())
    quiet = CliRunner().invoke(main, ["report", str(folder), "-q"])
    assert quiet.exit_code == 0 and quiet.output == "" and (folder / "index.html").is_file()
    loud = CliRunner().invoke(main, ["-v", "report", str(folder)])
    assert loud.exit_code == 0, loud.output
    assert "debug evalkit.report.summary: " in loud.stderr and "debug" not in loud.stdout
    assert "18 row(s) read" in loud.stderr
    configure_logging()  # back to the defaults for the tests that follow in this process


def test_a_folder_without_results_is_a_failure_in_clicks_style(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["report", str(tmp_path)])
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: {tmp_path}: no results.jsonl here") and result.stdout == ""
