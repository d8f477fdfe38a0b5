"""A judge that overlaps answers (``evalkit/schedule/overlap.py``): one answer's tail (its checks, profile and close,
after its timing) runs beside the next answer's front, never beside a timing; its row comes apart from the reply
(``Decided``); a tail that would change what the other lane uses gives its answer back to be judged alone; a judge
that dies owes no row to anyone still waiting. Every wait here is on an event, never on a clock."""

from __future__ import annotations

import threading
from dataclasses import replace
from types import SimpleNamespace
from pathlib import Path

import pytest

from evalkit.schedule import judge_messages as m
from evalkit.schedule.judge_client import DirectStation, JudgeFailed, MessageStation
from evalkit.schedule.judge_process import ProcessStation
from evalkit.schedule.overlap import JudgeAgainAlone, Lanes
from evalkit.schedule.placement import JudgeSlot
from station_helpers import cpu_station_spec
from test_station_conformance import _answer

WAIT_S = 60.0  # how long a test waits for an event that must come (a failure, not a measure, if it does not)


def _lanes() -> tuple[Lanes[str], dict[str, object], threading.Event]:
    delivered: dict[str, object] = {}
    arrived = threading.Event()

    def deliver(key: str, row: object) -> None:
        delivered[key] = row
        arrived.set()
    return Lanes("main", ["lane-a", "lane-b"]), delivered, arrived  # type: ignore[return-value]


def test_a_row_decided_before_its_timing_is_over_comes_back_at_once():
    lanes, delivered, _ = _lanes()
    assert lanes.run("k", "p", "b", lambda: "row of k", delivered.__setitem__) == "row of k"
    assert delivered == {} and lanes.tail_problems() == set()


def test_a_tail_runs_beside_the_next_front_and_a_timing_waits_for_it():
    lanes, delivered, arrived = _lanes()
    tail_may_end, gates = threading.Event(), {}

    def first() -> str:
        gates["first"] = lanes.gate
        lanes.timing_over()
        assert lanes.in_tail()
        assert tail_may_end.wait(WAIT_S)
        return "row of first"

    def deliver(key: str, row: object) -> None:
        delivered[key] = row
        arrived.set()

    assert lanes.run("first", "p", "build-1", first, deliver) is None, "its row comes apart, once its tail ends"
    assert lanes.tail_problems() == {"p"}

    timed = threading.Event()

    def second() -> str:
        gates["second"] = lanes.gate
        assert not lanes.in_tail()
        lanes.wait_for_tails()  # as its timing does
        timed.set()
        return "row of second"

    caller = threading.Thread(target=lambda: delivered.setdefault("second", lanes.run("second", "q", "build-2", second,
                                                                                         deliver)))
    caller.start()
    assert not timed.wait(0.5), "the second answer's timing went beside the first one's tail"
    assert "first" not in delivered
    tail_may_end.set()
    assert arrived.wait(WAIT_S) and delivered["first"] == "row of first"
    caller.join(WAIT_S)
    assert timed.is_set() and delivered["second"] == "row of second"
    assert gates["first"] != gates["second"] and "main" not in gates.values(), "a gate serves one thread"
    assert lanes.gate == "main" and lanes.tail_problems() == set()


def test_a_tail_may_not_time_and_gives_its_answer_back_when_it_would_unload_what_the_next_uses():
    lanes, delivered, arrived = _lanes()
    refused: list[BaseException] = []

    def timing_in_tail() -> str:
        lanes.timing_over()
        try:
            lanes.wait_for_tails()
        except RuntimeError as err:
            refused.append(err)
        raise JudgeAgainAlone("the GPU ran out of memory")

    def deliver(key: str, row: object) -> None:
        delivered[key] = row
        arrived.set()

    assert lanes.run("k", "p", "b", timing_in_tail, deliver) is None
    assert arrived.wait(WAIT_S) and delivered == {"k": None}, "given back: judged again alone"
    assert refused and "a tail may not time" in str(refused[0])


def test_what_a_front_raises_is_raised_in_its_caller_and_its_lane_is_freed():
    lanes, delivered, _ = _lanes()

    def broken() -> str:
        raise ValueError("the judge's own failure")

    for _ in range(3):  # two lanes: a lane not freed would leave none the third time
        with pytest.raises(ValueError, match="the judge's own failure"):
            lanes.run("k", "p", "b", broken, delivered.__setitem__)
    assert delivered == {}


def test_a_row_awaited_from_a_judge_that_is_lost_raises_instead_of_waiting_forever(tmp_path: Path):
    station = MessageStation("cpu:0", cpu_station_spec(tmp_path))
    done: list[object] = []
    waiter = threading.Thread(target=lambda: done.append(_awaited(station, "k", 0)))
    waiter.start()
    station._lose_decided(JudgeFailed("judge cpu:0: its process died"))
    waiter.join(WAIT_S)
    assert done and isinstance(done[0], JudgeFailed) and "died" in str(done[0])
    station._file_decided(m.Decided("later", None))  # the next judge's rows are filed again
    assert station._await_decided("later", 1) is None


def _awaited(station: MessageStation, key: str, judge: int) -> object:
    try:
        return station._await_decided(key, judge)
    except JudgeFailed as err:
        return err


