"""Trusted side: PyTorch baselines (eager and ``torch.compile``), judged exactly like a submission.

The reference model is written out as a submission (``reference_as_submission``) and judged by the same
``Judge`` in a sandboxed worker, so its time comes from the same path, clock and overhead calibration as
every answer's: a speedup compares like with like. Baselines are cached by (device name, torch version,
problem hash) in the report folder, so a resumed run does not time them again.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Callable

import torch

from evalkit.judge.reference import ReferenceProblem

logger = logging.getLogger(__name__)

_AS_SUBMISSION = {
    "eager": "\n\n# evalkit: the reference, judged as a submission (eager baseline)\nModelNew = Model\n",
    "compile": '''

# evalkit: the reference, judged as a submission (torch.compile baseline)
class ModelNew(Model):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._evalkit_compiled_forward = torch.compile(super().forward)

    def forward(self, *args):
        return self._evalkit_compiled_forward(*args)
''',
}


def reference_as_submission(reference_code: str, kind: str) -> str:
    """The reference's code with ``ModelNew`` bound to its ``Model``, eager or compiled."""
    if kind not in _AS_SUBMISSION:
        raise ValueError(f"unknown baseline kind {kind!r}; known: {sorted(_AS_SUBMISSION)}")
    prelude = "import torch\n" if kind == "compile" else ""
    return prelude + reference_code + _AS_SUBMISSION[kind]


def device_name(device: str) -> str:
    if device == "cuda":
        return torch.cuda.get_device_name()
    return "cpu"


def cache_key(ref: ReferenceProblem) -> str:
    return f"{device_name(ref.device)}|torch {torch.__version__}|{ref.problem.sha256}"


def measure_baselines(ref: ReferenceProblem, kinds: tuple[str, ...],
                      judge_reference: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
    """Each of ``kinds`` judged as a submission by ``judge_reference``; a failing kind is recorded, not raised."""
    result: dict[str, Any] = {"key": cache_key(ref), "problem": ref.problem.id, "device_name": device_name(ref.device)}
    for kind in kinds:
        try:
            result[kind] = judge_reference(kind)
        except Exception as err:  # noqa: BLE001 - a baseline failing must not stop the run
            result[kind] = {"error": f"{type(err).__name__}: {err}"[:500]}
        if "error" in result[kind]:
            logger.warning("%s: %s baseline failed: %s", ref.problem.id, kind, result[kind]["error"])
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

    def get_or_measure(self, ref: ReferenceProblem, kinds: tuple[str, ...],
                       judge_reference: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
        key = cache_key(ref)
        cached = self._entries.get(key)
        if cached and all(kind in cached for kind in kinds):
            return cached
        self._entries[key] = measure_baselines(ref, kinds, judge_reference)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(self._entries, indent=2))
        return self._entries[key]
