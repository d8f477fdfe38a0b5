"""Trusted side: where the engine's builds and judges run: ``Machines`` (a run's device, judges and backend), the
``Backend`` protocol, and ``LocalBackend``, this machine (a Ray cluster is ``ray_backend.RayBackend``). A pool of build
threads, each build in a sandbox; one judge in the scheduler's own process, or one judge process per slot (several
may share a GPU: each then gates its GPU work through ``evalkit.sandbox.gpu_gate``).
"""

from __future__ import annotations

import logging
import os
import time
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any, Callable, Protocol

from evalkit.intake.triage import Triage
from evalkit.judge.builder import BuildOutcome, build
from evalkit.records import ResultRow, Submission
from evalkit.report_folder import ReportFolder
from evalkit.sandbox.freezer import BuildFreezer
from evalkit.sandbox.launcher import WATCHDOG_PERIOD_S, Limits
from evalkit.sandbox.processes import ProcessTable
from evalkit.schedule.judge_client import DirectStation
from evalkit.schedule.judge_messages import StationSpec
from evalkit.schedule.judge_process import ProcessStation
from evalkit.schedule.placement import JudgeSlot, Placement, host_device

logger = logging.getLogger(__name__)

VISIBLE = "CUDA_VISIBLE_DEVICES"
BUILD_STOP_S = 5.0  # how long an interrupted run keeps killing sandboxes while its running builds end


class Station(Protocol):
    """The scheduler's handle on one judge (a ``device_judge.DeviceJudge``), wherever that judge runs: in this
    process (``judge_client.DirectStation``), in a judge process (``judge_process.ProcessStation``) or in a Ray actor
    (``ray_backend.RayStation``); each speaks the judge protocol (``judge_messages``) to it."""

    current_problem: str | None
    kept_problems: list[str]  # every problem the judge holds loaded, the least recently used first
    lanes: int  # the answers it may be sent at once (``overlap``: two)

    def start(self) -> None: ...  # start the judge now (its process, its spare workers), ahead of its first request
    def prepare(self, problem_id: str, kinds: tuple[str, ...] | None = None) -> dict[str, Any]: ...
    def judge_answer(self, submission: Submission, early: Triage, outcome: BuildOutcome) -> ResultRow: ...
    def cancel(self, key: str) -> None: ...  # that answer's caller left: end it now if it is in hand
    def abandon(self) -> None: ...  # the run is stopping: end the answer in hand now, start nothing new
    def close(self) -> None: ...


class Backend(Protocol):
    """Where builds and judges run: this machine (``LocalBackend``) or a Ray cluster (``ray_backend``)."""

    adds_problems: bool  # whether problems added after the start (given as text) reach its judges

    sizes: dict[str, int]  # entries its containers hold (builds kept): none may grow with the answers judged

    def start_build(self, code: str, cache_root: Path, device: str, timeout_s: float, limits: Limits,
                    init_inputs: Any, freezer: BuildFreezer) -> Future[BuildOutcome]: ...
    def station(self, slot: JudgeSlot, spec: StationSpec, judges: int, freezer: BuildFreezer,
                progress: Callable[[str], None], report: ReportFolder | None = None) -> Station: ...
    def abandon_builds(self, kill: Callable[[], object]) -> None: ...
    def close(self) -> None: ...


def overlaps_answers(slot: JudgeSlot) -> bool:
    """Whether the judge of ``slot`` overlaps answers (``overlap``): a GPU's only judge, whose answers' checks and
    profiles otherwise leave the GPU idle between timings. Several judges of one GPU already overlap each other."""
    return slot.gpu is not None and slot.gpu_judges == 1


class LocalBackend:
    """Builds in a thread pool of sandboxes on this machine; one judge in this process, or one judge process
    per slot when there are several (or its GPU is not this process's first)."""

    adds_problems = True  # problems added after the start reach the judges (in-process, or told by message)

    def __init__(self, build_jobs: int) -> None:
        self._pool = ThreadPoolExecutor(max_workers=build_jobs, thread_name_prefix="evalkit-build")
        self._builds: list[Future[BuildOutcome]] = []
        self._processes = ProcessTable(WATCHDOG_PERIOD_S)  # one /proc reading per period for every build's watcher

    def start_build(self, code: str, cache_root: Path, device: str, timeout_s: float, limits: Limits,
                    init_inputs: Any, freezer: BuildFreezer) -> Future[BuildOutcome]:
        future = self._pool.submit(build, code, cache_root, device, timeout_s, limits, init_inputs, freezer,
                                   processes=self._processes)
        self._builds = [*(kept for kept in self._builds if not kept.done()), future]  # only those abandon may kill
        return future

    @property
    def sizes(self) -> dict[str, int]:
        return {"builds": len(self._builds)}

    def station(self, slot: JudgeSlot, spec: StationSpec, judges: int, freezer: BuildFreezer,
                progress: Callable[[str], None], report: ReportFolder | None = None) -> Station:
        spec = replace(spec, gpu=host_device(slot, os.environ.get(VISIBLE)), gpu_judges=slot.gpu_judges,
                       overlap=spec.overlap and overlaps_answers(slot))
        if judges == 1 and slot.gpu is None:
            # This process is not pinned (it may be a caller's training loop), so neither is its worker: a worker
            # on the judge's two cores shared them with this process's own thread once builds had pushed it
            # there, and read 6-13% slow under build load on the H200. The slot's cores still stay free of builds.
            # On a GPU one judge has a process of its own, pinned with its timed workers as each of several is:
            # in this process its runs parted by up to 12% (docs/gpu-runs/2026-12-01-checks-overlap-h200/).
            return DirectStation(slot.name, replace(spec, limits=replace(spec.limits, cpus=None)),
                                 quiet=partial(freezer.timing, device=host_device(slot, os.environ.get(VISIBLE))),
                                 progress=progress, report=report)
        return ProcessStation(slot, spec, freezer, progress=progress, report=report)

    def abandon_builds(self, kill: Callable[[], object]) -> None:
        """Cancel the builds not started; kill the sandboxes of running ones until they end (bounded)."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        deadline = time.monotonic() + BUILD_STOP_S
        while True:
            kill()  # again each round: a build thread may have just started one
            running = [future for future in self._builds if not future.done()]  # done(): cancelled ones too
            if not running or time.monotonic() > deadline:
                break
            wait(running, timeout=0.2)
        if running:
            logger.warning("%d build(s) still running after %g s of killing their sandboxes",
                           len(running), BUILD_STOP_S)

    def close(self) -> None:
        self._pool.shutdown(wait=True)


@dataclass
class Machines:
    """A run's device, judges and backend; ``environment``: the judging machine's facts when they are not this
    machine's (a Ray cluster's GPU node), else None."""

    device: str
    placement: Placement
    backend: Backend | None = None  # None: this machine (``LocalBackend``)
    environment: dict[str, Any] | None = None
