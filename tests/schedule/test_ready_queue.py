"""The engine's queue of built answers: a judge takes its own problem's answers first, else the oldest built;
while nothing is built it loads the next problem ahead, so baselines are timed while the builds run."""

from __future__ import annotations

import threading
from concurrent.futures import Future

from evalkit.intake.triage import triage
from evalkit.records import Submission
from evalkit.schedule.engine import _Item, _ReadyQueue


def _item(problem: str, sample: str) -> _Item:
    return _Item(Submission("run", problem, sample, f"{sample}.py", "x"), triage("x"), Future())


def test_an_idle_judge_loads_problems_ahead_then_takes_answers_as_they_are_built():
    first, second, third = _item("p1", "a"), _item("p2", "b"), _item("p1", "c")
    ready = _ReadyQueue([first, second, third], prefetch=["p1", "p2"])
    assert ready.take(None) == "p1" and ready.take("p1") == "p2"  # nothing built yet: load ahead
    third.build.set_result(None)
    second.build.set_result(None)
    assert ready.take("p2") is second  # its own problem's answer first
    assert ready.take("p2") is third  # else the oldest built
    taken: list[object] = []
    waiter = threading.Thread(target=lambda: taken.append(ready.take("p1")))
    waiter.start()
    waiter.join(0.2)
    assert waiter.is_alive(), "took an answer whose build has not finished"
    first.build.set_result(None)
    waiter.join(5)
    assert taken == [first]
    assert ready.take(None) is None  # nothing left


def test_stopping_the_queue_releases_a_waiting_judge():
    ready = _ReadyQueue([_item("p1", "a")], prefetch=[])
    taken: list[object] = []
    waiter = threading.Thread(target=lambda: taken.append(ready.take(None)))
    waiter.start()
    ready.stop()
    waiter.join(5)
    assert taken == [None]
