"""Several judges at once: ``--judges N`` CPU judges (each a judge process of its own) give the verdicts one
judge gives, share the work, and a judge process that dies costs one answer's row, not the run."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import signal
import subprocess
from functools import partial
from pathlib import Path
from unittest.mock import patch

import pytest
from click.testing import CliRunner

from conftest import FIXTURES
from evalkit.cli.main import main
from evalkit.sandbox.cgroup import remove_run_cgroups
from evalkit.schedule.judge_messages import BaselineFiles, StationSpec
from evalkit.schedule.judge_process import STACKS_SIGNAL, JudgeProcessDied, ProcessStation
from evalkit.schedule.options import JudgeOptions, default_limits
from evalkit.schedule.placement import JudgeSlot
from evalkit.sources.problems import discover_problems
from process_helpers import wait_for
from station_helpers import cpu_station_spec, prepare_in_background

PROBLEMS = FIXTURES / "judge_problems"
CHOSEN = {("linear_relu", "correct_cpp"): "correct", ("linear_relu", "correct_python"): "correct",
          ("linear_relu", "incorrect"): "incorrect", ("linear_relu", "runtime_error"): "runtime_error",
          ("linear_relu", "crash"): "crash", ("scale_rows", "correct"): "correct",
          ("linear_relu", "no_code"): "no_code"}


def _answers(tmp_path: Path) -> Path:
    root = tmp_path / "answers"
    for problem, sample in CHOSEN:
        source = next((FIXTURES / "judge_submissions" / "fixtures" / problem).glob(f"{sample}.*"))
        (root / "run" / problem).mkdir(parents=True, exist_ok=True)
        shutil.copy(source, root / "run" / problem / source.name)
    return root


@pytest.mark.slow  # a whole run with two judge processes
def test_two_cpu_judges_give_one_judges_verdicts_and_share_the_work(tmp_path: Path, warm_cache: Path):
    out = tmp_path / "report"
    args = ["score", str(_answers(tmp_path)), "--problems", str(PROBLEMS), "--out", str(out), "--device", "cpu",
            "--judges", "2", "--baselines", "eager", "--timing-trials", "5", "--warmup", "1",
            "--cache-dir", str(warm_cache), "--seed", "1"]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert {(r["problem"], r["sample"]): r["verdict"] for r in rows} == CHOSEN
    judged = [r for r in rows if r["verdict"] != "no_code"]
    assert {r["judge"] for r in judged} == {"cpu:0", "cpu:1"}, "one judge did all the work"
    assert next(r for r in rows if r["verdict"] == "no_code")["judge"] is None  # decided by triage, no judge
    baselines = json.loads((out / "baselines.json").read_text())
    assert sorted(entry["problem"] for entry in baselines.values()) == ["linear_relu", "scale_rows"], \
        "a problem's baselines were timed by more than one judge"


def test_a_judge_process_that_dies_fails_its_request_and_is_started_again(tmp_path: Path):
    spec = cpu_station_spec(tmp_path)
    station = ProcessStation(JudgeSlot("cpu:0", "cpu", None, ()), spec, freezer=None)
    thread, failure = prepare_in_background(station, "linear_relu")
    wait_for(lambda: station._proc is not None, 30, "the judge process to start")
    os.kill(station._proc.pid, signal.SIGKILL)
    thread.join(60)
    try:
        assert failure and isinstance(failure[0], JudgeProcessDied), failure
        assert "cpu:0" in str(failure[0])
        baselines = station.prepare("linear_relu")  # a new judge process answers
        assert "median_ms" in baselines["eager"]
        assert station.current_problem == "linear_relu"
    finally:
        station.close()
        remove_run_cgroups(spec.limits.group)  # what the killed judge could not remove
    assert station._proc is None


@pytest.mark.cuda
def test_a_judge_process_on_the_gpu_times_what_the_schedulers_own_judge_times(tmp_path: Path):
    """The several-GPU path on one GPU: a judge process (CUDA_VISIBLE_DEVICES, the freeze handshake) and the
    in-process judge each time the eager baseline within 3% of what its worker's own CUDA events read, and
    within 12% of each other. Not closer: each timing is a fresh worker, whose kernels ran 6-8% apart from
    another's in every GPU record since issue 11 (docs/gpu-runs/2026-11-27-trusted-residual-h200/), whichever
    judge held it; the worker's own events move with it, so the first bound is what tells a path's clock."""
    from evalkit.sandbox.freezer import BuildFreezer
    from evalkit.schedule.device_judge import DeviceJudge

    problems = discover_problems(FIXTURES / "timing_problems")
    options = JudgeOptions(device="cuda", baselines=("eager",), overrides={"timing_trials": 30}, cache_dir=tmp_path)
    limits = default_limits("cuda", None)
    spec = StationSpec(problems, options.plans(problems), options.baselines, options.cache_dir, "cuda", 1, limits,
                       BaselineFiles(None, None), None)
    freezer = BuildFreezer(limits.group)
    in_process = DeviceJudge(spec, quiet=freezer.timing)
    station = ProcessStation(JudgeSlot("cuda:0", "cuda", 0, ()), spec, freezer)
    try:
        medians, claims = [], []
        for judge in (station, in_process, station):  # no baseline cache: each judge times them anew
            eager = judge.prepare("mid_matmul")["eager"]
            assert "median_ms" in eager, eager
            medians.append(eager["median_ms"])
            claims.append(eager["claimed_median_ms"])
            judge.close()  # a judge process closed is started again by its next request
    finally:
        station.close()
        freezer.close()
    assert all(abs(median / claim - 1) < 0.03 for median, claim in zip(medians, claims)), (medians, claims)
    assert max(medians) / min(medians) - 1 < 0.12, medians


def test_a_message_of_the_wrong_kind_is_named_never_read_by_position():
    from evalkit.schedule import judge_messages as m

    assert m.expect(m.Progress("x"), *m.TO_SCHEDULER) == m.Progress("x")
    with pytest.raises(m.WrongMessage, match="got Hold, expected Held"):
        m.expect(m.Hold(), m.Held)
    with pytest.raises(m.WrongMessage, match="got tuple"):
        m.expect(("done", 1), *m.TO_SCHEDULER)  # the tuples of before
    assert not set(m.TO_JUDGE) & set(m.TO_SCHEDULER)


def test_closing_a_judge_process_that_is_already_gone_is_quiet(tmp_path: Path):
    # A signal that stops the run reaches the judge processes too: closing one that died raised AttributeError.
    spec = cpu_station_spec(tmp_path)
    station = ProcessStation(JudgeSlot("cpu:0", "cpu", None, ()), spec, freezer=None)
    station._ensure_started()
    station._proc.kill()
    station._proc.wait()
    station.close()
    remove_run_cgroups(spec.limits.group)  # what the killed judge could not remove
    assert station._proc is None


def test_a_cancel_travels_as_json_of_this_version_and_nothing_else_is_read_as_one():
    from evalkit.schedule import judge_messages as m

    # The cancel file is the one message read from a file: a pickle there would run whoever wrote it in the judge.
    assert m.Cancel.from_text(m.Cancel("run/p/s@abc").to_text()) == m.Cancel("run/p/s@abc")
    for bad in (pickle.dumps(m.Cancel("run/p/s@abc")).decode("latin-1"), '{"cancel": 3, "version": %d}'
                % m.PROTOCOL_VERSION, '{"cancel": "k", "version": %d}' % (m.PROTOCOL_VERSION - 1), "[]"):
        with pytest.raises(m.WrongMessage):
            m.Cancel.from_text(bad)


def _one_of_each_message(cache: Path) -> list[object]:
    """A message of every kind the judge protocol declares, each field of its declared type."""
    from dataclasses import replace

    from evalkit.intake.triage import triage
    from evalkit.judge.builder import nothing_to_build
    from evalkit.records import ResultRow, Submission
    from evalkit.schedule import judge_messages as m

    spec = cpu_station_spec(cache)
    problem, plan = spec.problems["linear_relu"], spec.plans["linear_relu"]
    text = (FIXTURES / "judge_submissions" / "fixtures" / "linear_relu" / "incorrect.py").read_text()
    early = triage(text)
    row = ResultRow("run", "linear_relu", "s", "s.py", "0" * 64, "correct", "", timing={"median_ms": 1.0},
                    speedup_vs_eager_ci=[1, 2.5])  # an int where a float is declared is a float
    built = nothing_to_build(early.code, cache / "builds", "cpu").result()
    return [m.Start(spec), m.Start(replace(spec, driver="550.1")), m.AddProblem(problem, plan),
            m.Prepare("linear_relu", None), m.Prepare("linear_relu", ("eager",), {"k": {"median_ms": 1.0}}),
            m.JudgeAnswer(Submission("run", "linear_relu", "s", "s.py", text), early, built),
            m.Exit(), m.Held(), m.Released(), m.Cancel("run/p/s@abc"), m.Started(), m.Hold(), m.Release(),
            m.Progress("x"), m.Failed("why"), m.Done(None), m.Done({"eager": {"median_ms": 1.0}}),
            m.Judged(None, "linear_relu", {}), m.Judged(row, "linear_relu", {}), m.Judged(row, None, {"eager": {}}),
            m.Decided("run/p/s@abc", row), m.Decided("run/p/s@abc", None),
            m.JudgeAnswer(Submission("run", "linear_relu", "s", "s.py", text), early, built, alone=True),
            m.Refused(4, 5),
            _build_request(cache), replace(_build_request(cache), init_inputs=None, timeout_s=60), built,
            m.Probe(str(cache / "marker")), m.Sweep("group"), m.ActorStart({"p": {"reference.py": b"x"}}, "8.0"),
            m.NodeFacts({"torch": "2.13"}, True, "node"), m.Done(3)]


def _build_request(cache: Path, code: str = "import torch\n") -> object:
    """A Build of ``code`` for linear_relu on CPU, as ``RayBackend.start_build`` sends it."""
    from evalkit.schedule import judge_messages as m
    from evalkit.sources.problems import load_problem

    return m.Build(code, cache / "builds", "cpu", 900.0, default_limits("cpu", None),
                   load_problem(PROBLEMS / "linear_relu").init_inputs_or_none(), "")


def test_every_declared_message_round_trips_with_its_fields_checked(tmp_path: Path):
    from evalkit.schedule import judge_messages as m

    messages = _one_of_each_message(tmp_path)
    assert {type(message) for message in messages} == {*m.TO_JUDGE, *m.TO_SCHEDULER, *m.TO_NODE,
                                                        *m.FROM_NODE, *m.DECIDED}, "a message kind untested"
    for message in messages:
        arrived = pickle.loads(pickle.dumps(message))  # as a judge process or a Ray actor carries it
        assert m.expect(arrived, type(message)) == message


def _wrong_fields(cache: Path) -> list[tuple[object, str]]:
    from dataclasses import replace

    from evalkit.schedule import judge_messages as m

    messages = {type(message): message for message in _one_of_each_message(cache)}
    spec, problem, plan = messages[m.Start].spec, messages[m.AddProblem].problem, messages[m.AddProblem].plan
    answer, judged = messages[m.JudgeAnswer], messages[m.Judged]
    return [
        (m.Cancel(3), "Cancel.key: expected str, got int"),  # type: ignore[arg-type]
        (m.Prepare(7, None), "Prepare.problem_id: expected str, got int"),  # type: ignore[arg-type]
        (m.Prepare("p", ["eager"]), "Prepare.kinds: expected tuple[str, ...] | None, got list"),  # type: ignore
        (m.Prepare("p", ("eager", 1)), "Prepare.kinds[1]: expected str, got int"),  # type: ignore[arg-type]
        (m.Prepare("p", None, {1: {}}), "Prepare.report_entries key 1: expected str, got int"),  # type: ignore
        (m.Start(replace(spec, problems={"p": "linear_relu"})),
         "Start.spec.problems['p']: expected Problem, got str"),
        (m.Start(replace(spec, seed="1")), "Start.spec.seed: expected int, got str"),
        (m.AddProblem(replace(problem, settings=replace(problem.settings, timing_trials=5.0)), plan),
         "AddProblem.problem.settings.timing_trials: expected int, got float"),
        (m.AddProblem(problem, replace(plan, settings=replace(plan.settings, atol="0.1"))),
         "AddProblem.plan.settings.atol: expected float | None, got str"),
        (m.Start(replace(spec, plans={"linear_relu": plan.to_dict()})),
         "Start.spec.plans['linear_relu']: expected JudgingPlan, got dict"),
        (replace(answer, outcome=replace(answer.outcome, cached=1)),
         "JudgeAnswer.outcome.cached: expected bool, got int"),
        (replace(answer, submission=("run", "p", "s", "s.py", "")), "JudgeAnswer.submission: expected Submission"),
        (m.Judged({"verdict": "correct"}, None, {}), "Judged.row: expected ResultRow | None, got dict"),  # type: ignore
        (replace(judged, row=replace(judged.row, speedup_vs_eager=True)),
         "Judged.row.speedup_vs_eager: expected float | None, got bool"),
        (m.Refused("4", 5), "Refused.version: expected int, got str"),  # type: ignore[arg-type]
        (m.Decided("k", {"verdict": "correct"}), "Decided.row: expected ResultRow | None, got dict"),  # type: ignore
        (m.Progress(b"x"), "Progress.text: expected str, got bytes"),  # type: ignore[arg-type]
        (replace(messages[m.Build], timeout_s="900"), "Build.timeout_s: expected float, got str"),
        (replace(messages[m.Build], cache_root=str(cache)), "Build.cache_root: expected Path, got str"),
        (replace(messages[m.Build], init_inputs=(3,)), "Build.init_inputs: expected list[Any] | None, got tuple"),
        (replace(messages[m.Build], limits=replace(messages[m.Build].limits, memory_bytes=2.0**30)),
         "Build.limits.memory_bytes: expected int, got float"),
        (m.Probe(Path("marker")), "Probe.marker: expected str, got PosixPath"),  # type: ignore[arg-type]
        (m.Sweep(None), "Sweep.group: expected str, got NoneType"),  # type: ignore[arg-type]
        (m.ActorStart({"p": {"reference.py": "text"}}, ""),  # type: ignore[dict-item]
         "ActorStart.files['p']['reference.py']: expected bytes, got str"),
        (m.NodeFacts({}, 1, "node"), "NodeFacts.sees_marker: expected bool, got int"),  # type: ignore[arg-type]
        (m.Done("baselines"), "Done.value: expected dict[str, Any] | int | None, got str"),  # type: ignore[arg-type]
    ]


def test_a_field_of_the_wrong_type_is_refused_naming_the_message_the_field_and_both_types(tmp_path: Path):
    import re

    from evalkit.schedule import judge_messages as m

    for message, why in _wrong_fields(tmp_path):
        with pytest.raises(m.WrongMessage, match=re.escape(f"judge protocol {m.PROTOCOL_VERSION}: {why}")):
            m.expect(pickle.loads(pickle.dumps(message)), *m.TO_JUDGE, *m.TO_SCHEDULER, *m.TO_NODE, *m.FROM_NODE,
                     *m.DECIDED)
    with pytest.raises(m.WrongMessage, match="Cancel.key: expected str, got int"):
        m.Cancel.from_text('{"cancel": 3, "version": %d}' % m.PROTOCOL_VERSION)


# ---- a Ray build task's messages: ``ray_judge.build_task`` called here directly, as a Ray worker calls it ----

def _outcome_of(reply: object) -> object:
    """What the driver makes of a build task's ``reply``: the engine's future's result, or what it raises."""
    from concurrent.futures import Future

    from evalkit.schedule.ray_backend import build_outcome

    arrived: Future = Future()
    outcome = build_outcome(arrived)
    arrived.set_result(reply)
    return outcome.result(timeout=0)


