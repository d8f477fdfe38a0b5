"""`benchmarks/reproducibility.py`'s figures from report folders it would have made: the spread of an answer's
speedups over runs, the gap between GPUs, the judge against the worker's claim, and interval coverage."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import benchmark_module

repro = benchmark_module("reproducibility")


def _report(where: Path, speedup: float, median: float, claim: float, ci: list[float] | None = None) -> Path:
    where.mkdir(parents=True)
    row = {"run": "r", "problem": "p", "sample": "s", "verdict": "correct", "speedup_vs_eager": speedup,
           "speedup_vs_eager_ci": ci, "timing": {"median_ms": median, "claimed_median_ms": claim},
           "baselines": {"eager": {"median_ms": 2.0}}}
    failed = {"run": "r", "problem": "p", "sample": "bad", "verdict": "incorrect"}
    (where / "results.jsonl").write_text(json.dumps(row) + "\n" + json.dumps(failed) + "\n")
    return where


def test_the_figures_are_the_spread_over_runs_the_gap_between_gpus_and_the_judge_against_the_claim(tmp_path):
    rounds = [{"0": _report(tmp_path / f"{n}-0", s0, 1.0, 0.98, [s0 - 0.02, s0 + 0.02]),
               "1": _report(tmp_path / f"{n}-1", s1, 1.03, 1.0, [s1 - 0.02, s1 + 0.02])}
              for n, (s0, s1) in enumerate([(2.00, 2.10), (2.04, 2.10), (2.02, 2.10)])]
    answers = repro.summarize(rounds)
    answer = answers["r/p/s"]
    assert answer["speedups"] == {"0": [2.00, 2.04, 2.02], "1": [2.10, 2.10, 2.10]}
    assert answer["spread"] == pytest.approx(0.04 / 2.02)
    assert answer["from_median"] == pytest.approx(0.02 / 2.02)
    assert answer["gpu_gap"] == pytest.approx(0.08 / 2.06)
    assert answer["judge_vs_claim"] == pytest.approx(0.03)
    assert answer["inside_other_intervals"] == [4 + 6, 12], "gpu 0: 2.00 and 2.04 miss each other's intervals"
    assert answers["r/p/bad"] == {"verdicts": ["incorrect"]}
    targets = repro.verdicts_of(answers)
    assert targets["from_median"]["met"] is True and targets["gpu_gap"]["met"] is False
    assert targets["judge_vs_claim"]["worst"] == pytest.approx(0.03) and not targets["judge_vs_claim"]["met"]


def test_the_answers_own_events_are_measured_from_their_median_per_gpu(tmp_path):
    # What the answer's kernels did in each fresh worker, beside what the judge read of them.
    rounds = [{"0": _report(tmp_path / f"{n}-0", 2.0, 1.0, c0), "1": _report(tmp_path / f"{n}-1", 2.0, 1.0, c1)}
              for n, (c0, c1) in enumerate([(1.00, 2.0), (1.03, 2.0), (0.99, 2.2)])]
    assert repro.summarize(rounds)["r/p/s"]["claim_from_median"] == pytest.approx(0.2 / 2.0)


def test_one_gpus_run_sees_only_that_gpu():
    assert repro.environment("3")["CUDA_VISIBLE_DEVICES"] == "3"
    assert repro.environment("cpu").get("CUDA_VISIBLE_DEVICES") != "cpu"


def test_the_figures_are_written_after_every_round_so_a_run_cut_short_keeps_its_rounds(tmp_path, monkeypatch):
    written = []

    def round_(args, where, name, gpus):
        number = int(name.removeprefix("run"))
        if number == 3:  # as the call's time limit would
            raise KeyboardInterrupt
        figures = tmp_path / "figures.json"
        written.append(json.loads(figures.read_text())["runs_done"] if figures.exists() else None)
        return {"0": _report(tmp_path / f"{name}-0", 2.0 + number / 100, 1.0, 1.0)}

    monkeypatch.setattr(repro, "run_round", round_)
    monkeypatch.setattr("sys.argv", ["reproducibility.py", "--filled", "--runs", "3", "--gpus", "0",
                                     "--keep", str(tmp_path / "keep"), "--json", str(tmp_path / "figures.json")])
    monkeypatch.setattr(repro, "gpu_indices", lambda spec, device: ["0"])
    with pytest.raises(KeyboardInterrupt):
        repro.main()
    figures = json.loads((tmp_path / "figures.json").read_text())
    assert written == [None, 1], "the first round's figures were on disk before the second round began"
    assert figures["runs_done"] == 2 and figures["runs"] == 3
    assert figures["answers"]["r/p/s"]["speedups"] == {"0": [2.01, 2.02]}


def test_with_a_cache_per_gpu_each_gpus_runs_build_into_their_own_and_each_is_filled(tmp_path, monkeypatch):
    import argparse

    started = []

    class Run:
        def __init__(self, command, **kwargs):
            started.append((kwargs["env"].get("CUDA_VISIBLE_DEVICES"), command))
            self.returncode = 0

        def communicate(self):
            return "", None

    monkeypatch.setattr(repro.subprocess, "Popen", Run)
    args = argparse.Namespace(set="problems", problems="problems", baselines="eager", device="cuda", extra="",
                              cache_per_gpu=tmp_path / "caches")
    repro.fill(args, tmp_path, ["0", "2"])
    assert [gpu for gpu, _ in started] == ["0", "2"], "one first run per GPU"
    for gpu, command in started:
        assert command[command.index("--cache-dir") + 1] == str(tmp_path / "caches" / f"gpu{gpu}")
    shared = argparse.Namespace(**{**vars(args), "cache_per_gpu": None})
    started.clear()
    repro.fill(shared, tmp_path, ["0", "2"])
    assert [gpu for gpu, _ in started] == ["0"] and "--cache-dir" not in started[0][1], "one shared cache: one fill"
