"""An interrupted run cancels the builds not started and kills running ones, without waiting them out."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from evalkit.schedule import local
from evalkit.schedule.options import ScoreOptions, default_limits


def test_default_limits_give_every_run_its_own_group() -> None:
    first, second = default_limits("cpu", 1.0), default_limits("cpu", 1.0)
    assert first.group and second.group and first.group != second.group
    assert default_limits("cpu", 1.0, group="abc").group == "abc"


def test_abandoning_builds_cancels_queued_ones_and_kills_the_running_one(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    killed = threading.Event()  # a running build ends when its sandbox is killed
    kills: list[str] = []

    def fake_kill_group(group: str) -> int:
        kills.append(group)
        killed.set()
        return 1

    monkeypatch.setattr(local, "kill_group", fake_kill_group)
    options = ScoreOptions(submissions=tmp_path, problems_dir=tmp_path, out_dir=tmp_path)
    limits = default_limits("cpu", 1.0)
    run = local._Run(options, {}, "cpu", 1, limits, lambda stage, counts: None)
    pool = ThreadPoolExecutor(max_workers=1)
    run.builds = [pool.submit(killed.wait, 60) for _ in range(6)]
    time.sleep(0.2)  # the first one is running, five are queued
    start = time.monotonic()
    run._abandon_builds(pool)
    assert time.monotonic() - start < 2, "waited for builds instead of killing and cancelling them"
    assert kills and set(kills) == {limits.group}
    assert all(future.done() for future in run.builds)
    assert sum(future.cancelled() for future in run.builds) == 5
    assert run.builds[0].result() is True  # the running one ended once its sandbox was killed
