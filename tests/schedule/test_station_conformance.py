"""Every kind of judge station speaks the judge protocol (``evalkit/schedule/judge_messages.py``) alike: the judge
in the scheduler's own process (``judge_client.DirectStation``), a judge process (``judge_process.ProcessStation``)
and a Ray actor (``ray_backend.RayStation``, on a local Ray cluster of CPUs; ``slow``) pass the same tests.

Each refuses a Start of another protocol version, naming both versions; names a message of the wrong kind, either
way, with both types, and a message with a field of the wrong type with the message, the field and both types;
answers Prepare with the baselines (the report's coming with it, and those it timed going back to the scheduler's
``ReportFolder``) and JudgeAnswer with the answer's verdict; turns its own failure into a
``judge_failed`` row and goes on serving; ends a cancelled answer in hand at once, not at its time limit, and
judges the next; and leaves no process behind once closed."""

from __future__ import annotations

import importlib.util
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from evalkit.intake.triage import Triage, triage
from evalkit.judge.builder import BuildOutcome, build, nothing_to_build
from evalkit.records import Submission
from evalkit.report_folder import ReportFolder
from evalkit.results_file import BASELINES_FILE, LOCK_FILE
from evalkit.sandbox.processes import MARKER_VARIABLE, sandbox_members
from evalkit.schedule import judge_messages as m
from evalkit.schedule.judge_client import DirectStation, JudgeFailed, MessageStation
from evalkit.schedule.judge_process import ProcessStation
from evalkit.schedule.options import default_limits
from evalkit.schedule.placement import JudgeSlot
from shared_builds import ANSWERS, BUILD_LIMIT_S, LINEAR_RELU
from process_helpers import wait_for
from station_helpers import cpu_station_spec

needs_ray = pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="Ray is not installed")
KINDS = ["in_process", "process", pytest.param("ray", marks=[pytest.mark.slow, needs_ray])]
V = m.PROTOCOL_VERSION
HANG_LIMIT_S = 900.0  # a hanging answer's step limit, far above any judging's time (as in tests/test_api.py)


@pytest.fixture(scope="module")
def ray_cluster():
    """A local Ray cluster of CPUs, started only when a Ray station is tested."""
    ray = pytest.importorskip("ray")
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING")
    yield ray
    if started:
        ray.shutdown()


@pytest.fixture(params=KINDS)
def station(request: pytest.FixtureRequest, warm_cache: Path):
    """A station of one kind, judging the fixture problems on CPU with eager baselines; closed after the test."""
    spec = cpu_station_spec(warm_cache)
    closers = []
    if request.param == "in_process":
        made: MessageStation = DirectStation("cpu:0", spec)
    elif request.param == "process":
        made = ProcessStation(JudgeSlot("cpu:0", "cpu", None, ()), spec, freezer=None)
    else:
        request.getfixturevalue("ray_cluster")
        from evalkit.schedule.ray_backend import RayBackend

        backend = RayBackend("", owns_ray=False)
        made = backend.station(JudgeSlot("ray-cpu:0", "cpu", None, ()), spec, 1, None, lambda text: None)
        closers.append(backend.close)
    yield made
    made.close()
    for close in closers:
        close()


def _answer(cache: Path, name: str) -> tuple[Submission, Triage, BuildOutcome]:
    """The fixture answer ``name`` of linear_relu, triaged and built (a C++ answer's build is the session's)."""
    text = (ANSWERS / name).read_text()
    early = triage(text)
    if "load_inline" in early.code:
        from evalkit.sources.problems import load_problem

        outcome = build(early.code, cache / "builds", "cpu", BUILD_LIMIT_S, default_limits("cpu", None),
                        load_problem(LINEAR_RELU).init_inputs_or_none())
    else:
        outcome = nothing_to_build(early.code, cache / "builds", "cpu").result()
    return Submission("run", "linear_relu", name, name, text), early, outcome


def _judge_alive(station: MessageStation) -> bool:
    """Whether the station's judge (its server, process or actor) is up."""
    return station._running()