@pytest.mark.parametrize("kind", ["in_process", "process"])
def test_a_judge_that_overlaps_answers_gives_each_its_verdict_its_passing_rows_apart(warm_cache: Path, kind: str,
                                                                                      monkeypatch):
    spec = cpu_station_spec(warm_cache)
    spec = type(spec)(**{**spec.__dict__, "overlap": True})
    station: MessageStation = DirectStation("cpu:0", spec) if kind == "in_process" else \
        ProcessStation(JudgeSlot("cpu:0", "cpu", None, ()), spec, freezer=None)
    filed: list[str] = []
    file_decided = station._file_decided
    monkeypatch.setattr(station, "_file_decided", lambda decided: (filed.append(decided.key), file_decided(decided)))
    try:
        assert station.lanes == 2
        station.prepare("linear_relu")  # its baselines known: its passing answers' tails may overlap
        verdicts = {}
        for sample, name in (("first", "correct_python.md"), ("wrong", "incorrect.py"), ("second", "correct_python.md")):
            submission, early, outcome = _answer(warm_cache, name)
            verdicts[sample] = station.judge_answer(replace(submission, sample=sample), early, outcome).verdict
    finally:
        station.close()
    assert verdicts == {"first": "correct", "wrong": "incorrect", "second": "correct"}
    assert [key.split("/")[2].split("@")[0] for key in filed] == ["first", "second"], \
        "each passing answer's row came apart from its reply; the failing one's with it"


def test_an_answer_of_the_build_a_tail_runs_waits_for_that_tail_before_its_front():
    """A judged worker holds its build's cache entry for its life: the next answer of the same build, started beside
    the tail, would keep the tail's profile worker waiting while its own timing waited for the tail (a deadlock seen
    on the H200 when an RL group sent one text twice)."""
    lanes, delivered, arrived = _lanes()
    tail_may_end, front_began = threading.Event(), threading.Event()

    def first() -> str:
        lanes.timing_over()
        assert tail_may_end.wait(WAIT_S)
        return "row of first"

    def deliver(key: str, row: object) -> None:
        delivered[key] = row
        arrived.set()

    assert lanes.run("first", "p", "same build", first, deliver) is None
    caller = threading.Thread(target=lambda: delivered.setdefault(
        "second", lanes.run("second", "p", "same build", lambda: front_began.set() or "row of second", deliver)))
    caller.start()
    assert not front_began.wait(0.5), "the second answer's front began beside a tail of its build"
    tail_may_end.set()
    caller.join(WAIT_S)
    assert front_began.is_set() and delivered == {"first": "row of first", "second": "row of second"}


@pytest.mark.slow
def test_an_evaluator_whose_judge_overlaps_answers_gives_the_verdicts_of_one_that_does_not(warm_cache: Path,
                                                                                              monkeypatch):
    """The engine sends an overlapping judge answers from two threads (``Engine._serve``'s lanes) through one station;
    the first tries on the H200 raced two Starts of the judge, then waited forever on a build's cache entry. On a CPU,
    with the overlap forced on, a batch gets the same verdicts with it as without."""
    from evalkit import Evaluator
    from evalkit.schedule import backend
    from test_api import ANSWERS, PROBLEMS, SETTINGS

    names = ["correct_python", "incorrect", "correct_cpp", "runtime_error", "correct_python", "crash"]
    answers = [("linear_relu", next(ANSWERS.glob(f"{name}.*")).read_text(), f"{k}-{name}")
               for k, name in enumerate(names)]
    verdicts = {}
    for overlap in (False, True):
        monkeypatch.setattr(backend, "overlaps_answers", lambda slot: overlap)
        with Evaluator(problems=PROBLEMS, cache_dir=warm_cache, overlap=overlap, **SETTINGS) as ev:
            ev.prepare_baselines(["linear_relu"])
            verdicts[overlap] = {row["sample"]: row["verdict"] for row in ev.judge_many(answers)}
            lanes = [thread.name for thread in threading.enumerate() if thread.name.startswith("evalkit-judge-")]
        assert len(lanes) == (2 if overlap else 1), lanes
    assert verdicts[True] == verdicts[False]
    assert [verdicts[True][sample] for _, _, sample in answers] == \
        ["correct", "incorrect", "correct", "runtime_error", "correct", "crash"]


def test_the_overlap_setting_has_one_name_from_the_command_line_to_the_judge(tmp_path: Path):
    """``--overlap`` (off by default) on both commands, ``overlap=`` in the API, ``StationSpec.overlap`` for the
    judge: on only for a GPU's one judge, never for a CPU judge or one of several on a GPU."""
    from evalkit.cli.score import score_command
    from evalkit.cli.serve import serve_command
    from evalkit.schedule.backend import LocalBackend
    from evalkit.schedule.options import judge_options

    for command, args in ((score_command, ["submissions"]), (serve_command, [])):
        assert command.make_context(command.name, [*args, "--overlap"]).params["overlap"] is True
        assert command.make_context(command.name, list(args)).params["overlap"] is False
    assert judge_options("cpu", {"overlap": True}).overlap and not judge_options("cpu", {}).overlap
    spec = cpu_station_spec(tmp_path)
    backend = LocalBackend(1)
    try:
        def overlaps(slot: JudgeSlot, asked: bool = True) -> bool:
            made = backend.station(slot, replace(spec, overlap=asked), 1,
                                   SimpleNamespace(timing=lambda **_: None), lambda text: None)  # type: ignore[arg-type]
            return made.spec.overlap and made.lanes == 2
        assert overlaps(JudgeSlot("cuda:0", "cuda", 0, (0, 1)))
        assert not overlaps(JudgeSlot("cuda:0", "cuda", 0, (0, 1)), asked=False)
        assert not overlaps(JudgeSlot("cuda:0", "cuda", 0, (0, 1), gpu_judges=2))
        assert not overlaps(JudgeSlot("cpu:0", "cpu", None, ()))
    finally:
        backend.close()
