"""``--backend ray`` on a local Ray cluster of CPUs: the verdicts of the local backend, rows named after the Ray
judges, ``--resume``, the Python API, a judge actor that dies, and the refusals (no Ray, no GPU, a GPU list).
Tests that need a cluster skip where Ray is not installed (``pip install -e '.[test]'`` installs it)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import FIXTURES
from evalkit.cli.main import main
from evalkit.schedule.options import JudgeOptions, ScoreError
from process_helpers import wait_for
from station_helpers import cpu_station_spec, prepare_in_background

# A local Ray cluster, and the build stage run as Ray tasks (a cold build).
pytestmark = pytest.mark.slow

PROBLEMS = FIXTURES / "judge_problems"
ANSWERS = FIXTURES / "judge_submissions" / "fixtures"
CHOSEN = {("linear_relu", "correct_cpp"): "correct", ("linear_relu", "incorrect"): "incorrect",
          ("linear_relu", "crash"): "crash", ("scale_rows", "correct"): "correct",
          ("linear_relu", "no_code"): "no_code"}  # their verdicts in tests/end_to_end/test_score_cpu.py
SETTINGS = ["--device", "cpu", "--backend", "ray", "--judges", "2", "--baselines", "eager",
            "--timing-trials", "10", "--warmup", "1", "--seed", "1"]
needs_ray = pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="Ray is not installed")


@pytest.fixture(scope="module")
def cluster():
    """A local Ray cluster; evalkit joins it (this process is connected) and leaves it running."""
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=3, include_dashboard=False, logging_level="WARNING")  # 2 CPU judges and 1 build at a time
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cache")


def _answers(root: Path) -> Path:
    for problem, sample in CHOSEN:
        source = next((ANSWERS / problem).glob(f"{sample}.*"))
        (root / "run" / problem).mkdir(parents=True, exist_ok=True)
        shutil.copy(source, root / "run" / problem / source.name)
    return root


def _score(answers: Path, out: Path, cache: Path, *extra: str):
    args = ["score", str(answers), "--problems", str(PROBLEMS), "--out", str(out), "--cache-dir", str(cache),
            *SETTINGS, *extra]
    return CliRunner().invoke(main, args, catch_exceptions=False)


def test_without_ray_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch):
    from evalkit.schedule.machines import machines

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    with pytest.raises(ScoreError, match=r"pip install 'evalkit\[ray\]'"):
        machines(JudgeOptions(backend="ray"))


def test_gpu_indices_mean_nothing_on_a_cluster():
    from evalkit.schedule.ray_backend import _gpu_count

    assert _gpu_count(JudgeOptions(gpus="all"), 4) == 4 and _gpu_count(JudgeOptions(gpus="2"), 4) == 2
    with pytest.raises(ScoreError, match="Ray assigns the GPUs"):
        _gpu_count(JudgeOptions(gpus="0,2"), 4)
    with pytest.raises(ScoreError, match="has 4 GPU"):
        _gpu_count(JudgeOptions(gpus="5"), 4)


@needs_ray
def test_the_cluster_is_asked_for_what_it_has(cluster, cache: Path):
    from evalkit.schedule.machines import machines

    with pytest.raises(ScoreError, match="the Ray cluster has no GPU"):
        machines(JudgeOptions(backend="ray", device="cuda", cache_dir=cache))
    with pytest.raises(ScoreError, match="--judges 3: the Ray cluster has 3 CPU"):
        machines(JudgeOptions(backend="ray", device="cpu", judges=3, cache_dir=cache))
    assert cluster.is_initialized(), "a refused run left the caller's cluster connection alone"


@needs_ray
def test_score_on_ray_gives_the_local_verdicts_and_resume_judges_nothing_new(cluster, cache: Path,
                                                                            tmp_path: Path):
    answers, out = _answers(tmp_path / "answers"), tmp_path / "report"
    result = _score(answers, out, cache)
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert {(r["problem"], r["sample"]): r["verdict"] for r in rows} == CHOSEN
    judged = {r["judge"] for r in rows if r["verdict"] != "no_code"}
    assert judged <= {"ray-cpu:0", "ray-cpu:1"} and judged, judged
    baselines = json.loads((out / "baselines.json").read_text())  # written here, from what the actors timed
    assert sorted(entry["problem"] for entry in baselines.values()) == ["linear_relu", "scale_rows"]
    assert json.loads((out / "environment.json").read_text())["torch"]  # the judging node's facts
    again = _score(answers, out, cache, "--resume")
    assert again.exit_code == 0, again.output
    assert "judged 0 submission(s)" in again.output
    assert len((out / "results.jsonl").read_text().splitlines()) == len(rows)
    assert cluster.is_initialized(), "evalkit shut down a cluster it did not start"


@needs_ray
def test_the_evaluator_judges_on_ray(cluster, cache: Path):
    from evalkit import Evaluator

    answer = (ANSWERS / "linear_relu" / "correct_cpp.py").read_text()
    with Evaluator(problems=PROBLEMS, device="cpu", backend="ray", cache_dir=cache, baselines=("eager",),
                   timing_trials=10, warmup=1, seed=1) as ev:
        row = ev.judge("linear_relu", answer)
    assert row["verdict"] == "correct" and row["judge"] == "ray-cpu:0" and "eager" in row["baselines"]


@needs_ray
def test_a_judge_actor_that_dies_fails_its_request_and_a_new_one_serves_the_next(cluster, cache: Path):
    """... and a build the judge's node cannot see is refused with a message naming --cache-dir."""
    from evalkit.intake.triage import triage
    from evalkit.judge.builder import BuildOutcome
    from evalkit.records import Submission
    from evalkit.schedule.placement import JudgeSlot
    from evalkit.schedule.judge_client import JudgeFailed
    from evalkit.schedule.ray_backend import JudgeActorDied, RayBackend

    backend = RayBackend("", owns_ray=False)
    spec = cpu_station_spec(cache, timing_trials=10)
    station = backend.station(JudgeSlot("ray-cpu:0", "cpu", None, ()), spec, 1, None, lambda text: None)
    thread, failure = prepare_in_background(station, "linear_relu")
    wait_for(lambda: station._actor is not None, 30, "the judge actor to start")
    time.sleep(0.5)
    cluster.kill(station._actor)
    thread.join(60)
    try:
        assert failure and isinstance(failure[0], JudgeActorDied), failure
        assert "ray-cpu:0" in str(failure[0]) and station.current_problem is None
        assert "eager" in station.prepare("linear_relu")  # a new actor
        assert station.current_problem == "linear_relu"
        text = (ANSWERS / "linear_relu" / "incorrect.py").read_text()
        elsewhere = BuildOutcome(status="ok", seconds=1.0, extension_dir=str(cache / "not-here" / "extensions"))
        with pytest.raises(JudgeFailed, match="FileNotFoundError: .*--cache-dir must be on a filesystem every node"):
            station.judge_answer(Submission("run", "linear_relu", "x", "x.py", text), triage(text), elsewhere)
    finally:
        backend.close()
    assert station._actor is None
