"""Trusted side: PyTorch baselines (eager and ``torch.compile``), timed in the trusted judge.

Timed with the same routine as submissions (``timing.measure`` + ``Clock``): fresh inputs
and an L2 flush before every call, a device-wide synchronize before the clock stops.
Cached by (device name, torch version, problem hash) in the report folder, so a resumed
run does not time them again.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Callable

import torch

from evalkit.records import to_jsonable
from evalkit.judge.reference import ReferenceProblem, timing_seed
from evalkit.judge.timing import L2Flusher, TimingStats, measure
from evalkit.sandbox.clock import Clock

logger = logging.getLogger(__name__)


def device_name(device: str) -> str:
    if device == "cuda":
        return torch.cuda.get_device_name()
    return "cpu"


def cache_key(ref: ReferenceProblem) -> str:
    return f"{device_name(ref.device)}|torch {torch.__version__}|{ref.problem.sha256}"


def time_model(ref: ReferenceProblem, forward: Callable[..., Any], *, warmup: int, trials: int, seed: int) -> TimingStats:
    clock, flusher = Clock(ref.device), L2Flusher(ref.device)
    inputs: list[Any] = []

    def prepare(i: int) -> None:
        inputs[:] = ref.make_inputs(timing_seed(seed, i))
        flusher.flush()
        clock.synchronize()

    def timed_call(_: int) -> float:
        with torch.no_grad():
            return clock.time_ms(lambda: forward(*inputs))[0]

    return TimingStats.from_samples(measure(timed_call, prepare, warmup=warmup, trials=trials))


def measure_baselines(ref: ReferenceProblem, kinds: tuple[str, ...], *, warmup: int, trials: int,
                      seed: int) -> dict[str, Any]:
    """Time the reference model in each of ``kinds``; a failing kind is recorded, not raised."""
    result: dict[str, Any] = {"key": cache_key(ref), "problem": ref.problem.id, "device_name": device_name(ref.device)}
    for kind in kinds:
        try:
            forward = ref.model if kind == "eager" else torch.compile(ref.model)
            stats = time_model(ref, forward, warmup=max(warmup, 3 if kind == "compile" else 1),
                               trials=trials, seed=seed)
            result[kind] = to_jsonable(stats)
        except Exception as err:  # noqa: BLE001 - a baseline failing must not stop the run
            logger.warning("%s: %s baseline failed: %s", ref.problem.id, kind, err)
            result[kind] = {"error": f"{type(err).__name__}: {err}"[:500]}
    return result


class BaselineCache:
    """Baselines persisted as one JSON file, keyed by device, torch version and problem hash."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: dict[str, Any] = {}
        if path.exists():
            try:
                self._entries = json.loads(path.read_text())
            except (OSError, ValueError):
                logger.warning("%s is unreadable; baselines will be measured again", path)

    def get_or_measure(self, ref: ReferenceProblem, kinds: tuple[str, ...], **kwargs: Any) -> dict[str, Any]:
        key = cache_key(ref)
        cached = self._entries.get(key)
        if cached and all(kind in cached for kind in kinds):
            return cached
        self._entries[key] = measure_baselines(ref, kinds, **kwargs)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(self._entries, indent=2))
        return self._entries[key]
