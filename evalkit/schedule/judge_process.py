"""Trusted side: a judge station in a process of its own, so several judges time at once without sharing an
interpreter (and its lock) and each sees only its own GPU.

The scheduler starts ``python -m evalkit.schedule.judge_process FD`` with ``CUDA_VISIBLE_DEVICES`` set to
the judge's GPU and its affinity set to the judge's cores, and talks to it over a socket pair of pickled
tuples (both ends are evalkit's own code; no submission code runs in either):

    scheduler -> judge:  ("start", StationSpec) | ("prepare", problem_id, kinds) | ("judge", submission, triage,
                         build_outcome) | ("exit",)
    judge -> scheduler:  ("hold",) / ("release",): the judge begins / ends a measurement; the scheduler
                         freezes the builds (``BuildFreezer.timing``) and answers ("held",) / ("released",)
                         ("progress", text) | ("failed", message) | ("done", value): the baselines for
                         "prepare"; for "judge", the row and the problem the judge now has loaded

A judge process that dies turns the answer it was judging into a ``judge_failed`` row and is started again.
"""

from __future__ import annotations

import logging
import os
import pickle  # noqa: S403 - both ends are evalkit's trusted processes
import socket
import subprocess
import sys
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Callable, Iterator

from evalkit.intake.triage import Triage
from evalkit.judge.builder import BuildOutcome
from evalkit.records import ResultRow, Submission
from evalkit.sandbox.freezer import BuildFreezer
from evalkit.sandbox.launcher import Limits
from evalkit.schedule.options import JudgeOptions
from evalkit.schedule.placement import JudgeSlot, visible_devices_entry
from evalkit.schedule.station import BaselineFiles, JudgeStation
from evalkit.sources.problems import Problem

logger = logging.getLogger(__name__)

EXIT_WAIT_S = 10.0


class JudgeProcessDied(RuntimeError):
    """The judge process ended without answering (it crashed, or was killed)."""


@dataclass(frozen=True)
class StationSpec:
    """Everything a judge process needs to build its ``JudgeStation`` (pickled to it)."""

    problems: dict[str, Problem]
    options: JudgeOptions
    device: str
    seed: int
    limits: Limits
    baselines: BaselineFiles
    driver: str | None


class ProcessStation:
    """The scheduler's handle on one judge process; ``prepare`` and ``judge`` block until it answers."""

    def __init__(self, slot: JudgeSlot, spec: StationSpec, freezer: BuildFreezer | None,
                 progress: Callable[[str], None] | None = None) -> None:
        self.slot, self.spec, self.freezer = slot, spec, freezer
        self._progress = progress or (lambda text: None)
        self.current_problem: str | None = None
        self._proc: subprocess.Popen | None = None
        self._conn: Connection | None = None

    def prepare(self, problem_id: str, kinds: tuple[str, ...] | None = None) -> dict[str, Any]:
        baselines = self._request(("prepare", problem_id, kinds))
        self.current_problem = problem_id
        return baselines

    def judge(self, submission: Submission, early: Triage, outcome: BuildOutcome) -> ResultRow:
        row, self.current_problem = self._request(("judge", submission, early, outcome))
        return row

    def close(self) -> None:
        if self._proc is None:
            return
        try:
            self._send(("exit",))
            self._proc.wait(timeout=EXIT_WAIT_S)
        except (OSError, subprocess.TimeoutExpired, JudgeProcessDied):
            self._proc.kill()
            self._proc.wait()
        self._proc, self._conn = None, None

    def _start(self) -> None:
        parent, child = socket.socketpair()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(_import_path())}
        if self.slot.gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = visible_devices_entry(self.slot.gpu, os.environ.get("CUDA_VISIBLE_DEVICES"))
        child_fd = child.detach()
        self._proc = subprocess.Popen([sys.executable, "-m", "evalkit.schedule.judge_process", str(child_fd)],
                                      pass_fds=(child_fd,), env=env, stdin=subprocess.DEVNULL)
        os.close(child_fd)
        if self.slot.cpus:
            os.sched_setaffinity(self._proc.pid, self.slot.cpus)
        self._conn = Connection(parent.detach())
        self.current_problem = None
        self._send(("start", self.spec))

    def _request(self, message: tuple) -> Any:
        if self._proc is None or self._proc.poll() is not None:
            self._start()
        self._send(message)
        with ExitStack() as frozen:
            while True:
                reply = self._receive()
                kind = reply[0]
                if kind == "hold":
                    if self.freezer is not None:
                        frozen.enter_context(self.freezer.timing())
                    self._send(("held",))
                elif kind == "release":
                    frozen.close()
                    self._send(("released",))
                elif kind == "progress":
                    self._progress(reply[1])
                elif kind == "done":
                    return reply[1]
                else:
                    raise RuntimeError(f"judge process {self.slot.name}: {reply[1]}")

    def _send(self, message: tuple) -> None:
        try:
            self._conn.send_bytes(pickle.dumps(message))
        except (OSError, AttributeError) as err:
            raise self._died(f"could not send to it ({err})") from err

    def _receive(self) -> tuple:
        try:
            return pickle.loads(self._conn.recv_bytes())  # noqa: S301 - our own judge process
        except (EOFError, OSError) as err:
            raise self._died(f"it stopped answering ({err})") from err

    def _died(self, why: str) -> JudgeProcessDied:
        code = self._proc.poll() if self._proc else None
        if self._proc is not None and code is None:
            self._proc.kill()
            self._proc.wait()
        self._proc, self._conn = None, None
        return JudgeProcessDied(f"judge process {self.slot.name} ended (exit code {code}): {why}")


