"""The engine's queue of built answers: a judge takes its own problem's answers first, else the oldest built;
while nothing is built it times one baseline ahead at a time, so baselines are timed while the builds run,
and only for problems whose answers may still be correct."""

from __future__ import annotations

import threading
from concurrent.futures import Future

from evalkit.intake.triage import triage
from evalkit.judge.builder import BuildOutcome
from evalkit.records import Submission
from evalkit.schedule.engine import _Item, _ReadyQueue


def _item(problem: str, sample: str) -> _Item:
    return _Item(Submission("run", problem, sample, f"{sample}.py", "x"), triage("x"), Future())


BUILT = BuildOutcome("ok", 1.0)


def _waits_for(ready: _ReadyQueue, problem: str | None, build: Future, why: str) -> object:
    """What ``ready.take(problem)`` returns once ``build`` finishes: it must still be waiting before that."""
    taken: list[object] = []
    waiter = threading.Thread(target=lambda: taken.append(ready.take(problem)))
    waiter.start()
    waiter.join(0.2)
    assert waiter.is_alive(), why
    build.set_result(BUILT)
    waiter.join(5)
    return taken[0]


def test_an_idle_judge_times_baselines_ahead_then_takes_answers_as_they_are_built():
    first, second, third = _item("p1", "a"), _item("p2", "b"), _item("p1", "c")
    ready = _ReadyQueue([first, second, third], prefetch=[("p1", "eager"), ("p2", "eager")])
    assert ready.take(None) == ("p1", "eager") and ready.take("p1") == ("p2", "eager")  # nothing built yet
    third.build.set_result(BUILT)
    second.build.set_result(BUILT)
    assert ready.take("p2") is second  # its own problem's answer first
    assert ready.take("p2") is third  # else the oldest built
    assert _waits_for(ready, "p1", first.build, "took an answer whose build has not finished") is first
    assert ready.take(None) is None  # nothing left


def test_stopping_the_queue_releases_a_waiting_judge():
    ready = _ReadyQueue([_item("p1", "a")], prefetch=[])
    taken: list[object] = []
    waiter = threading.Thread(target=lambda: taken.append(ready.take(None)))
    waiter.start()
    ready.stop()
    waiter.join(5)
    assert taken == [None]


def test_no_baseline_is_timed_ahead_for_a_problem_with_no_answer_left_to_judge():
    broken, pending, built = _item("p1", "a"), _item("p2", "b"), _item("p3", "c")
    ready = _ReadyQueue([broken, pending, built], prefetch=[("p1", "eager"), ("p2", "eager"), ("p3", "eager")])
    broken.build.set_result(BuildOutcome("compile_error", 1.0))
    assert ready.take("p1") is broken  # built (and failed): judged first
    assert ready.take(None) == ("p2", "eager")  # p1's one answer cannot be correct: nothing timed for it
    built.build.set_result(BUILT)
    assert ready.take(None) is built
    why = "timed p3's baseline although its one answer is judged already"
    assert _waits_for(ready, None, pending.build, why) is pending
