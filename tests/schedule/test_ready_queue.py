"""The queue of built answers every batch shares: a judge takes its own problem's answers first, else the oldest
built; while nothing is built it times one baseline ahead at a time (every problem's first kind before any second
kind), so baselines are timed while the builds run, and only for problems whose answers may still be correct; a
cancelled batch's answers leave it."""

from __future__ import annotations

import threading
from concurrent.futures import Future

from evalkit.intake.triage import triage
from evalkit.judge.builder import BuildOutcome
from evalkit.records import Submission
from evalkit.schedule.dispatch import Batch, Item, ReadyQueue


def _item(problem: str, sample: str, batch: Batch | None = None) -> Item:
    return Item(Submission("run", problem, sample, f"{sample}.py", "x"), triage("x"), Future(), batch or Batch())


def _queue(items: list[Item], ahead: list[tuple[str, str]]) -> ReadyQueue:
    ready = ReadyQueue()
    for item in items:
        ready.add(item)
    for problem, kind in ahead:
        ready.ahead(problem, (kind,))
    return ready


def _still_waiting(ready: ReadyQueue, problem: str | None, station: str = "", gpu: str = "") -> bool:
    """Whether ``ready.take(problem, station, gpu)`` waits (it is then released by stopping the queue)."""
    taken: list[object] = []
    waiter = threading.Thread(target=lambda: taken.append(ready.take(problem, station, gpu)))
    waiter.start()
    waiter.join(0.2)
    waiting = waiter.is_alive()
    ready.stop()
    waiter.join(5)
    return waiting and taken == [None]


BUILT = BuildOutcome("ok", 1.0)


def _waits_for(ready: ReadyQueue, problem: str | None, build: Future, why: str) -> object:
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
    ready = _queue([first, second, third], ahead=[("p1", "eager"), ("p2", "eager")])
    assert ready.take(None) == ("p1", "eager") and ready.take("p1") == ("p2", "eager")  # nothing built yet
    third.build.set_result(BUILT)
    second.build.set_result(BUILT)
    assert ready.take("p2") is second  # its own problem's answer first
    assert ready.take("p2") is third  # else the oldest built
    assert _waits_for(ready, "p1", first.build, "took an answer whose build has not finished") is first
    assert _still_waiting(ready, None)  # nothing left: a judge waits for the next batch


def test_stopping_the_queue_releases_a_waiting_judge():
    ready = _queue([_item("p1", "a")], ahead=[])
    taken: list[object] = []
    waiter = threading.Thread(target=lambda: taken.append(ready.take(None)))
    waiter.start()
    ready.stop()
    waiter.join(5)
    assert taken == [None]


def test_no_baseline_is_timed_ahead_for_a_problem_with_no_answer_left_to_judge():
    broken, pending, built = _item("p1", "a"), _item("p2", "b"), _item("p3", "c")
    ready = _queue([broken, pending, built], ahead=[("p1", "eager"), ("p2", "eager"), ("p3", "eager")])
    broken.build.set_result(BuildOutcome("compile_error", 1.0))
    assert ready.take("p1") is broken  # built (and failed): judged first
    assert ready.take(None) == ("p2", "eager")  # p1's one answer cannot be correct: nothing timed for it
    built.build.set_result(BUILT)
    assert ready.take(None) is built
    why = "timed p3's baseline although its one answer is judged already"
    assert _waits_for(ready, None, pending.build, why) is pending


def test_every_problems_first_baseline_is_timed_ahead_before_any_second_kind():
    ready = _queue([_item("p1", "a"), _item("p2", "b")], ahead=[])
    ready.ahead("p1", ("eager", "compile"))
    ready.ahead("p2", ("eager", "compile"))
    assert [ready.take(None) for _ in range(4)] == [("p1", "eager"), ("p2", "eager"), ("p1", "compile"),
                                                    ("p2", "compile")]


