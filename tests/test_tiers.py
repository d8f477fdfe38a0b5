"""The test tiers (docs/testing.md): pytest's default runs the fast one and skips a ``slow`` test saying how to run
it; ``--slow``, or a ``-m`` that chooses the tests, runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, SLOW_TIER_SKIPPED


@pytest.mark.slow
def test_a_slow_test() -> None:
    """Run by the test below in a pytest of its own, with each choice of tier."""


@pytest.mark.parametrize(("options", "outcome"), [((), "1 skipped"), (("--slow",), "1 passed"),
                                                  (("-m", "slow"), "1 passed")])
def test_the_default_tier_skips_a_slow_test_saying_how_to_run_it(tmp_path: Path, options: tuple[str, ...],
                                                                  outcome: str) -> None:
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-n", "0",
                           "--basetemp", str(tmp_path / "pytest"), *options,
                           f"{Path(__file__).relative_to(ROOT)}::test_a_slow_test"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and outcome in done.stdout, done.stdout + done.stderr
    assert (SLOW_TIER_SKIPPED in done.stdout) == (outcome == "1 skipped"), done.stdout