def test_a_build_task_refuses_a_build_of_another_version_naming_both(tmp_path: Path):
    from dataclasses import replace

    from evalkit.schedule import judge_messages as m
    from evalkit.schedule.options import ScoreError
    from evalkit.schedule.ray_judge import build_task

    v = m.PROTOCOL_VERSION
    # Another evalkit's Build: refused before any field is read (they may be another version's).
    refused = build_task(replace(_build_request(tmp_path), version=v + 1, timeout_s="its own"))
    assert refused == m.Refused(v, v + 1)
    with pytest.raises(ScoreError, match=f"speaks judge protocol {v} and refused a Build of judge protocol {v + 1}: "
                                         f"two versions of evalkit"):
        _outcome_of(refused)


def test_a_build_task_names_a_message_of_the_wrong_kind_either_way(tmp_path: Path):
    from evalkit.judge.builder import BuildOutcome
    from evalkit.schedule import judge_messages as m
    from evalkit.schedule.ray_backend import BuildTaskFailed
    from evalkit.schedule.ray_judge import build_task

    # To the task: anything but a Build (the positional arguments of before, another message) is answered Failed.
    for wrong, kind in (((("import torch\n", tmp_path, "cpu"),), "tuple"), ((m.Cancel("k"),), "Cancel")):
        failed = build_task(*wrong)
        assert isinstance(failed, m.Failed) and f"got {kind}, expected Build" in failed.message, failed
        with pytest.raises(BuildTaskFailed, match=f"a Ray build task failed: WrongMessage: .*got {kind}"):
            _outcome_of(failed)
    # From the task: a reply of another kind is named too, never read as an outcome.
    with pytest.raises(m.WrongMessage, match="got Done, expected BuildOutcome or Refused or Failed"):
        _outcome_of(m.Done(None))
    ok = BuildOutcome("ok", 1.0)
    assert _outcome_of(ok) is ok


