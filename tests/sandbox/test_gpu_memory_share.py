"""The judges of one GPU share its memory (``HostTiming.reserve_memory``, ``GpuGate.memory``): an answer's working set
is held against the others' before it is judged, so that two judges' large answers do not run the GPU out of memory
together (two judges on one H200 did: docs/gpu-runs/2026-11-29-rl-steps-h200), while small ones go side by side;
first come, first served; and a judge that holds its share too long never stops the others."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from evalkit.judge.reference import OutputSpec
from process_helpers import wait_for
from evalkit.sandbox.host_timing import HostTiming
from evalkit.schedule import gpu_memory

MIB = 2**20
BUDGET = 100 * MIB


@pytest.fixture
def registry(tmp_path: Path) -> Path:
    folder = tmp_path / "registry"
    folder.mkdir()
    return folder


def _reserving(host: HostTiming, mib: int, limit_s: float = 30.0) -> tuple[threading.Thread, list[object]]:
    """A judge asking for ``mib`` MiB in a thread of its own: the token it got lands in the list."""
    got: list[object] = []
    thread = threading.Thread(target=lambda: got.append(host.reserve_memory("0", mib * MIB, BUDGET, limit_s)))
    thread.start()
    return thread, got


def test_answers_that_fit_together_are_judged_side_by_side(registry):
    first = HostTiming(registry).reserve_memory("0", 40 * MIB, BUDGET, 30.0)
    thread, got = _reserving(HostTiming(registry), 40, limit_s=60)
    thread.join(30)  # at once, unless it waits (then until its 60 s limit)
    assert got and got[0] is not None, "a second answer waited though both fit the budget"
    for token in (first, got[0]):
        token.release()  # type: ignore[union-attr]


def test_an_answer_that_does_not_fit_waits_until_the_other_judges_share_is_given_back(registry):
    first = HostTiming(registry).reserve_memory("0", 60 * MIB, BUDGET, 30.0)
    assert first is not None
    thread, got = _reserving(HostTiming(registry), 60)
    thread.join(0.5)
    assert thread.is_alive(), "two answers held more than the budget at once"
    first.release()
    thread.join(30)
    assert got and got[0] is not None, "the waiting answer never got its share"
    got[0].release()  # type: ignore[union-attr]
    assert not list(registry.iterdir()), "a reservation left its token behind"


def test_a_small_answer_does_not_jump_ahead_of_a_large_one_already_waiting(registry):
    held = HostTiming(registry).reserve_memory("0", 60 * MIB, BUDGET, 30.0)
    large, large_got = _reserving(HostTiming(registry), 60)
    wait_for(lambda: any(".wait." in path.name for path in registry.iterdir()), 30, "the large answer to ask")
    small, small_got = _reserving(HostTiming(registry), 30)
    small.join(0.5)
    assert small.is_alive(), "a small answer went ahead of a large one waiting since before it"
    held.release()  # type: ignore[union-attr]
    large.join(30)
    assert large_got and large_got[0] is not None
    large_got[0].release()  # type: ignore[union-attr]
    small.join(30)
    assert small_got and small_got[0] is not None
    small_got[0].release()  # type: ignore[union-attr]


def test_an_answer_larger_than_the_budget_is_judged_alone_and_one_held_too_long_stops_nobody(registry, caplog):
    alone = HostTiming(registry).reserve_memory("0", 500 * MIB, BUDGET, 30.0)
    assert alone is not None, "an answer larger than the budget, with nothing else held, must still be judged"
    with caplog.at_level(logging.WARNING):
        late = HostTiming(registry).reserve_memory("0", 10 * MIB, BUDGET, 0.3)
    assert late is not None
    assert "judging beside them" in caplog.text
    for token in (alone, late):
        token.release()


def test_a_judges_hold_inside_its_own_takes_no_second_share(registry):
    """A judge holds one share at a time: a baseline timed for the answer in hand (``DeviceJudge.prepare`` inside
    ``DeviceJudge._judged``) is within that answer's share. A second token would count the judge twice in what the
    other judges of the GPU wait for."""
    from evalkit.sandbox import gpu_gate

    other = HostTiming(registry).reserve_memory("0", 40 * MIB, BUDGET, 30.0)
    gate = gpu_gate.GpuGate(HostTiming(registry), "0")
    with gate.memory(30 * MIB, BUDGET), gate.memory(30 * MIB, BUDGET):
        held = [path.name for path in registry.iterdir() if path.name.startswith("memory.0.held.")]
    assert len(held) == 2, f"a judge's hold inside its own took a second share: {held}"
    other.release()  # type: ignore[union-attr]
    assert not list(registry.iterdir()), "a share was not given back"


def test_a_memory_token_of_another_form_reserves_nothing(registry):
    other_version = HostTiming(registry)._publish(f"memory.0.held.{'9' * 20}.x.someone")
    assert other_version is not None
    token = HostTiming(registry).reserve_memory("0", 90 * MIB, BUDGET, 30.0)
    assert token is not None
    for held in (other_version, token):
        held.release()


def test_an_answers_share_counts_what_its_workers_and_its_float64_reference_hold():
    judge = SimpleNamespace(input_templates=[torch.empty(256, device="meta")], specs=[OutputSpec((128,), torch.float32)],
                            batch=2)
    inputs, outputs = 256 * 4, 128 * 4
    assert gpu_memory.answer_bytes(judge) == 2 * 2 * (inputs + outputs) + 4 * outputs  # type: ignore[arg-type]
    assert gpu_memory.answers_budget_bytes("cpu") == 0
    assert isinstance(gpu_memory.answer_memory(None, judge, "cuda"), type(gpu_memory.nullcontext()))  # type: ignore[arg-type]
