"""The command line's conventions (README, "Exit codes"): click's ``Error: ...`` everywhere, exit 2 for usage
errors and 1 for failures, ``--json`` alone on stdout, ``-q`` errors only, ``-v`` debug logging, progress only
on a terminal unless ``--progress``; ``evalkit extract -`` reads stdin; ``score`` refuses options that cannot
apply before it judges anything."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from conftest import FIXTURES
from evalkit.cli.console import configure_logging
from evalkit.cli.main import main
from evalkit.cli.progress import Progress, display_mode
from evalkit.cli.score import resume_command, score_command

PROBLEMS = FIXTURES / "judge_problems"
CODE = "Here it is:\n\n```python\nimport torch\n\nclass ModelNew(torch.nn.Module):\n    pass\n```\n"


def run(*args: str, stdin: str | bytes | None = None) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args], input=stdin)


@pytest.fixture
def prose(tmp_path: Path) -> Path:
    """A run of one answer without code: judged at triage, in seconds, on any machine."""
    folder = tmp_path / "subs" / "mini" / "linear_relu"
    folder.mkdir(parents=True)
    (folder / "a.txt").write_text("I could not write this kernel.\n")
    return tmp_path / "subs"


def score(prose: Path, out: Path, *extra: str) -> Result:
    return run("score", prose, "--problems", PROBLEMS, "--out", out, "--device", "cpu", "--baselines", "eager",
               "--cache-dir", out.parent / "cache", "--seed", "1", *extra)


# --- usage errors: exit 2, before anything is judged ------------------------------------------------

@pytest.mark.parametrize(("value", "why"), [
    ("none,eager", "'none' means no baseline, so it cannot be listed with others"),
    ("eager,eager", "a baseline is listed twice"),
    ("eager,inductor", "unknown baseline(s) 'inductor'"),
    ("eager,", "unknown baseline(s) ''"),
])
def test_bad_baselines_are_usage_errors(prose: Path, tmp_path: Path, value: str, why: str) -> None:
    result = score(prose, tmp_path / "out", "--baselines", value)
    assert result.exit_code == 2, result.output
    assert "Error: Invalid value for '--baselines'" in result.stderr and why in result.stderr
    assert not (tmp_path / "out").exists()


def test_options_that_cannot_apply_are_usage_errors(prose: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    cases = [(["--progress", "-q"], "--progress and -q/--quiet contradict each other"),
             (["-q", "-v"], "-q/--quiet and -v/--verbose contradict each other"),
             (["--resume", "--out", "nowhere"], "Invalid value for '--out': nowhere is not a report folder, so "
                                                "--resume has nothing to continue")]
    for extra, message in cases:
        result = run("score", prose, "--problems", PROBLEMS, *extra)
        assert result.exit_code == 2 and f"Error: {message}" in result.stderr, (extra, result.output)
    result = run("score", prose, "--problems", PROBLEMS, "--resume")
    assert result.exit_code == 2
    assert "Error: --resume: there is no earlier report of 'subs' under reports/ to continue" in result.stderr
    assert not (tmp_path / "reports").exists() and not (tmp_path / "nowhere").exists()


def test_a_missing_problems_folder_names_the_option_score_accepts(prose: Path, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "problems").mkdir()
    monkeypatch.chdir(tmp_path / "subs")  # no problems/ here; one beside the submissions
    monkeypatch.delenv("EVALKIT_PROBLEMS", raising=False)
    result = run("score", prose)
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.startswith("Error: problems folder problems does not exist")
    assert f"give it with --problems DIR or $EVALKIT_PROBLEMS (there is one at {tmp_path / 'problems'}" in result.stderr
    assert "--problems-dir" not in result.stderr
    alias = run("score", prose, "--problems-dir", tmp_path / "nope")
    assert alias.exit_code == 1 and "problems folder" in alias.stderr  # the alias `evalkit problems` uses works too


# --- score's output ------------------------------------------------------------------------------------

def test_a_report_that_holds_results_is_continued_only_with_resume(prose: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.jsonl").write_text('{"kept": true}\n')
    result = score(prose, out)
    assert result.exit_code == 1, result.output
    assert f"Error: {out / 'results.jsonl'} already holds results; pass --resume to continue it" in result.stderr
    assert (out / "results.jsonl").read_text() == '{"kept": true}\n'


def test_score_json_prints_the_summary_alone_on_stdout(prose: Path, tmp_path: Path) -> None:
    result = score(prose, tmp_path / "out", "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary == json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["overall"]["verdicts"]["no_code"] == 1
    assert "judged 1 submission(s) on cpu (seed 1): no_code 1" in result.stderr
    assert "[1/1]" not in result.stderr and "\r" not in result.output  # not a terminal: no progress


def test_score_quiet_prints_nothing_and_forced_progress_is_plain_lines(prose: Path, tmp_path: Path) -> None:
    quiet = score(prose, tmp_path / "q", "-q")
    assert quiet.exit_code == 0 and quiet.output == "" and (tmp_path / "q" / "index.html").is_file()
    shown = score(prose, tmp_path / "p", "--progress")
    assert shown.exit_code == 0, shown.output
    assert "[1/1] linear_relu/a: no_code\n" in shown.stderr and "\r" not in shown.stderr
    assert shown.stdout.startswith("run ")  # the leaderboard


def test_the_resume_command_repeats_settings_not_display_options(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EVALKIT_CACHE", raising=False)  # CI sets it; it would be repeated as --cache-dir
    ctx = score_command.make_context("score", ["subs", "--baselines", "compile,eager", "--json", "--progress",
                                               "--seed", "3", "-q"])
    with ctx:
        assert resume_command(ctx, Path("reports/x")) == ("evalkit score subs --out reports/x --seed 3 "
                                                          "--baselines compile,eager --resume")


def test_progress_shows_only_where_someone_watches(capsys: pytest.CaptureFixture[str]) -> None:
    assert display_mode(None, quiet=False, terminal=True) == "bar"
    assert display_mode(None, quiet=False, terminal=False) == "off"
    assert display_mode(True, quiet=False, terminal=False) == "lines"
    assert display_mode(False, quiet=False, terminal=True) == "off"
    assert display_mode(None, quiet=True, terminal=True) == "off"
    with Progress("lines") as shown:
        shown.on_total(2)
        shown.on_progress("p/a: building", Counter())
        shown.on_progress("p/a: correct", Counter(correct=1))
    assert capsys.readouterr().err == "[0/2] p/a: building\n[1/2] p/a: correct\n"


# --- extract ---------------------------------------------------------------------------------------------

def test_extract_reads_stdin() -> None:
    result = run("extract", "-", stdin=CODE.encode("utf-16"))  # bytes, decoded as files are (a BOM here)
    assert result.exit_code == 0, result.output
    assert result.stdout == "import torch\n\nclass ModelNew(torch.nn.Module):\n    pass\n"
    assert "warning: <stdin>: decoded as UTF-16" in result.stderr
    assert run("extract", "-", "-q", stdin=CODE.encode("utf-16")).stderr == ""
    as_json = json.loads(run("extract", "-", "--json", stdin=CODE).stdout)
    assert as_json["ok"] is True and as_json["code"].startswith("import torch")


def test_extract_failures_use_clicks_error_style(tmp_path: Path) -> None:
    none = run("extract", "-", stdin="no code here, sorry.\n")
    assert none.exit_code == 1 and none.stdout == "" and none.stderr.startswith("Error: no ModelNew code in stdin: ")
    missing = run("extract", tmp_path / "nope.md")
    assert missing.exit_code == 1 and missing.stderr.startswith(f"Error: {tmp_path / 'nope.md'}: cannot read it")
    as_json = run("extract", tmp_path / "nope.md", "--json")
    assert as_json.exit_code == 1 and json.loads(as_json.stdout)["ok"] is False and as_json.stderr == ""
    binary = tmp_path / "x.bin"
    binary.write_bytes(b"\0\1\2" * 10)
    assert run("extract", binary).stderr.startswith(f"Error: {binary}: looks like a binary file")


def test_verbose_logs_debug_lines_to_stderr(prose: Path, tmp_path: Path) -> None:
    result = run("-v", "extract", "-", stdin=CODE)
    assert result.exit_code == 0 and "debug evalkit.cli.extract: read " in result.stderr
    assert "debug" not in result.stdout
    configure_logging()  # back to the defaults for the tests that follow in this process


def test_a_missing_submissions_folder_is_told_before_torch_is_imported(tmp_path: Path):
    import subprocess
    import sys

    probe = ("import sys\nfrom evalkit.cli.main import main\n"
             "try:\n    main(['score', sys.argv[1]])\nexcept SystemExit as end:\n    print('exit', end.code, 'torch' in sys.modules)\n")
    result = subprocess.run([sys.executable, "-c", probe, str(tmp_path / "nowhere")], capture_output=True, text=True)
    assert result.stdout.strip() == "exit 1 False", result.stdout + result.stderr
    assert "nowhere: no such file or folder" in result.stderr


def test_no_command_prints_torchs_numpy_warning(tmp_path: Path):
    import subprocess
    import sys

    answer = tmp_path / "run" / "linear_relu" / "answer.txt"
    answer.parent.mkdir(parents=True)
    answer.write_text("no code here")
    result = subprocess.run([sys.executable, "-m", "evalkit", "score", str(tmp_path / "run"), "--problems", str(PROBLEMS),
                             "--device", "cpu", "--out", str(tmp_path / "report"), "-q"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "NumPy" not in result.stderr and result.stderr == ""


def test_score_and_serve_take_the_runs_own_settings_alike() -> None:
    from evalkit.cli.score import score_command
    from evalkit.cli.serve import serve_command

    score, serve = ({param.name: param for param in command.params} for command in (score_command, serve_command))
    for name in ("seed", "baselines", "cache_dir", "memory_gib", "device", "gpus", "judges", "jobs", "timing_trials",
                 "hang_limit_s"):
        alike = [(c[name].opts, c[name].help, c[name].type.to_info_dict()) for c in (score, serve)]
        assert alike[0] == alike[1], name
    assert (score["baselines"].default, serve["baselines"].default) == ("eager,compile", "eager")  # serve: RL steps
