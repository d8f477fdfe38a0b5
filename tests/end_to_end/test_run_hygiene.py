"""End to end on CPU: `evalkit score` never mixes settings on --resume, says what is wrong with a bad input
(one line, exit 1, nothing judged), and on SIGTERM/SIGINT kills every sandbox, writes the report of what was
judged, prints the --resume command and exits 128 + the signal's number."""

from __future__ import annotations

import json
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import FIXTURES, ROOT
from evalkit.cli.main import main
from process_helpers import Tail, sandboxes, stop_with, wait_for

PROBLEMS = FIXTURES / "judge_problems"
NO_CODE = "I would write a fused kernel here, but I ran out of time.\n"


def _answers(folder: Path, *names: str, problem: str = "linear_relu") -> Path:
    """A folder of runs with one run, ``hygiene``, holding a no-code answer per name (judged in milliseconds)."""
    for name in names:
        path = folder / "hygiene" / problem / f"{name}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(NO_CODE)
    return folder


def _score(submissions: Path, out: Path, *extra: str, problems: Path = PROBLEMS):
    args = ["score", str(submissions), "--problems", str(problems), "--out", str(out), "--device", "cpu",
            "--baselines", "eager", "--timing-trials", "3", "--cache-dir", str(out.parent / "cache"), *extra]
    return CliRunner().invoke(main, args, catch_exceptions=False)