def test_a_build_task_names_a_field_of_the_wrong_type_either_way(tmp_path: Path):
    from dataclasses import replace

    from evalkit.judge.builder import BuildOutcome
    from evalkit.schedule import judge_messages as m
    from evalkit.schedule.ray_judge import build_task

    failed = build_task(replace(_build_request(tmp_path), timeout_s="900"))
    assert failed == m.Failed(f"WrongMessage: judge protocol {m.PROTOCOL_VERSION}: Build.timeout_s: expected "
                              f"float, got str: a bug in the sender (evalkit), or two versions of evalkit")
    with pytest.raises(m.WrongMessage, match="BuildOutcome.seconds: expected float, got str"):
        _outcome_of(BuildOutcome("ok", "1.0"))  # type: ignore[arg-type]


def test_the_probe_and_sweep_tasks_answer_their_message_and_refuse_any_other(tmp_path: Path):
    from dataclasses import replace

    from evalkit.schedule import judge_messages as m
    from evalkit.schedule.options import ScoreError
    from evalkit.schedule.ray_backend import probed, task_answer
    from evalkit.schedule.ray_judge import kill_sandboxes, node_facts

    v, marker = m.PROTOCOL_VERSION, tmp_path / "marker"
    marker.write_text("shared?\n")
    facts, seen, node = probed(node_facts(m.Probe(str(marker))))
    assert seen and node and facts["evalkit_version"] and "sandbox_user" in facts
    assert probed(node_facts(m.Probe(str(tmp_path / "elsewhere"))))[1] is False
    assert task_answer(kill_sandboxes(m.Sweep("evalkit-no-such-run")), m.Sweep) == m.Done(0)
    for task, request in ((node_facts, m.Probe(str(marker))), (kill_sandboxes, m.Sweep("g"))):
        kind = type(request).__name__
        assert task(replace(request, version=v + 1)) == m.Refused(v, v + 1)  # its fields unread
        with pytest.raises(ScoreError, match=f"speaks judge protocol {v} and refused a {kind} of judge protocol "
                                             f"{v + 1}: two versions of evalkit"):
            task_answer(m.Refused(v, v + 1), type(request))
        for wrong, named in ((str(marker), "str"), (m.Cancel("k"), "Cancel")):  # the positional argument of before
            failed = task(wrong)
            assert isinstance(failed, m.Failed) and f"got {named}, expected {kind}" in failed.message, failed
    with pytest.raises(ScoreError, match="the Ray probe task failed on its node: WrongMessage"):
        probed(node_facts("a marker"))
    with pytest.raises(m.WrongMessage, match="got Done, expected NodeFacts or Refused or Failed"):
        probed(m.Done(None))


