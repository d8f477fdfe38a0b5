"""Trusted side: PyTorch baselines (eager and ``torch.compile``), judged exactly like a submission.

The reference model is written out as a submission (``reference_as_submission``) and judged by the same
``Judge`` in a sandboxed worker, so its time comes from the same path, clock and overhead calibration as
every answer's: a speedup compares like with like. Baselines are cached by (device name, torch version,
problem hash) in the report folder, so a resumed run does not time them again.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import hashlib
import json
import logging
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import torch

from evalkit.judge.reference import ReferenceProblem
from evalkit.records import BASELINE_KINDS
from evalkit.results_file import write_file

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
    from evalkit.version import __version__

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
        entry = self._usable(key)
        if not all(kind in entry for kind in kinds):
            return None
        if self.path is not None:
            record_in_report(self.path, key, entry, kinds)
        return entry

    def get_or_measure(self, ref: ReferenceProblem, kinds: tuple[str, ...],
                       judge_reference: Callable[[str], dict[str, Any]], key: str | None = None) -> dict[str, Any]:
        """The entry for ``key`` with every one of ``kinds``: those already known are kept, the rest timed now
        (a problem's kinds may be timed at different moments: ahead of its answers, or when one is correct)."""
        key = key or cache_key(ref)
        with self._measuring(key):  # another judge (or run) timing this key: wait, then use what it timed
            known = self._usable(key)
            missing = tuple(kind for kind in kinds if kind not in known)
            if not missing:
                return self.lookup(key, kinds) or known
            entry = {**known, **measure_baselines(ref, missing, judge_reference, key), "run": self.run}
            if self.shared_path is not None:
                merge_entry(self.shared_path, key, entry)
            if self.path is not None:
                record_in_report(self.path, key, entry, kinds)
            return entry

    @contextmanager
    def _measuring(self, key: str) -> Iterator[None]:
        """One measurement of ``key`` at a time across processes sharing the cache (a lock file per key, released
        by the kernel if the holder dies), so two judges of a problem compare with the same baselines."""
        home = self.shared_path or self.path
        if home is None:
            yield
            return
        locks = home.parent / "baseline-locks"
        locks.mkdir(parents=True, exist_ok=True)
        with open(locks / f"{hashlib.sha256(key.encode()).hexdigest()[:24]}.lock", "w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _usable(self, key: str) -> dict[str, Any]:
        """What may be used for ``key``: this report's own entry (failed kinds too, so a resumed run compares
        with what its earlier rows were compared with), over the shared cache's kinds that did not fail; with
        ``remeasure``, only what this run timed itself."""
        own = read_entries(self.path).get(key) or {}
        shared = read_entries(self.shared_path).get(key) or {}
        if self.remeasure:  # what another judge of this run timed: in the shared cache before it reaches the report
            return next((dict(entry) for entry in (own, shared) if self.run and entry.get("run") == self.run), {})
        return {**{name: value for name, value in shared.items() if not _failed(value)}, **own}


def _failed(value: object) -> bool:
    return isinstance(value, dict) and "error" in value


def read_entries(path: Path | None) -> dict[str, Any]:
    if path is None or not path.exists():
        return {}
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        logger.warning("%s is unreadable; baselines will be measured again", path)
        return {}


def only_kinds(entry: dict[str, Any], kinds: tuple[str, ...]) -> dict[str, Any]:
    """``entry`` without the baseline kinds not in ``kinds``: a report records only what its run asked for, whatever
    an earlier run left in the machine-wide cache."""
    return {name: value for name, value in entry.items() if name not in BASELINE_KINDS or name in kinds}


def record_in_report(path: Path, key: str, entry: dict[str, Any], kinds: tuple[str, ...]) -> None:
    """Record the kinds of ``entry`` a run asked for in its report's baselines file, beside those it recorded
    before (a problem's kinds may be timed at different moments)."""
    old = read_entries(path).get(key)
    merge_entry(path, key, {**(old if isinstance(old, dict) else {}), **only_kinds(entry, kinds)})


def merge_entry(path: Path, key: str, entry: dict[str, Any]) -> None:
    """Add one entry to the JSON file at ``path``, written atomically (another run may share the file)."""
    entries = read_entries(path)
    entries[key] = entry
    write_file(path, json.dumps(entries, indent=2))
