"""SpareWorker: the next answer's worker is started ahead, stays stopped while the judge measures, owns nothing
until its answer comes, and never outlives the judge (not even a stopped one, nor one whose starting thread
ended)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from evalkit.sandbox.cgroup import remove_run_cgroups
from evalkit.sandbox.launcher import Limits, WorkerGone
from evalkit.sandbox.processes import pin_threads, sandbox_members
from evalkit.sandbox.protocol import setup_request
from evalkit.sandbox.spare import SpareWorker, discard


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def _stopped(worker) -> bool:
    """Whether the kernel holds ``worker`` stopped: its cgroup's freezer says frozen, or (frozen by signals) it is T."""
    return worker.cgroup.freezer.frozen() if worker.freezing != "signals" else _state(worker.pid) == "T"


def _limits() -> Limits:
    return Limits(group=f"test-spare-{uuid.uuid4().hex[:8]}")


def test_the_next_answer_gets_the_worker_started_during_this_one(tmp_path):
    spares = SpareWorker(_limits(), {})
    try:
        first = spares.take(tmp_path / "a")
        spare = spares._spares[0]
        assert spare is not None and spare.alive() and spare.pid != first.pid
        second = spares.take(tmp_path / "b")
        assert second is spare and second.extensions_dir == tmp_path / "b"
        discard(first)
        discard(second)
    finally:
        spares.close()
    assert not spare.alive()


def _cores(pid: int) -> set[frozenset[int]]:
    """The affinity of every thread of ``pid``."""
    return {frozenset(os.sched_getaffinity(int(thread))) for thread in os.listdir(f"/proc/{pid}/task")}


def test_a_spare_starts_on_the_wider_cores_and_every_thread_of_it_moves_to_the_judges_when_taken(tmp_path):
    # A pinned judge's spares start beside it, on its cores and the builds', and are moved onto its own when taken.
    cores = tuple(sorted(os.sched_getaffinity(0)))
    if len(cores) < 2:
        pytest.skip("needs two cores")
    spares = SpareWorker(replace(_limits(), cpus=cores[:1]), {}, count=1, start_cpus=cores[:2])
    try:
        discard(spares.take(None))
        waiting = spares._spares[0]
        assert waiting.armed(5.0)
        assert _cores(waiting.pid) == {frozenset(cores[:2])}
        taken = spares.take(tmp_path / "a")
        assert taken is waiting and _cores(taken.pid) == {frozenset(cores[:1])}
        discard(taken)
    finally:
        spares.close()


def test_every_thread_of_a_process_is_moved_not_only_its_first(tmp_path):
    # A GPU worker started ahead has CUDA's threads besides its own: each keeps its own affinity.
    cores = tuple(sorted(os.sched_getaffinity(0)))
    if len(cores) < 2:
        pytest.skip("needs two cores")
    done = threading.Event()
    other = threading.Thread(target=done.wait)
    other.start()
    try:
        pin_threads(os.getpid(), cores[:1])
        assert _cores(os.getpid()) == {frozenset(cores[:1])}
    finally:
        pin_threads(os.getpid(), cores)
        done.set()
        other.join()


def test_every_spare_is_stopped_while_the_judge_measures():
    spares = SpareWorker(_limits(), {}, count=2)
    try:
        discard(spares.take(None))
        started = list(spares._spares)
        assert len(started) == 2
        with spares.parked():
            assert [_stopped(spare) for spare in started] == [True, True]
        time.sleep(0.05)
        assert not any(_stopped(spare) for spare in started)
    finally:
        spares.close()
    assert not any(spare.alive() for spare in started)


def test_a_spare_that_cannot_be_stopped_is_not_kept_and_the_measurement_goes_on(monkeypatch):
    spares = SpareWorker(_limits(), {}, count=2)
    try:
        discard(spares.take(None))
        stuck, other = list(spares._spares)
        for spare in (stuck, other):
            assert spare.armed(5.0)

        def cannot_stop() -> None:
            stuck.kill("timeout: not every process of its sandbox stopped")
            raise WorkerGone("timeout", "not every process of its sandbox stopped")

        monkeypatch.setattr(stuck, "freeze", cannot_stop)
        with spares.parked():
            assert list(spares._spares) == [other] and _stopped(other)
        assert not stuck.alive() and not stuck.workdir.exists()
    finally:
        spares.close()


