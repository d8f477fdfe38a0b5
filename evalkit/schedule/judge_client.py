"""Trusted side: the scheduler's end of the judge protocol (``judge_messages``), the engine's ``Station`` whichever
transport reaches the judge, and the in-process transport (``DirectStation``, one judge in the scheduler's own
process). ``judge_process.ProcessStation`` and ``ray_backend.RayStation`` are the other two.

Every kind speaks the same messages: a Start of this protocol version first (a judge of another version
refuses it, and the scheduler raises naming both versions), then AddProblem / Prepare / JudgeAnswer, each
answered with its reply or ``Failed``, and Exit on closing. Each reply's type is checked on arrival (``expect``).
An answer in hand whose caller left is ended at once on every kind: ``cancel`` sends a Cancel out of band.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable

from evalkit.intake.triage import Triage
from evalkit.judge.builder import BuildOutcome
from evalkit.records import ResultRow, Submission
from evalkit.report_folder import ReportFolder
from evalkit.schedule import judge_messages as m
from evalkit.schedule.judge_messages import M, StationSpec
from evalkit.schedule.judge_server import JudgeServer, open_device_judge
from evalkit.schedule.device_judge import Quiet

logger = logging.getLogger(__name__)


class JudgeFailed(RuntimeError):
    """The judge answered ``Failed``: it could not serve the request (an answer's ``judge_failed`` row)."""


class MessageStation:
    """The scheduler's handle on one judge; ``prepare`` and ``judge`` block until it answers. A subclass is the
    transport: ``_running``, ``_open``, ``_exchange`` (one message sent, its reply) and ``_lost``."""

    def __init__(self, name: str, spec: StationSpec, report: ReportFolder | None = None) -> None:
        self.name, self.spec, self.report = name, spec, report  # report: the folder the run writes (None: none)
        self.current_problem: str | None = None
        self.kept_problems: list[str] = []  # the problems the judge holds loaded, the least recently used first
        self._known: set[str] = set()  # the problems the running judge has
        self._abandoned = False
        self._judging: set[str] = set()  # the keys of the answers the judge holds (two when it overlaps them)
        self._cancel_pending: str | None = None  # a cancel that came before its JudgeAnswer went out
        # One request at a time on the wire, whichever thread sends it (a judge that overlaps answers is sent the next
        # one while the answer before waits for its ``Decided``).
        self._wire = threading.RLock()
        self._decided: dict[str, ResultRow | None] = {}  # rows decided past their timing, by answer key, until taken
        self._decided_changed = threading.Condition()
        self._lost_judges = 0  # judges lost so far: a row awaited from an earlier one never comes
        self._decided_lost: Exception | None = None  # why the last judge lost was

    @property
    def lanes(self) -> int:
        """How many answers the scheduler may have out to this judge at once (two when it overlaps them)."""
        return 2 if self.spec.overlap else 1

    def start(self) -> None:
        """Start the judge now (its process or actor, its station and spare workers), ahead of its first request."""
        with self._wire:
            self._ensure_started()

    def prepare(self, problem_id: str, kinds: tuple[str, ...] | None = None) -> dict[str, Any]:
        self._tell(problem_id)
        baselines = self._request(m.Prepare(problem_id, kinds, self._report_entries(problem_id)), m.Done).value
        self._baselines_seen(baselines)
        self.current_problem = problem_id
        self.kept_problems = [*(kept for kept in self.kept_problems if kept != problem_id), problem_id]
        return baselines

    def judge_answer(self, submission: Submission, early: Triage, outcome: BuildOutcome) -> ResultRow:
        """The answer's row. From a judge that overlaps answers it may come apart from the reply (``Decided``),
        while the judge is sent the next answer by another thread; or the judge may give the answer back, to be sent
        again and judged alone."""
        key = submission.key
        self._tell(submission.problem)
        self._judging = {*self._judging, key}
        try:
            if self._cancel_pending == key:
                raise JudgeFailed(f"judge {self.name}: cancelled before it was sent")  # its row is dropped
            for alone in (False, True):
                judge = self._lost_judges
                judged = self._request(m.JudgeAnswer(submission, early, outcome, alone), m.Judged)
                self._baselines_seen(judged.baselines)
                self.current_problem, self.kept_problems = judged.problem, judged.kept
                row = judged.row if judged.row is not None else self._await_decided(key, judge)
                if row is not None:
                    return row
            raise JudgeFailed(f"judge {self.name}: gave back an answer it was sent to judge alone")
        finally:
            self._judging = self._judging - {key}
            if self._cancel_pending == key:
                self._cancel_pending = None

    def cancel(self, key: str) -> None:
        """The answer ``key`` is no longer wanted (any thread): if the judge holds it, end its workers now; the
        row that comes back (a crash) is dropped by its batch. Its judge goes on with the next answer."""
        self._cancel_pending = key
        if key in self._judging:
            self._cancel_in_judge(key)

    # ---- rows decided apart from their reply (a judge that overlaps answers) ----

    def _file_decided(self, decided: object) -> None:
        """A ``Decided`` from the judge (its transport's reader): kept for the thread that waits for its row."""
        decided = m.expect(decided, m.Decided)
        with self._decided_changed:
            self._decided[decided.key] = decided.row
            self._decided_changed.notify_all()

    def _lose_decided(self, why: Exception) -> None:
        """The judge that owed rows is gone: every thread waiting for one raises ``why``."""
        with self._decided_changed:
            self._decided_lost, self._lost_judges = why, self._lost_judges + 1
            self._decided.clear()
            self._decided_changed.notify_all()

    def _await_decided(self, key: str, judge: int) -> ResultRow | None:
        """The row ``Decided`` for ``key`` by the judge that was the ``judge``-th (counting those lost before it)."""
        with self._decided_changed:
            self._decided_changed.wait_for(lambda: key in self._decided or self._lost_judges != judge)
            if key not in self._decided:
                raise self._decided_lost or JudgeFailed(f"judge {self.name}: its rows were lost")
            return self._decided.pop(key)

    # ---- what a transport gives ----

    def _cancel_in_judge(self, key: str) -> None:
        """Tell the judge to end the answer ``key`` now, without waiting for it to be done (the caller may be an event
        loop): ``DirectStation`` calls its station, a judge process is signalled, a Ray actor's ``cancel`` is served
        in a concurrency group of its own. By default nothing (the answer runs to its end and its row is dropped)."""

    def _running(self) -> bool:
        raise NotImplementedError

    def _open(self) -> None:
        """Start the judge (its process, its actor, its server) for a Start to be sent."""
        raise NotImplementedError

    def _exchange(self, message: Any) -> Any:
        """Send ``message``; the judge's reply."""
        raise NotImplementedError

    def _lost(self, why: str) -> Exception:
        """The judge is gone, or refused its Start: drop it (the next request starts another); the error to raise."""
        raise NotImplementedError

    def _report_entries(self, problem_id: str) -> dict[str, Any]:
        """The report's baselines of ``problem_id``, for the judge (which reads no file of the report)."""
        return self.report.baselines_of(problem_id) if self.report is not None else {}

    def _baselines_seen(self, baselines: dict[str, Any]) -> None:
        """The judge's baselines after a request (timed, or found in the shared cache), into the report's."""
        if self.report is not None:
            self.report.add_baselines(baselines, self.spec.kinds)

    # ---- the protocol ----

    def _tell(self, problem_id: str) -> None:
        """Send the judge a problem added since it started (``spec.problems`` is the scheduler's table)."""
        with self._wire:
            self._ensure_started()
            if problem_id not in self._known and problem_id in self.spec.problems:
                self._request(m.AddProblem(self.spec.problems[problem_id], self.spec.plans[problem_id]), m.Done)
                self._known.add(problem_id)

    def _ensure_started(self) -> None:
        if self._abandoned:
            raise self._lost("abandoned, as the run is stopping")
        if self._running():
            return
        self._open()
        self.current_problem, self.kept_problems = None, []
        self._known = set(self.spec.problems)
        reply = m.expect(self._exchange(m.Start(self.spec, m.PROTOCOL_VERSION)), m.Started, m.Refused, m.Failed)
        if isinstance(reply, m.Refused):
            raise self._lost(f"it speaks judge protocol {reply.version} and refused a Start of judge protocol "
                             f"{reply.asked}: two versions of evalkit")
        if isinstance(reply, m.Failed):
            raise self._lost(f"it could not start: {reply.message}")

    def _request(self, message: Any, kind: type[M]) -> M:
        """Send a request; its reply, of ``kind`` (``JudgeFailed`` when the judge answers ``Failed``)."""
        with self._wire:
            self._ensure_started()
            reply = m.expect(self._exchange(message), kind, m.Failed)
        if isinstance(reply, m.Failed):
            raise JudgeFailed(f"judge {self.name}: {reply.message}")
        return reply


class DirectStation(MessageStation):
    """A judge in the scheduler's own process: each message handed to its ``JudgeServer`` as it is."""

    def __init__(self, name: str, spec: StationSpec, quiet: Quiet | None = None,
                 progress: Callable[[str], None] | None = None, report: ReportFolder | None = None) -> None:
        super().__init__(name, spec, report)
        self._quiet, self._progress = quiet, progress
        self._server: JudgeServer | None = None

    def abandon(self) -> None:
        """The station starts no more workers; the run's group kill that follows ends those it holds."""
        server = self._server
        if server is not None and server.device_judge is not None:
            server.device_judge.abandon()

    def close(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            m.expect(server.handle(m.Exit()), m.Done)

    def _running(self) -> bool:
        return self._server is not None

    def _cancel_in_judge(self, key: str) -> None:
        server = self._server
        if server is not None and server.device_judge is not None:
            server.device_judge.cancel(key)

    def _open(self) -> None:
        self._server = JudgeServer(lambda spec: open_device_judge(
            spec, self._quiet, self._progress, lambda key, row: self._file_decided(m.Decided(key, row))))

    def _exchange(self, message: Any) -> Any:
        return self._server.handle(message)

    def _lost(self, why: str) -> Exception:
        server, self._server = self._server, None
        if server is not None:
            server.close()
        lost = JudgeFailed(f"judge {self.name}: {why}")
        self._lose_decided(lost)
        return lost