def test_a_cancelled_batchs_answers_leave_the_queue_and_others_stay():
    mine, theirs = Batch(), Batch()
    dropped, kept = _item("p1", "a", mine), _item("p1", "b", theirs)
    ready = _queue([dropped, kept], ahead=[])
    mine.cancel()
    assert dropped.build.cancelled(), "a build not started is never run for a cancelled batch"
    kept.build.set_result(BUILT)
    assert ready.take(None) is kept
    assert _still_waiting(ready, None)
    mine.put(object())  # a row decided after the cancel (an answer a judge held) is dropped
    assert mine.rows.empty()



def _built(problem: str, sample: str) -> Item:
    item = _item(problem, sample)
    item.build.set_result(BUILT)
    return item


def test_a_judge_leaves_a_problem_another_judge_holds_and_takes_one_nobody_holds():
    """Judges of one GPU each keep the problems they judge in GPU memory (four judges each holding every shipped
    problem ran an H200 out of memory), so a second judge takes another problem's answer, not the oldest; and it
    leaves the holder's last answer to the holder."""
    first, second, other = _built("p1", "a"), _built("p1", "b"), _built("p2", "c")
    ready = _queue([first, second, other], ahead=[])
    assert ready.take(None, "judge-0", "0") is first
    assert ready.take(None, "judge-1", "0") is other  # p1 is judge-0's: judge-1 takes p2's, though p1's is older
    assert _still_waiting(ready, "p2", "judge-1", "0")  # one p1 answer left: judge-0's to take


def test_a_judge_goes_back_to_a_problem_it_keeps_before_loading_another():
    """An RL step's problems come again each step: a judge takes an answer of a problem it still holds loaded before
    an older one of a problem it would have to load (each load costs a judge 1-2 s on the H200)."""
    older, kept = _built("p1", "a"), _built("p2", "b")
    ready = _queue([older, kept], ahead=[])
    assert ready.take(None, "judge-0", "", kept=["p3", "p2"]) is kept
    assert ready.take(None, "judge-0", "", kept=["p3", "p2"]) is older


def test_judges_of_one_gpu_leave_each_other_the_problems_they_keep():
    """A judge of one GPU leaves a problem another judge keeps loaded (though it is not judging it now) to that judge,
    and takes one nobody keeps; it takes the other's kept problem only when nothing else is there."""
    judging = _built("p3", "a")
    ready = _queue([judging], ahead=[])
    assert ready.take(None, "judge-0", "0", kept=["p1"]) is judging  # judge-0 keeps p1 loaded, and judges p3
    theirs, nobodys = _built("p1", "b"), _built("p2", "c")
    ready.add(theirs)
    ready.add(nobodys)
    assert ready.take(None, "judge-1", "0") is nobodys  # p1 is judge-0's to go back to
    assert ready.take("p2", "judge-1", "0") is theirs  # nothing else waits: no judge idles


def test_judges_that_share_no_gpu_take_the_oldest_answer_whoever_holds_its_problem():
    """Only the judges of one GPU share its memory: a judge of another GPU, or a CPU judge, takes the oldest answer
    (two CPU judges given two hanging answers of one problem judge both at once)."""
    first, second = _built("p1", "a"), _built("p1", "b")
    ready = _queue([first, second], ahead=[])
    assert ready.take(None, "cpu:0") is first
    taken: list[object] = []
    other = threading.Thread(target=lambda: taken.append(ready.take(None, "cpu:1")))
    other.start()
    other.join(30)  # at once, unless it waits for the stop below
    if other.is_alive():
        ready.stop()
    assert taken[:1] == [second], "a judge sharing no GPU waited for another judge's problem"


def test_a_free_judge_shares_a_held_problem_when_two_of_its_answers_wait():
    """No judge idles while a held problem's answers queue: from two waiting, a free judge takes one."""
    items = [_built("p1", "a"), _built("p1", "b"), _built("p1", "c")]
    ready = _queue(items, ahead=[])
    assert ready.take(None, "judge-0", "0") is items[0]
    taken: list[object] = []
    free = threading.Thread(target=lambda: taken.append(ready.take(None, "judge-1", "0")))
    free.start()
    free.join(30)  # at once, unless it waits for the stop below
    if free.is_alive():
        ready.stop()
    assert taken[:1] == [items[1]], "a free judge waited while two answers of a held problem were queued"
    assert ready.take("p1", "judge-0", "0") is items[2]