def test_with_two_spares_answers_get_the_oldest_and_two_stay_ready(tmp_path):
    spares = SpareWorker(_limits(), {}, count=2)
    try:
        first = spares.take(tmp_path / "a")
        older, newer = spares._spares
        second = spares.take(tmp_path / "b")
        assert second is older and list(spares._spares)[0] is newer and len(spares._spares) == 2
        older_still = spares._spares[0]
        older_still.kill("killed by the run's clean-up")
        third = spares.take(tmp_path / "c")
        assert third is not older_still and third.alive()  # a dead spare is passed over
        for worker in (first, second, third):
            discard(worker)
    finally:
        spares.close()


def test_a_spares_folder_stays_the_judges_until_its_answer_comes():
    # Another sandbox (the answer judged meanwhile, running as the sandbox user) must not plant files where
    # the next answer will run: the folder is handed over with the setup request, not when the worker starts.
    pool = (61000, 61000) if os.geteuid() == 0 else None  # root: each sandbox leases a uid of its own
    spares = SpareWorker(replace(_limits(), run_as=pool), {})
    try:
        discard(spares.take(None))
        spare = spares._spares[0]
        mode = spare.workdir.stat()
        assert mode.st_uid == os.getuid() and not mode.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        setup = spare._hand_over(setup_request("judge", "answer.py", "cpu", {}))
        assert setup.limits["run_as"] == spare.run_as and (spare.run_as is None) == (pool is None)
        if pool is not None:
            assert spare.workdir.stat().st_uid == spare.run_as[0]  # its answer has come: now it is the sandbox's
    finally:
        spares.close()


def test_a_spare_outlives_the_judge_thread_that_asked_for_it():
    # A worker dies with the thread that started it (parent-death signal); judge threads end with each batch.
    spares = SpareWorker(_limits(), {})
    try:
        thread = threading.Thread(target=lambda: discard(spares.take(None)))
        thread.start()
        thread.join()
        spare = spares._spares[0]
        time.sleep(1.0)
        assert spare.alive()
    finally:
        spares.close()


def test_a_judge_killed_while_its_spare_is_stopped_leaves_no_process(tmp_path):
    group = f"test-spare-{uuid.uuid4().hex[:8]}"
    script = textwrap.dedent(f"""
        import sys, time
        from evalkit.sandbox.launcher import Limits, WorkerGone
        from evalkit.sandbox.spare import SpareWorker
        spares = SpareWorker(Limits(group={group!r}), {{}})
        spares.take(None)  # the worker for this answer, and a spare started at once
        with spares.parked():  # stopped (once armed) while "measuring"; the judge dies meanwhile
            print("parked", flush=True)
            time.sleep(60)
    """)
    judge = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                             cwd=Path(__file__).resolve().parents[2])
    try:
        assert judge.stdout.readline().strip() == "parked"
        assert sandbox_members(-1, f"EVALKIT_SANDBOX_ID={group}.")  # the two workers are there
    finally:
        judge.kill()
        judge.wait()
    deadline = time.monotonic() + 5
    while sandbox_members(-1, f"EVALKIT_SANDBOX_ID={group}.") and time.monotonic() < deadline:
        time.sleep(0.05)
    left = sandbox_members(-1, f"EVALKIT_SANDBOX_ID={group}.")
    remove_run_cgroups(group)  # what the killed judge could not remove (a run's start does not sweep others' groups)
    assert not left, "a worker outlived its judge"


def test_a_closed_worker_has_ended_only_once_no_process_of_it_is_left(tmp_path, monkeypatch):
    spares = SpareWorker(_limits(), {})
    try:
        worker = spares.take(None)
    finally:
        spares.close()
    worker.close()
    assert worker.ended()
    survivor = worker.pid + 1_000_000  # as if a process of its sandbox had escaped the kill
    monkeypatch.setattr(worker._processes, "members", lambda sid, marker, fresh=False: [survivor])
    worker._none_left = False
    assert not worker.ended(wait_s=0.05)
    discard(worker)


def test_closing_ends_every_worker_at_once_not_one_after_another():
    import pytest

    from evalkit.sandbox.spare import at_once

    # Each end waits until all three have begun: ended one after another, the first would wait in vain.
    begun = threading.Barrier(3, timeout=30)
    ended: list[int] = []
    at_once(lambda n: (begun.wait(), ended.append(n)), [1, 2, 3])
    assert sorted(ended) == [1, 2, 3]

    def fails_on_two(n: int) -> None:
        if n == 2:
            raise ValueError(f"worker {n} would not end")

    with pytest.raises(ValueError, match="worker 2"):  # a failure to end one is not swallowed
        at_once(fails_on_two, [1, 2])