def test_a_start_of_another_protocol_version_is_refused_naming_both(station: MessageStation, monkeypatch):
    exchange = station._exchange
    # A scheduler of another evalkit: its Start says another version (the judge's end is this evalkit's).
    monkeypatch.setattr(station, "_exchange", lambda message: exchange(
        replace(message, version=V + 1) if isinstance(message, m.Start) else message))
    with pytest.raises(Exception, match=f"judge protocol {V} and refused a Start of judge protocol {V + 1}: "
                                        f"two versions of evalkit") as refused:
        station.prepare("linear_relu")
    assert not isinstance(refused.value, AttributeError)
    assert not _judge_alive(station), "a refused judge was kept"


def test_a_message_of_the_wrong_kind_is_named_with_both_types_either_way(station: MessageStation):
    problem, plan = station.spec.problems["linear_relu"], station.spec.plans["linear_relu"]
    # To the judge: a message it does not take there is answered Failed, naming both; the judge goes on.
    with pytest.raises(JudgeFailed, match="got Held, expected AddProblem or Prepare or JudgeAnswer or Exit"):
        station._request(m.Held(), m.Done)
    with pytest.raises(JudgeFailed, match="got tuple, expected"):
        station._request(("prepare", "linear_relu"), m.Done)  # the tuples of before
    # From the judge: a reply of another kind than the request's is named too, never read as the wrong one.
    with pytest.raises(m.WrongMessage, match="got Done, expected Judged or Failed"):
        station._request(m.AddProblem(problem, plan), m.Judged)
    assert station._request(m.AddProblem(problem, plan), m.Done) == m.Done(None)
    assert _judge_alive(station)


def test_a_message_with_a_field_of_the_wrong_type_is_named_either_way(station: MessageStation, monkeypatch):
    # To the judge: refused before the judge reads it, answered Failed naming the message, the field and both types.
    with pytest.raises(JudgeFailed, match=r"Prepare.kinds\[0\]: expected str, got int"):
        station._request(m.Prepare("linear_relu", (1,)), m.Done)  # type: ignore[arg-type]
    assert _judge_alive(station)
    # From the judge: a reply of the right kind with a field of the wrong type, never read as the row.
    exchange = station._exchange
    monkeypatch.setattr(station, "_exchange", lambda message: m.Judged({"verdict": "correct"}, None, {})  # type: ignore
                        if isinstance(message, m.Prepare) else exchange(message))
    with pytest.raises(m.WrongMessage, match=r"Judged.row: expected ResultRow \| None, got dict"):
        station._request(m.Prepare("linear_relu", None), m.Judged)


def test_prepare_gives_baselines_and_answers_get_their_verdicts(station: MessageStation, warm_cache: Path):
    baselines = station.prepare("linear_relu")
    assert "median_ms" in baselines["eager"] and station.current_problem == "linear_relu"
    correct = station.judge_answer(*_answer(warm_cache, "correct_cpp.py"))
    assert correct.verdict == "correct", correct.error
    assert correct.speedup_vs_eager is not None
    incorrect = station.judge_answer(*_answer(warm_cache, "incorrect.py"))
    assert incorrect.verdict == "incorrect", incorrect.error
    assert station.current_problem == "linear_relu" and station.kept_problems == ["linear_relu"]


def test_the_reports_baselines_go_through_the_scheduler_and_the_judge_writes_no_file_of_the_report(
        station: MessageStation, tmp_path: Path):
    # The run's ReportFolder records what the judge timed; the judge gets the report's entries with each Prepare.
    station.spec = replace(station.spec, baselines=replace(station.spec.baselines, in_report=True))
    with ReportFolder.open(tmp_path / "report") as folder:
        station.report = folder
        timed = station.prepare("linear_relu")
        assert [entry["problem"] for entry in folder.baselines_of("linear_relu").values()] == ["linear_relu"]
        station.close()  # a new judge, which has no baselines of its own and no shared cache (``cpu_station_spec``)
        again = station.prepare("linear_relu")
    assert again["eager"]["median_ms"] == timed["eager"]["median_ms"], "timed again: the report's entry never came"
    assert sorted(p.name for p in (tmp_path / "report").iterdir()) == sorted([BASELINES_FILE, LOCK_FILE])


