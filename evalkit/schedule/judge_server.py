"""Trusted side: the judge's end of the judge protocol (``judge_messages``), whichever transport carries it: the
scheduler's own process (``judge_client.DirectStation``), a judge process (``judge_process.serve``) or a Ray actor
(``ray_judge.JudgeActor``). Each message in, its reply out.

The first message must be a Start of this protocol version (another version is answered ``Refused``); it builds
the ``DeviceJudge``. Every message after it is checked with ``expect``: one the judge does not take there, a
failure of the device judge, are answered ``Failed`` (the scheduler raises it; an answer's ``judge_failed`` row),
so the judge goes on serving.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

from evalkit.judge.baselines import merge_entry

from evalkit.schedule import judge_messages as m
from evalkit.schedule.judge_messages import StationSpec
from evalkit.schedule.device_judge import DeviceJudge, Quiet
from evalkit.schedule.overlap import Deliver

logger = logging.getLogger(__name__)

Reply = m.Started | m.Refused | m.Done | m.Judged | m.Failed


def open_device_judge(spec: StationSpec, quiet: Quiet | None = None, progress: Callable[[str], None] | None = None,
                      deliver: Deliver | None = None) -> DeviceJudge:
    """The device judge ``spec`` describes; ``deliver`` takes the rows it decides after their answer's timing, when
    it overlaps answers (``spec.overlap``)."""
    return DeviceJudge(spec, quiet=quiet, progress=progress, deliver=deliver)


class JudgeServer:
    """Serves one judge's messages; ``open`` builds its device judge from the Start's spec."""

    def __init__(self, open: Callable[[StationSpec], DeviceJudge] = open_device_judge) -> None:  # noqa: A002
        self._open = open
        self.device_judge: DeviceJudge | None = None
        self._copy: Path | None = None  # the judge's copy of the report's baselines (``BaselineFiles.in_report``)

    def handle(self, message: Any) -> Reply:
        """The reply to ``message``; never raises for what the scheduler sends."""
        try:
            if self.device_judge is None and not isinstance(message, m.Exit):
                return self._start(m.expect(message, m.Start))
            return self._serve(m.expect(message, m.AddProblem, m.Prepare, m.JudgeAnswer, m.Exit))
        except Exception as err:  # noqa: BLE001 - reported to the scheduler, which records the answer's row
            logger.exception("judge: %s failed", type(message).__name__)
            return m.Failed(f"{type(err).__name__}: {err}")

    def close(self) -> None:
        judge, self.device_judge = self.device_judge, None
        if judge is not None:
            judge.close()
        copy, self._copy = self._copy, None
        if copy is not None:
            shutil.rmtree(copy.parent, ignore_errors=True)

    def _start(self, start: m.Start) -> m.Started | m.Refused:
        if start.version != m.PROTOCOL_VERSION:
            logger.error("judge: refused a Start of judge protocol %s (this judge speaks %s)", start.version,
                         m.PROTOCOL_VERSION)
            return m.Refused(m.PROTOCOL_VERSION, start.version)
        spec = start.spec
        if spec.baselines.in_report:  # the report's entries, as the scheduler sends them: the judge reads no report
            self._copy = Path(tempfile.mkdtemp(prefix="evalkit-judge-baselines-")) / "baselines.json"
            spec = replace(spec, baselines=replace(spec.baselines, report=self._copy))
        self.device_judge = self._open(spec)
        return m.Started()

    def _serve(self, message: m.AddProblem | m.Prepare | m.JudgeAnswer | m.Exit) -> m.Done | m.Judged:
        judge = self.device_judge
        if isinstance(message, m.Exit):
            self.close()
            return m.Done(None)
        if isinstance(message, m.AddProblem):
            judge.plans.setdefault(message.problem.id, message.plan)
            judge.problems.setdefault(message.problem.id, message.problem)
            return m.Done(None)
        if isinstance(message, m.Prepare):
            for key, entry in message.report_entries.items() if self._copy is not None else ():
                merge_entry(self._copy, key, entry)
            return m.Done(judge.prepare(message.problem_id, message.kinds))
        row = judge.judge_answer(message.submission, message.triage, message.outcome, alone=message.alone)
        return m.Judged(row, judge.current_problem, judge.current_baselines, judge.kept_problems)
