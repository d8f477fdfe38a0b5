"""Trusted side: how busy each GPU of a run was, and its memory, sampled by ``nvidia-smi`` while the run judges.

A GPU's busy fraction is the share of samples in which any kernel ran on it (``utilization.gpu`` above 0: the
share of the sample period during which one or more kernels executed, as NVIDIA defines it); its mean
utilization is given beside it. Figures per window (``window_figures``: an RL step's, ``benchmarks/rl_step.py``) add
the utilization's median and the memory used. Nothing is sampled where ``nvidia-smi`` is missing (a CPU run) or fails.
"""

from __future__ import annotations

import logging
import os
import shutil
import statistics
import subprocess
import threading
from types import TracebackType
from typing import Any

logger = logging.getLogger(__name__)

SAMPLE_MS = 1000
Sample = tuple[float, float | None]  # utilization %, memory used in MiB (None where not reported)


def device_ids(gpus: list[int]) -> dict[str, str]:
    """The run's GPU indices (as this process sees them) -> how ``nvidia-smi`` names each: the entry of
    ``CUDA_VISIBLE_DEVICES`` (an index or a UUID) where it is set, else the index itself."""
    visible = [entry.strip() for entry in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if entry.strip()]
    return {str(gpu): visible[gpu] if gpu < len(visible) else str(gpu) for gpu in gpus}


class GpuBusySampler:
    """``with GpuBusySampler(device_ids([0, 1])) as sampler: ...`` then ``sampler.figures()`` for the whole run; or
    ``sampler.window_figures()`` at the end of each part of it."""

    def __init__(self, ids: dict[str, str], command: str = "nvidia-smi", sample_ms: int = SAMPLE_MS) -> None:
        self.ids, self.command, self.sample_ms = ids, command, sample_ms
        self._gpu_of = {device: gpu for gpu, device in ids.items()}
        self._samples: dict[str, list[Sample]] = {gpu: [] for gpu in ids}
        self._window_start = {gpu: 0 for gpu in ids}
        self._process: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None

    def __enter__(self) -> "GpuBusySampler":
        path = shutil.which(self.command)
        if not self.ids or path is None:
            return self
        try:
            self._process = subprocess.Popen(
                [path, "--query-gpu=index,uuid,utilization.gpu,memory.used", "--format=csv,noheader,nounits",
                 f"-lms={self.sample_ms}", f"--id={','.join(self.ids.values())}"],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        except OSError as err:
            logger.debug("no GPU busy figures: %s", err)
            return self
        self._reader = threading.Thread(target=self._read, name="gpu-busy", daemon=True)
        self._reader.start()
        return self

    def _read(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        for line in self._process.stdout:
            fields = [field.strip() for field in line.split(",")]
            gpu = next((self._gpu_of[f] for f in fields[:2] if f in self._gpu_of), None)
            try:
                self._samples[gpu].append((float(fields[2]), _number(fields[3:4])))  # type: ignore[index]
            except (KeyError, ValueError, IndexError):
                continue  # a header, an error line, or a GPU not asked for

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        if self._reader is not None:
            self._reader.join(timeout=5)

    def figures(self) -> dict[str, dict[str, Any]] | None:
        """Per GPU (its index as the run names it): ``busy_fraction``, ``mean_utilization_pct`` and ``samples``;
        None where nothing was sampled."""
        if not any(self._samples.values()):
            return None
        return {gpu: {"busy_fraction": sum(busy > 0 for busy, _ in samples) / len(samples),
                      "mean_utilization_pct": statistics.fmean(busy for busy, _ in samples), "samples": len(samples)}
                for gpu, samples in self._samples.items() if samples}

    def window_figures(self) -> dict[str, dict[str, Any]] | None:
        """Per GPU, the samples since the last call (or the start): how many, the utilization's median and mean in
        percent, and the memory used, its median and largest; None where nothing is sampled."""
        if self._process is None:
            return None
        figures = {}
        for gpu, samples in self._samples.items():
            end = len(samples)  # the reader appends meanwhile: what comes after is the next window's
            figures[gpu] = _window(samples[self._window_start[gpu]:end])
            self._window_start[gpu] = end
        return figures


def _number(fields: list[str]) -> float | None:
    """The one field's number; None when there is none or it is no number ("[N/A]")."""
    try:
        return float(fields[0])
    except (IndexError, ValueError):
        return None


def _window(samples: list[Sample]) -> dict[str, Any]:
    if not samples:
        return {"samples": 0}
    busy = [utilization for utilization, _ in samples]
    memory = [used for _, used in samples if used is not None]
    figures = {"samples": len(busy), "busy_pct_median": statistics.median(busy), "busy_pct_mean": statistics.fmean(busy)}
    if memory:
        figures.update(memory_mib_median=statistics.median(memory), memory_mib_max=max(memory))
    return figures