def test_the_judge_judges_by_its_plan_and_stamps_the_rows_with_it(station: MessageStation, warm_cache: Path):
    # The plan travels to the judge (Start), not the run's options: a tolerance only the plan holds is the one judged by.
    plan = station.spec.plans["linear_relu"]
    planned = replace(plan, settings=replace(plan.settings, atol=0.125))
    station.spec = replace(station.spec, plans={**station.spec.plans, "linear_relu": planned})
    row = station.judge_answer(*_answer(warm_cache, "incorrect.py"))
    assert row.correctness["atol"] == 0.125, row.correctness
    assert (row.problem_sha256, row.precision) == (plan.problem_sha256, "fp32")
    assert row.problem_sha256 == station.spec.problems["linear_relu"].sha256


def test_a_problem_whose_files_changed_since_its_plan_is_not_judged(station: MessageStation, warm_cache: Path):
    plan = station.spec.plans["linear_relu"]
    station.spec = replace(station.spec, plans={**station.spec.plans,
                                                "linear_relu": replace(plan, problem_sha256="0" * 64)})
    row = station.judge_answer(*_answer(warm_cache, "incorrect.py"))
    assert row.verdict == "skipped" and "changed since the run started" in row.reason, row.reason
    assert row.correctness is None


def test_the_judges_own_failure_is_a_judge_failed_row_and_it_goes_on(station: MessageStation, warm_cache: Path):
    submission, early, outcome = _answer(warm_cache, "correct_cpp.py")
    # A problem the judge was never given: the judge itself fails (a KeyError), not the answer.
    row = station.judge_answer(replace(submission, problem="no_such_problem"), early, outcome)
    assert row.error and row.error["kind"] == "judge_failed", row
    assert "no_such_problem" in row.error["message"]
    assert station.judge_answer(submission, early, outcome).verdict == "correct"


def test_a_cancelled_answer_in_hand_ends_at_once_and_the_judge_goes_on(station: MessageStation, warm_cache: Path):
    # Every step's limit is HANG_LIMIT_S (set before the judge starts: it takes the spec it is started with).
    plans = {problem_id: replace(plan, settings=replace(plan.settings, run_timeout_s=HANG_LIMIT_S))
             for problem_id, plan in station.spec.plans.items()}
    station.spec = replace(station.spec, plans=plans)
    station.prepare("linear_relu")
    hang = _answer(warm_cache, "hang.py")
    came_back: list[object] = []

    def judge_the_hang() -> None:
        try:
            came_back.append(station.judge_answer(*hang))
        except JudgeFailed as failed:  # a kind may answer the cancelled answer so; its row is dropped either way
            came_back.append(failed)
    judging = threading.Thread(target=judge_the_hang)
    judging.start()
    wait_for(lambda: hang[0].key in station._judging, HANG_LIMIT_S / 4, "the station to send the hanging answer")
    time.sleep(1.0)  # its worker runs the hang by now (a cancel that came before it would be kept for it all the same)
    cancelled = time.monotonic()
    station.cancel(hang[0].key)  # from another thread than the one the station judges in, as the engine does
    judging.join(HANG_LIMIT_S)
    waited_s = time.monotonic() - cancelled
    assert not judging.is_alive() and came_back, "the cancelled answer never came back"
    assert waited_s < HANG_LIMIT_S / 2, f"the cancelled answer came back {waited_s:.0f} s later: it ran to its limit"
    if not isinstance(came_back[0], JudgeFailed):
        assert came_back[0].verdict != "correct", came_back[0]  # a crash: its workers were killed
    assert station.judge_answer(*_answer(warm_cache, "incorrect.py")).verdict == "incorrect"


def test_closing_leaves_no_process(station: MessageStation, warm_cache: Path):
    station.prepare("linear_relu")
    assert station.judge_answer(*_answer(warm_cache, "incorrect.py")).verdict == "incorrect"
    # Each kind's judge, held here so that closing, not dropping it, is what must end it and its workers.
    judge = getattr(station, "_server", None) or getattr(station, "_proc", None) or getattr(station, "_actor", None)
    assert judge is not None
    proc, actor = getattr(station, "_proc", None), getattr(station, "_actor", None)
    station.close()
    assert not _judge_alive(station)
    marker = f"{MARKER_VARIABLE}={station.spec.limits.group}."
    wait_for(lambda: not sandbox_members(-1, marker), 15, "the judge's sandbox workers to end with it")
    if proc is not None:
        assert proc.poll() is not None, "the judge process outlived its close"
    if actor is not None:
        import ray

        with pytest.raises(ray.exceptions.RayActorError):
            ray.get(actor.handle.remote(m.Exit()), timeout=60)