def _rows(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def _recorded_seed(out: Path) -> int:
    return json.loads((out / "run.json").read_text())["settings"]["seed"]


# --resume never mixes settings


def test_resume_with_another_atol_is_refused_listing_the_difference(tmp_path: Path) -> None:
    subs, out = _answers(tmp_path / "subs", "a"), tmp_path / "report"
    assert _score(subs, out, "--atol", "0.01").exit_code == 0
    recorded = (out / "run.json").read_text()
    _answers(subs, "b")
    result = _score(subs, out, "--atol", "0.5", "--resume")
    assert result.exit_code == 1, result.output
    assert "--atol: recorded 0.01, now 0.5" in result.output
    assert "--out NEW_DIR" in result.output and "drop --resume" in result.output
    assert [r["sample"] for r in _rows(out)] == ["a"]  # nothing judged
    assert (out / "run.json").read_text() == recorded


def test_resume_with_the_same_options_continues_with_the_recorded_seed(tmp_path: Path) -> None:
    subs, out = _answers(tmp_path / "subs", "a"), tmp_path / "report"
    first = _score(subs, out, "--atol", "0.01")  # no --seed: a random one, recorded
    assert first.exit_code == 0, first.output
    seed = _recorded_seed(out)
    assert f"(seed {seed})" in first.output
    _answers(subs, "b")
    again = _score(subs, out, "--atol", "0.01", "--resume")
    assert again.exit_code == 0, again.output
    assert f"judged 1 submission(s) on cpu (seed {seed}), 1 already in the report" in again.output
    assert [r["sample"] for r in _rows(out)] == ["a", "b"]
    assert _recorded_seed(out) == seed
    refused = _score(subs, out, "--atol", "0.01", "--seed", str(seed + 1), "--resume")
    assert refused.exit_code == 1 and f"--seed: recorded {seed}, now {seed + 1}" in refused.output


def test_a_resume_under_another_build_isolation_is_said_and_recorded_beside_the_first(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    subs, out = _answers(tmp_path / "subs", "a"), tmp_path / "report"
    assert _score(subs, out, "--seed", "3").exit_code == 0
    environment = json.loads((out / "environment.json").read_text())
    now = environment["build_isolation"]
    (out / "environment.json").write_text(json.dumps({**environment, "build_isolation": "as first judged"}))
    _answers(subs, "b")
    assert _score(subs, out, "--seed", "3", "--resume").exit_code == 0
    recorded = json.loads((out / "environment.json").read_text())
    assert recorded["build_isolation"] == "as first judged" and recorded["build_isolation_on_resume"] == [now]
    assert "judged with build_isolation 'as first judged'" in caplog.text
    assert _score(subs, out, "--seed", "3", "--resume").exit_code == 0  # the same isolation again: said again
    assert json.loads((out / "environment.json").read_text())["build_isolation_on_resume"] == [now, now]


def test_all_already_judged_on_resume_is_fine(tmp_path: Path) -> None:
    subs, out = _answers(tmp_path / "subs", "a"), tmp_path / "report"
    assert _score(subs, out, "--seed", "3").exit_code == 0
    result = _score(subs, out, "--resume")
    assert result.exit_code == 0, result.output
    assert "judged 0 submission(s)" in result.output and "1 already in the report" in result.output


def test_a_report_without_run_json_cannot_be_resumed(tmp_path: Path) -> None:
    subs, out = _answers(tmp_path / "subs", "a"), tmp_path / "report"
    assert _score(subs, out, "--seed", "3").exit_code == 0
    (out / "run.json").unlink()  # as an older evalkit left it
    result = _score(subs, out, "--seed", "3", "--resume")
    assert result.exit_code == 1
    assert "older evalkit" in result.output and "cannot be resumed safely" in result.output


# bad inputs: one clear line, exit 1


def test_an_empty_submissions_folder_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    result = _score(tmp_path / "empty", tmp_path / "report")
    assert result.exit_code == 1
    assert f"{tmp_path / 'empty'}: no submissions found; expected one of:" in result.output
    assert "judged 0" not in result.output
    assert not (tmp_path / "report").exists()


def test_report_on_a_folder_without_results_is_an_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["report", str(tmp_path)])
    assert result.exit_code == 1
    assert f"{tmp_path}: no results.jsonl here" in result.output
    assert not (tmp_path / "summary.json").exists() and not (tmp_path / "index.html").exists()


def test_out_naming_a_file_is_an_error(tmp_path: Path) -> None:
    taken = tmp_path / "taken.txt"
    taken.write_text("keep me")
    result = _score(_answers(tmp_path / "subs", "a"), taken)
    assert result.exit_code == 1
    assert f"--out {taken}: that is a file, not a report folder" in result.output
    assert "Errno" not in result.output and taken.read_text() == "keep me"


def _problems_with(tmp_path: Path, broken: Path) -> Path:
    problems = tmp_path / "problems"
    shutil.copytree(PROBLEMS / "linear_relu", problems / "linear_relu")
    shutil.copytree(broken, problems / broken.name)
    return problems


@pytest.mark.parametrize(("broken", "expected"), [
    (FIXTURES / "broken_problems" / "syntax_error", "syntax_error/reference.py:9: syntax error"),
    (FIXTURES / "hygiene_problems" / "no_get_inputs", "no_get_inputs/reference.py: defines no get_inputs"),
])
def test_a_broken_problem_stops_only_a_run_with_nothing_else_to_judge(tmp_path: Path, broken: Path,
                                                                       expected: str) -> None:
    problems = _problems_with(tmp_path, broken)
    only = _answers(tmp_path / "only", "b", problem=broken.name)
    result = _score(only, tmp_path / "report", problems=problems)
    assert result.exit_code == 1
    assert expected in result.output
    assert "CUDA" not in result.output
    assert not (tmp_path / "report").exists()  # nothing judged, nothing written
    mixed = _answers(tmp_path / "subs", "a")
    shutil.copy(FIXTURES / "judge_submissions" / "fixtures" / "linear_relu" / "correct_python.md",
                mixed / "hygiene" / "linear_relu")
    _answers(mixed, "b", problem=broken.name)
    result = _score(mixed, tmp_path / "mixed", problems=problems)
    assert result.exit_code == 0, result.output  # the others' answers are judged; its own are said to be not
    assert f"answers to problem '{broken.name}' were not judged" in result.output
    assert {r["sample"]: r["verdict"] for r in _rows(tmp_path / "mixed")} == {"a": "no_code", "b": "no_code",
                                                                            "correct_python": "correct"}


def test_a_broken_problem_without_submissions_does_not_stop_the_run(tmp_path: Path) -> None:
    problems = _problems_with(tmp_path, FIXTURES / "hygiene_problems" / "no_get_inputs")
    result = _score(_answers(tmp_path / "subs", "a"), tmp_path / "report", problems=problems)
    assert result.exit_code == 0, result.output
    assert [r["verdict"] for r in _rows(tmp_path / "report")] == ["no_code"]


# signals


@pytest.fixture(scope="module")
def build_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cache")


@pytest.mark.slow  # a whole run in a subprocess, signalled while its answer spins
@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_kills_the_run_writes_the_report_and_prints_the_resume_command(
        tmp_path: Path, build_cache: Path, signum: int, code: int) -> None:
    subs, out = tmp_path / "subs", tmp_path / "report"
    shutil.copytree(FIXTURES / "hygiene_hang", subs)
    _answers(subs, "prose")  # judged (no_code) before the hang: the report has a row
    args = [sys.executable, "-m", "evalkit", "score", str(subs), "--problems", str(PROBLEMS), "--out", str(out),
            "--device", "cpu", "--baselines", "eager", "--timing-trials", "3", "--timeout", "300",
            "--cache-dir", str(build_cache), "--seed", "5", "--progress"]
    # SIGINT back to its default: a shell without job control starts background commands ignoring it.
    proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    stdout, stderr = Tail(proc.stdout), Tail(proc.stderr)
    try:
        wait_for(lambda: "linear_relu/hang: judging" in stderr.text() or proc.poll() is not None, 180,
                  "the hang to be judged")
        worker = wait_for(lambda: sandboxes(parent=proc.pid) or proc.poll() is not None, 60, "its worker")
        assert proc.poll() is None, stdout.text() + stderr.text()
        group = next(iter(worker.values())).split(".")[0]
        time.sleep(1)  # well inside `while True: pass`
    except BaseException:
        proc.kill()
        raise
    exit_code, output = stop_with(proc, signum, stdout, stderr, timeout_s=60)
    assert exit_code == code, output
    wait_for(lambda: not sandboxes(group), 2, f"the run's sandboxes to die: {sandboxes(group)}")
    assert f"interrupted by {signal.Signals(signum).name}" in output
    assert (out / "summary.json").is_file() and (out / "index.html").is_file()
    assert [r["sample"] for r in _rows(out)] == ["prose"]
    assert json.loads((out / "summary.json").read_text())["overall"]["submissions"] == 1
    expected = (f"evalkit score {subs} --out {out} --problems {PROBLEMS} --device cpu --timing-trials 3 "
                f"--run-timeout 300.0 --seed 5 --baselines eager --cache-dir {build_cache} --resume")
    assert f"to continue, run: {expected}" in output
    (subs / "hygiene" / "linear_relu" / "hang.py").unlink()  # the printed command resumes: same settings
    resumed = CliRunner().invoke(main, shlex.split(expected)[1:], catch_exceptions=False)
    assert resumed.exit_code == 0, resumed.output
    assert "1 already in the report" in resumed.output


@pytest.mark.slow  # a whole run in a subprocess, killed while its answer spins
def test_killing_the_judge_outright_leaves_no_sandbox_behind(tmp_path: Path, build_cache: Path) -> None:
    # SIGKILL leaves the judge no chance to clean up: each worker's parent-death signal must end it.
    args = [sys.executable, "-m", "evalkit", "score", str(FIXTURES / "hygiene_hang"), "--problems", str(PROBLEMS),
            "--out", str(tmp_path / "report"), "--device", "cpu", "--baselines", "none", "--timeout", "300",
            "--cache-dir", str(build_cache), "--seed", "5"]
    proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        worker = wait_for(lambda: sandboxes(parent=proc.pid) or proc.poll() is not None, 180, "its worker")
        assert proc.poll() is None
        group = next(iter(worker.values())).split(".")[0]
        time.sleep(1)
        proc.kill()
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    wait_for(lambda: not sandboxes(group), 5, f"the run's sandboxes to die: {sandboxes(group)}")


def test_an_answer_that_breaks_the_judge_itself_is_that_answers_row(tmp_path: Path, monkeypatch) -> None:
    from evalkit.judge.submission_judge import Judge

    honest_judge, calls = Judge.examine, []

    def failing_once(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise OverflowError("int too large to convert to float")
        return honest_judge(self, *args, **kwargs)

    monkeypatch.setattr(Judge, "examine", failing_once)
    subs = tmp_path / "subs" / "hygiene" / "linear_relu"
    subs.mkdir(parents=True)
    correct = FIXTURES / "judge_submissions" / "fixtures" / "linear_relu" / "correct_python.md"
    for name in ("a_first", "b_second"):
        shutil.copy(correct, subs / f"{name}.md")
    subs = subs.parent.parent
    result = CliRunner().invoke(main, ["score", str(subs), "--problems", str(PROBLEMS), "--out", str(tmp_path / "out"),
                                       "--device", "cpu", "--baselines", "none", "--timing-trials", "2",
                                       "--timeout", "60", "--cache-dir", str(tmp_path / "cache"), "--seed", "1"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    rows = _rows(tmp_path / "out")  # the first answer judged (either one: judges take answers as built) fails
    failed, judged = sorted(rows, key=lambda r: r["verdict"] != "runtime_error")
    assert failed["verdict"] == "runtime_error"
    assert "the judge could not finish this answer: OverflowError" in failed["reason"]
    assert judged["verdict"] == "correct", judged["reason"]
