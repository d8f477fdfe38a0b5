"""End to end on CPU: SIGINT or SIGTERM while answers build or while two judges judge leaves no traceback, no
process of the run, a report that --resume continues, and exits 128 + the signal's number."""

from __future__ import annotations

import json
import os
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
from process_helpers import Tail, alive, children, descends_from, sandboxes, stop_with, wait_for

# Whole runs with two judge processes, signalled while they build (cold) or judge.
pytestmark = pytest.mark.slow

PROBLEMS = FIXTURES / "judge_problems"
NO_CODE = "I would write a fused kernel here, but I ran out of time.\n"


def _building(pid: int) -> bool:
    """Whether a sandbox of ``pid``'s run is running in a build's folder (``evalkit-build-*``)."""
    for sandbox in sandboxes():
        try:
            if descends_from(sandbox, pid) and "evalkit-build-" in os.readlink(f"/proc/{sandbox}/cwd"):
                return True
        except OSError:
            continue
    return False


@pytest.mark.parametrize(("moment", "signum", "code"), [("building", signal.SIGINT, 130),
                                                        ("judging", signal.SIGTERM, 143)])
def test_a_signal_with_two_judges_leaves_no_traceback_no_process_and_a_report_to_resume(
        tmp_path: Path, moment: str, signum: int, code: int) -> None:
    subs, out, cache = tmp_path / "subs", tmp_path / "report", tmp_path / "cache"
    answers = subs / "hygiene" / "linear_relu"
    answers.mkdir(parents=True)
    (answers / "prose.txt").write_text(NO_CODE)  # judged (no_code) at once: the report has a row
    if moment == "building":
        shutil.copy(FIXTURES / "hygiene_slow_build" / "hygiene" / "linear_relu" / "slow_import.py", answers)
    else:  # one hang for each judge
        for name in ("hang", "hang_too"):
            shutil.copy(FIXTURES / "hygiene_hang" / "hygiene" / "linear_relu" / "hang.py", answers / f"{name}.py")
    args = [sys.executable, "-m", "evalkit", "score", str(subs), "--problems", str(PROBLEMS), "--out", str(out),
            "--device", "cpu", "--judges", "2", "--baselines", "none", "--timing-trials", "3", "--timeout", "300",
            "--cache-dir", str(cache), "--seed", "5", "--progress"]
    proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    stdout, stderr = Tail(proc.stdout), Tail(proc.stderr)
    try:
        if moment == "building":
            wait_for(lambda: _building(proc.pid) or proc.poll() is not None, 180, "the slow build")
        else:
            wait_for(lambda: stderr.text().count(": judging") >= 2 or proc.poll() is not None, 240,
                     "both hangs to be judged")
        assert proc.poll() is None, stdout.text() + stderr.text()
        time.sleep(1)
        kids = children(proc.pid)
        marked = {sandbox for sandbox in sandboxes() if descends_from(sandbox, proc.pid)}
    except BaseException:
        proc.kill()
        raise
    exit_code, output = stop_with(proc, signum, stdout, stderr, timeout_s=90)
    assert exit_code == code, output
    assert "Traceback" not in output and "Error" not in output, output
    assert f"interrupted by {signal.Signals(signum).name}" in output
    wait_for(lambda: not [pid for pid in kids | marked if alive(pid)], 5,
             f"the run's processes to end: {[pid for pid in kids | marked if alive(pid)]}")
    assert [row["sample"] for row in map(json.loads, (out / "results.jsonl").read_text().splitlines())] == ["prose"]
    resume = next(line for line in output.splitlines() if "to continue, run: " in line).split("to continue, run: ")[1]
    for answer in answers.glob("*.py"):  # the printed command resumes once what hung is gone
        answer.unlink()
    resumed = CliRunner().invoke(main, shlex.split(resume)[1:], catch_exceptions=False)
    assert resumed.exit_code == 0, resumed.output
    assert "1 already in the report" in resumed.output
