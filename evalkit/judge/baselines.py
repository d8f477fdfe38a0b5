"""Trusted side: PyTorch baselines (eager and ``torch.compile``), judged exactly like a submission.

The reference model is written out as a submission (``reference_as_submission``) and judged by the same
``Judge`` in a sandboxed worker, so its time comes from the same path, clock and overhead calibration as
every answer's: a speedup compares like with like. Baselines are cached by (device name, torch version,
problem hash) in the report folder, so a resumed run does not time them again.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import tempfile
import time
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


def cache_key(ref: ReferenceProblem, timing: str = "", driver: str | None = None) -> str:
    return baseline_key(ref.problem.sha256, ref.device, timing, driver)


def baseline_key(problem_sha256: str, device: str, timing: str = "", driver: str | None = None) -> str:
    """What a baseline's time depends on: the device and its driver, torch, evalkit (its timing protocol),
    the problem's content, and ``timing`` (the settings that shape the measurement)."""
    from evalkit import __version__

    return (f"{device_name(device)}|driver {driver}|torch {torch.__version__}|evalkit {__version__}|"
            f"{problem_sha256}|{timing}")


def measure_baselines(ref: ReferenceProblem, kinds: tuple[str, ...],
                      judge_reference: Callable[[str], dict[str, Any]], key: str) -> dict[str, Any]:
    """Each of ``kinds`` judged as a submission by ``judge_reference``; a failing kind is recorded, not raised."""
    result: dict[str, Any] = {"key": key, "problem": ref.problem.id, "device_name": device_name(ref.device),
                              "measured_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}
    for kind in kinds:
        start = time.monotonic()
        try:
            result[kind] = judge_reference(kind)
        except Exception as err:  # noqa: BLE001 - a baseline failing must not stop the run
            result[kind] = {"error": f"{type(err).__name__}: {err}"[:500]}
        result[kind]["judge_s"] = time.monotonic() - start  # what it cost the judge (torch.compile: mostly compiling)
        if "error" in result[kind]:
            logger.warning("%s: %s baseline failed: %s", ref.problem.id, kind, result[kind]["error"])
    return result


class BaselineCache:
    """Baselines persisted as JSON files: the report's own (``path``), then one shared across reports
    (``shared_path``, beside the build cache). ``remeasure`` ignores both and times again."""

    def __init__(self, path: Path | None, shared_path: Path | None = None, remeasure: bool = False,
                 run: str = "") -> None:
        self.path, self.shared_path, self.remeasure, self.run = path, shared_path, remeasure, run

    def lookup(self, key: str, kinds: tuple[str, ...]) -> dict[str, Any] | None:
        """The entry for ``key`` holding every kind, if one may be used (and then it is recorded in the report).
        The files are read again on every call: another judge of the run (``run``, a token every judge of one
        run shares) may have just timed this key. ``remeasure`` takes only what this run timed."""
        own = read_entries(self.path).get(key)
        if self.remeasure:
            entry = own if own and self.run and own.get("run") == self.run else None
            entry = _complete(entry, kinds, failed_ok=True)
        else:
            entry = (_complete(own, kinds, failed_ok=True) or
                     _complete(read_entries(self.shared_path).get(key), kinds, failed_ok=False))
        if entry is not None and self.path is not None:
            merge_entry(self.path, key, entry)
        return entry

    def get_or_measure(self, ref: ReferenceProblem, kinds: tuple[str, ...],
                       judge_reference: Callable[[str], dict[str, Any]], key: str | None = None) -> dict[str, Any]:
        key = key or cache_key(ref)
        entry = self.lookup(key, kinds)
        if entry is not None:
            return entry
        entry = {**measure_baselines(ref, kinds, judge_reference, key), "run": self.run}
        if self.shared_path is not None:
            merge_entry(self.shared_path, key, entry)
        if self.path is not None:
            merge_entry(self.path, key, entry)
        return entry


def _complete(entry: dict[str, Any] | None, kinds: tuple[str, ...], failed_ok: bool) -> dict[str, Any] | None:
    """``entry`` when it holds every kind (a failed one counts only where ``failed_ok``: within one report,
    so a resumed run compares with what its earlier rows were compared with)."""
    if entry and all(kind in entry and (failed_ok or "error" not in entry[kind]) for kind in kinds):
        return entry
    return None


def read_entries(path: Path | None) -> dict[str, Any]:
    if path is None or not path.exists():
        return {}
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        logger.warning("%s is unreadable; baselines will be measured again", path)
        return {}


def merge_entry(path: Path, key: str, entry: dict[str, Any]) -> None:
    """Add one entry to the JSON file at ``path``, written atomically (another run may share the file)."""
    entries = read_entries(path)
    entries[key] = entry
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    with os.fdopen(fd, "w") as handle:
        json.dump(entries, handle, indent=2)
    os.replace(tmp, path)
