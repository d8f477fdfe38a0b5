"""A submission cannot reach outside its sandbox: no signal to the judge or any evalkit process, no
reading the judge's environment, no ptrace, no shared memory that outlives it or reaches another
sandbox's buffers. The run goes on, and the next submission is judged correctly.

The CLI runs in a subprocess here: if a defence failed, the judge killed would be that process, not pytest.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT

# Attacks on other processes from sandboxes run two at a time, in a run of its own (a cache of its own too: a
# sandbox of this run is told by the cache path in its environment).
pytestmark = pytest.mark.slow

SHM_KEY = 0x4556414C  # leaks_shared_memory.py's System V segment
ATTACK_FILE = Path("/dev/shm/evalkit-attack")


def _sysv_keys() -> set[int]:
    try:
        lines = Path("/proc/sysvipc/shm").read_text().splitlines()[1:]
    except OSError:
        return set()
    return {int(line.split()[0]) for line in lines if line.split()}


def _sandbox_processes(cache: Path) -> list[int]:
    """This run's sandbox processes (their extension folders lie in its build cache)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                environ = (entry / "environ").read_bytes()
                if b"EVALKIT_SANDBOX_ID=" in environ and str(cache).encode() in environ:
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess, dict[str, dict], Path]:
    ATTACK_FILE.unlink(missing_ok=True)
    out = tmp_path_factory.mktemp("isolation") / "report"
    args = [sys.executable, "-m", "evalkit", "score", str(FIXTURES / "isolation_submissions"),
            "--problems", str(FIXTURES / "judge_problems"), "--out", str(out), "--device", "cpu",
            "--baselines", "eager", "--timeout", "30", "--timing-trials", "3", "--warmup", "1", "--seed", "5",
            "--jobs", "2", "--cache-dir", str(out.parent / "cache")]
    env = {**os.environ, "EVALKIT_TEST_SECRET": "hunter2"}
    result = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    rows = {}
    if (out / "results.jsonl").exists():
        rows = {r["sample"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    return result, rows, out.parent / "cache"


def test_the_run_survives_every_attempt(run):
    result, rows, _ = run
    assert result.returncode == 0, result.stderr[-3000:]
    assert len(rows) == 7


def test_signalling_the_judge_fails_inside_the_sandbox(run):
    _, rows, _ = run
    row = rows["kills_parent"]
    assert row["verdict"] == "interface_error", row["reason"]
    assert "PermissionError" in row["reason"]


def test_killing_every_evalkit_process_fails_inside_the_sandbox(run):
    _, rows, _ = run
    row = rows["kills_every_evalkit"]
    assert row["verdict"] == "runtime_error", row["reason"]
    assert "PermissionError" in row["reason"]


def test_the_judges_environment_and_memory_are_out_of_reach(run):
    _, rows, _ = run
    row = rows["reads_judge_environ"]
    assert row["verdict"] == "correct", row["reason"]  # it returns a wrong answer exactly when it got through
    assert "hunter2" not in json.dumps(rows)


def test_shared_memory_does_not_outlive_the_sandbox(run):
    _, rows, _ = run
    assert rows["leaks_shared_memory"]["verdict"] == "correct"
    assert SHM_KEY not in _sysv_keys()
    assert not ATTACK_FILE.exists()  # /dev/shm is not writable from a sandbox


def test_answers_judged_beside_the_attacks_are_judged_correctly(run):
    _, rows, _ = run
    for sample in ("a_correct_before", "z_build_writes_shm", "zz_correct_after"):
        assert rows[sample]["verdict"] == "correct", (sample, rows[sample]["reason"])


def test_no_sandbox_process_is_left(run):
    _, _, cache = run
    deadline = time.monotonic() + 5
    while _sandbox_processes(cache) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _sandbox_processes(cache) == []
