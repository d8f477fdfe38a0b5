"""Several judges at once: ``--judges N`` CPU judges (each a judge process of its own) give the verdicts one
judge gives, share the work, and a judge process that dies costs one answer's row, not the run."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import signal
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import FIXTURES
from evalkit.cli.main import main
from evalkit.schedule.judge_process import JudgeProcessDied, ProcessStation, StationSpec
from evalkit.schedule.options import JudgeOptions, default_limits
from evalkit.schedule.placement import JudgeSlot
from evalkit.schedule.station import BaselineFiles
from evalkit.sources.problems import discover_problems
from station_helpers import cpu_station_spec, prepare_in_background, wait_until

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
    station = ProcessStation(JudgeSlot("cpu:0", "cpu", None, ()), cpu_station_spec(tmp_path), freezer=None)
    thread, failure = prepare_in_background(station, "linear_relu")
    wait_until(lambda: station._proc is not None)
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
    assert station._proc is None


@pytest.mark.cuda
def test_a_judge_process_on_the_gpu_times_what_the_schedulers_own_judge_times(tmp_path: Path):
    """The several-GPU path on one GPU: a judge process (CUDA_VISIBLE_DEVICES, the freeze handshake) and the
    in-process judge each time the eager baseline within 3% of what its worker's own CUDA events read, and
    within 12% of each other. Not closer: each timing is a fresh worker, whose kernels ran 6-8% apart from
    another's in every GPU record since issue 11 (docs/gpu-runs/2026-11-27-trusted-residual-h200/), whichever
    judge held it; the worker's own events move with it, so the first bound is what tells a path's clock."""
    from evalkit.sandbox.freezer import BuildFreezer
    from evalkit.schedule.station import JudgeStation

    problems = discover_problems(FIXTURES / "timing_problems")
    options = JudgeOptions(device="cuda", baselines=("eager",), timing_trials=30, cache_dir=tmp_path)
    limits = default_limits("cuda", None)
    spec = StationSpec(problems, options, "cuda", 1, limits, BaselineFiles(None, None), None)
    freezer = BuildFreezer(limits.group)
    in_process = JudgeStation(problems, options, "cuda", 1, limits, BaselineFiles(None, None), None,
                              quiet=freezer.timing)
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
    station = ProcessStation(JudgeSlot("cpu:0", "cpu", None, ()), cpu_station_spec(tmp_path), freezer=None)
    station._ensure_started()
    station._proc.kill()
    station._proc.wait()
    station.close()
    assert station._proc is None


def test_a_cancel_travels_as_json_of_this_version_and_nothing_else_is_read_as_one():
    from evalkit.schedule import judge_messages as m

    # The cancel file is the one message read from a file: a pickle there would run whoever wrote it in the judge.
    assert m.Cancel.from_text(m.Cancel("run/p/s@abc").to_text()) == m.Cancel("run/p/s@abc")
    for bad in (pickle.dumps(m.Cancel("run/p/s@abc")).decode("latin-1"), '{"cancel": 3, "version": %d}'
                % m.PROTOCOL_VERSION, '{"cancel": "k", "version": %d}' % (m.PROTOCOL_VERSION - 1), "[]"):
        with pytest.raises(m.WrongMessage):
            m.Cancel.from_text(bad)