def test_a_judge_actor_is_created_with_an_actor_start_alone():
    from evalkit.schedule import judge_messages as m
    from evalkit.schedule.ray_judge import JudgeActor

    actor = JudgeActor(m.ActorStart({"p": {"reference.py": b"x"}}, "9.0"))
    assert (actor.files, actor.arch) == ({"p": {"reference.py": b"x"}}, "9.0")
    shutil.rmtree(actor.workdir)
    with pytest.raises(m.WrongMessage, match="got tuple, expected ActorStart"):
        JudgeActor(({}, "9.0"))  # the positional arguments of before


def test_a_build_task_builds_the_build_it_is_sent(warm_cache: Path):
    from shared_builds import ANSWERS

    from evalkit.intake.triage import triage
    from evalkit.schedule.ray_judge import build_task

    # The session's build of correct_cpp, found in the cache: the task answers its outcome as a local build does.
    outcome = _outcome_of(build_task(_build_request(warm_cache, triage((ANSWERS / "correct_cpp.py").read_text()).code)))
    assert outcome.status == "ok" and outcome.cached, outcome


def test_a_judge_process_writes_its_stacks_at_the_stacks_signal_and_goes_on_judging(tmp_path: Path):
    # A run that seems stuck is read without stopping it: the stacks go to the judge's stderr (the run's log).
    station = ProcessStation(JudgeSlot("cpu:0", "cpu", None, ()), cpu_station_spec(tmp_path), freezer=None)
    err = tmp_path / "judge.err"
    with err.open("wb") as sink, patch("subprocess.Popen", partial(subprocess.Popen, stderr=sink)):
        station._ensure_started()
    try:
        assert station.prepare("linear_relu")["eager"]["median_ms"] > 0  # its handlers are set by now
        os.kill(station._proc.pid, STACKS_SIGNAL)
        wait_for(lambda: "serve" in err.read_text(), 30, "the judge process's stacks")
        assert "most recent call first" in err.read_text()
        assert "median_ms" in station.prepare("scale_rows")["eager"]  # the same process still answers
        assert station._proc.poll() is None
    finally:
        station.close()