def _import_path() -> list[str]:
    """Where the judge process finds evalkit: this process's own import path (a checkout, a test's rootdir)."""
    here = str(Path(__file__).resolve().parents[2])
    inherited = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return [here, *inherited]


class _Channel:
    """The judge process's end of the socket pair."""

    def __init__(self, fd: int) -> None:
        self.conn = Connection(fd)

    def send(self, message: tuple) -> None:
        self.conn.send_bytes(pickle.dumps(message))

    def receive(self) -> tuple:
        return pickle.loads(self.conn.recv_bytes())  # noqa: S301 - the scheduler, our own process

    @contextmanager
    def quiet(self) -> Iterator[None]:
        """A measurement: the scheduler freezes the builds for as long as it lasts."""
        self.send(("hold",))
        self._expect("held")
        try:
            yield
        finally:
            self.send(("release",))
            self._expect("released")

    def _expect(self, kind: str) -> None:
        reply = self.receive()
        if reply[0] != kind:
            raise RuntimeError(f"the scheduler answered {reply[0]!r} where {kind!r} was expected")


def serve(fd: int) -> int:
    """The judge process: build the station from the first message, then answer requests until "exit"."""
    channel = _Channel(fd)
    first = channel.receive()
    spec: StationSpec = first[1]
    station = JudgeStation(spec.problems, spec.options, spec.device, spec.seed, spec.limits, spec.baselines,
                           spec.driver, quiet=channel.quiet, progress=lambda text: channel.send(("progress", text)))
    while True:
        try:
            message = channel.receive()
        except EOFError:  # the scheduler is gone: end this judge's workers (its spare) all the same
            message = ("exit",)
        if message[0] == "exit":
            station.close()
            return 0
        try:
            if message[0] == "prepare":
                value = station.prepare(message[1], message[2])
            else:  # the row, and the problem now loaded (a build that failed loads none)
                value = (station.judge(*message[1:]), station.current_problem)
        except Exception as err:  # noqa: BLE001 - reported to the scheduler, which records the answer's row
            logger.exception("judge process: %s failed", message[0])
            channel.send(("failed", f"{type(err).__name__}: {err}"))
            continue
        channel.send(("done", value))


if __name__ == "__main__":
    logging.basicConfig(level=os.environ.get("EVALKIT_LOG_LEVEL", "WARNING"), format="evalkit judge: %(message)s")
    sys.exit(serve(int(sys.argv[1])))
