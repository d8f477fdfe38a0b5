"""An interrupted run cancels the builds not started and kills running ones, without waiting them out."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from evalkit.schedule import engine as engine_module
from evalkit.schedule.engine import Engine
from evalkit.schedule.options import JudgeOptions, default_limits
from evalkit.schedule.placement import plan
from evalkit.schedule.judge_messages import BaselineFiles
from process_helpers import wait_for


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

    monkeypatch.setattr(engine_module, "kill_group", fake_kill_group)
    limits = default_limits("cpu", 1.0)
    engine = Engine({}, {}, JudgeOptions(cache_dir=tmp_path), "cpu", 1, limits, BaselineFiles(None, None), None,
                    plan("cpu", "all", 1, [0, 1], 0))
    backend = engine.backend
    backend._pool = ThreadPoolExecutor(max_workers=1)
    backend._builds = [backend._pool.submit(killed.wait, 60) for _ in range(6)]
    wait_for(backend._builds[0].running, 30, "the first build to run")  # five queue (a loaded machine starts it late)
    engine.close(abandon=True)
    # Had it waited for the builds, five queued ones would still have run (each waits until killed).
    assert all(build.cancelled() for build in backend._builds[1:]), "waited for builds instead of cancelling them"
    assert kills and set(kills) == {limits.group}
    assert all(future.done() for future in backend._builds)
    assert sum(future.cancelled() for future in backend._builds) == 5
    assert backend._builds[0].result() is True  # the running one ended once its sandbox was killed


def test_closing_waits_for_a_busy_judge_thread_before_closing_its_station(tmp_path: Path) -> None:
    # A stop signal closes the engine while a judge thread may still hold an answer (and the freeze): its
    # station and the freezer must outlast it (closed under it, the thaw raised and the interpreter aborted).
    engine = Engine({}, {}, JudgeOptions(cache_dir=tmp_path), "cpu", 1, default_limits("cpu", 1.0),
                    BaselineFiles(None, None), None, plan("cpu", "all", 1, [0, 1], 0))
    finished = threading.Event()
    closed_while_busy: list[bool] = []
    abandoned_while_busy: list[bool] = []

    class Station:
        current_problem = None
        kept_problems: list[str] = []

        def abandon(self) -> None:  # told at once that the run stops (a judge process would be killed here)
            abandoned_while_busy.append(not finished.is_set())

        def close(self) -> None:
            closed_while_busy.append(not finished.is_set())

    judge = threading.Thread(target=lambda: (time.sleep(0.5), finished.set(), engine._busy.discard("cpu:0")))
    engine.stations, engine._judge_threads, engine._busy = [Station()], [judge], {"cpu:0"}
    judge.start()
    engine.close(abandon=True)
    assert abandoned_while_busy == [True] and closed_while_busy == [False]
