"""A device judge's judged workers wait for their build's cache entry outside the judge's GPU use
(``DeviceJudge._entry_aside``, ``GpuGate.aside``): the workers another judge holds an entry with keep it through
that judge's timing, which would otherwise wait for this judge (tests/sandbox/test_gpu_gate.py shows the wait)."""

from __future__ import annotations

from contextlib import nullcontext
from types import SimpleNamespace

from evalkit.schedule import device_judge
from evalkit.schedule.overlap import Lanes


def _judge(gate: object) -> device_judge.DeviceJudge:
    judge = device_judge.DeviceJudge.__new__(device_judge.DeviceJudge)  # no worker, no problem: only its gate
    judge._lanes = Lanes(gate, [])
    return judge


def test_a_gpu_judges_workers_wait_for_their_entry_aside_of_its_use():
    gate = SimpleNamespace(aside=lambda: nullcontext())
    worker = SimpleNamespace(waiting_for_entry=nullcontext)
    assert _judge(gate)._entry_aside(worker) is worker  # type: ignore[arg-type]
    assert worker.waiting_for_entry is gate.aside


def test_a_judge_without_a_gate_waits_as_it_is():
    worker = SimpleNamespace(waiting_for_entry=None)
    _judge(None)._entry_aside(worker)  # type: ignore[arg-type]
    assert worker.waiting_for_entry is nullcontext
