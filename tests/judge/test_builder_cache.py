"""The build cache survives a build killed mid-compile: torch's own lock file left behind is cleared (no later
build of that code waits on it until its time limit), and the same code built twice at once builds once."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from conftest import FIXTURES
from evalkit.judge.builder import build, build_key
from evalkit.schedule.options import default_limits

CODE = (FIXTURES / "judge_submissions" / "fixtures" / "linear_relu" / "correct_cpp.py").read_text()


def test_a_lock_left_by_a_killed_build_does_not_stall_the_next(tmp_path: Path):
    stale = tmp_path / build_key(CODE, "cpu") / "extensions" / "conv2d" / "lock"
    stale.parent.mkdir(parents=True)
    stale.write_text("")  # what torch leaves when its build process is killed while compiling
    start = time.monotonic()
    outcome = build(CODE, tmp_path, "cpu", 240, default_limits("cpu", 2.0))
    assert outcome.status == "ok", outcome.message
    assert time.monotonic() - start < 200
    assert not stale.exists()


def test_the_same_code_twice_at_once_is_built_once(tmp_path: Path):
    limits = default_limits("cpu", 2.0)
    with ThreadPoolExecutor(2) as pool:
        outcomes = list(pool.map(lambda _: build(CODE, tmp_path, "cpu", 240, limits), range(2)))
    assert [o.status for o in outcomes] == ["ok", "ok"]
    assert sorted(o.cached for o in outcomes) == [False, True]
