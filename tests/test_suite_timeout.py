"""The suite's own guard (no side of the trust boundary): a test that hangs fails alone, once, with its stack, and the
run goes on, as CI runs it (pyproject.toml's pytest-timeout settings, under pytest-xdist's ``loadfile``)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMIT_S = 10  # the hung test's: far more than its neighbour, a bare `pass`, needs on any machine
HANGS = """\
import time


def test_hangs():
    time.sleep(600)


def test_after_it():
    pass
"""


def _settings() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]


def test_a_hung_test_fails_once_with_its_stack_and_the_file_goes_on(tmp_path: Path):
    (tmp_path / "test_hangs.py").write_text(HANGS)
    done = subprocess.run([sys.executable, "-m", "pytest", "-c", str(ROOT / "pyproject.toml"), "--rootdir", str(tmp_path),
                           "-p", "no:cacheprovider", "-n", "1", "--dist", "loadfile", "-o", f"timeout={LIMIT_S}",
                           str(tmp_path / "test_hangs.py")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert "1 failed, 1 passed" in done.stdout, done.stdout[-3000:]
    assert f"Timeout (>{LIMIT_S:.1f}s) from pytest-timeout" in done.stdout, done.stdout[-3000:]
    assert done.stdout.count("FAILED test_hangs.py::test_hangs") == 1, "the hung test ran more than once"
    assert "crashed" not in done.stdout, "the hung test took its worker down: xdist gives it to the next one"
    assert "time.sleep(600)" in done.stdout, "the failure does not show where the test hung"


def test_the_limit_is_far_above_the_slowest_test_and_far_below_cis_90_minutes():
    assert 600 <= _settings()["timeout"] <= 1800
