"""Each GPU's busy fraction while a run judges, read from ``nvidia-smi`` (here a stand-in printing its samples),
and mapped back to the run's own GPU numbering; nothing where there is no ``nvidia-smi``."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

from evalkit.schedule.gpu_busy import GpuBusySampler, device_ids

# Physical GPUs 2 and 3 (the run's 0 and 1 under CUDA_VISIBLE_DEVICES=2,3): GPU 2 busy in 3 samples of 4.
SAMPLES = ["2, GPU-aaa, 40", "3, GPU-bbb, 0", "2, GPU-aaa, 0", "3, GPU-bbb, 0", "2, GPU-aaa, 100",
           "3, GPU-bbb, 10", "2, GPU-aaa, 20", "3, GPU-bbb, 0", "[Unknown Error]"]


def _fake_nvidia_smi(folder: Path, asked: Path) -> None:
    script = folder / "nvidia-smi"
    samples = "\n".join(SAMPLES)
    script.write_text(f'#!/bin/sh\necho "$@" > {asked}\ncat <<"END"\n{samples}\nEND\nexec sleep 60\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)


def test_busy_fractions_per_gpu_of_the_run(tmp_path, monkeypatch):
    asked = tmp_path / "asked.txt"
    _fake_nvidia_smi(tmp_path, asked)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    ids = device_ids([0, 1])
    assert ids == {"0": "2", "1": "3"}
    with GpuBusySampler(ids) as sampler:
        deadline = time.monotonic() + 60  # a bound on a broken reader, not a figure
        while len(sampler._samples["1"]) < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
    figures = sampler.figures()
    assert figures["0"]["busy_fraction"] == 0.75 and figures["0"]["samples"] == 4
    assert figures["0"]["mean_utilization_pct"] == 40.0
    assert figures["1"]["busy_fraction"] == 0.25
    assert "--id=2,3" in asked.read_text()


def test_nothing_is_sampled_without_nvidia_smi(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with GpuBusySampler(device_ids([0])) as sampler:
        pass
    assert sampler.figures() is None


def test_window_figures_are_the_samples_since_the_last_window_memory_and_all(monkeypatch):
    """An RL step's GPU figures (``benchmarks/rl_step.py``): the samples of that step alone, their utilization's
    median and mean, and the memory used; a line that is no sample is skipped, a memory not reported left out."""
    from types import SimpleNamespace

    sampler = GpuBusySampler({"0": "0"})
    assert sampler.window_figures() is None  # nothing started: nothing sampled

    def read(*lines: str) -> None:
        sampler._process = SimpleNamespace(stdout=iter(lines))  # type: ignore[assignment]
        sampler._read()

    read("0, GPU-aaa, 40, 1000", "0, GPU-aaa, [N/A], 1200", "[Unknown Error]", "0, GPU-aaa, 60, 3000")
    assert sampler.window_figures() == {"0": {"samples": 2, "busy_pct_median": 50.0, "busy_pct_mean": 50.0,
                                              "memory_mib_median": 2000.0, "memory_mib_max": 3000.0}}
    read("0, GPU-aaa, 0, [N/A]")
    assert sampler.window_figures() == {"0": {"samples": 1, "busy_pct_median": 0.0, "busy_pct_mean": 0.0}}
    assert sampler.window_figures() == {"0": {"samples": 0}}
    assert sampler.figures() == {"0": {"busy_fraction": 2 / 3, "mean_utilization_pct": 100 / 3, "samples": 3}}
