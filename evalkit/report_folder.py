"""The owner of a report folder (no side of the trust boundary; no torch): ``ReportFolder``, the only writer of its
files. A run opens it (created where missing, and locked: a second run into it meanwhile is refused, naming the
first), records its plans and its machine (``run.json``, ``environment.json``), adds each row as it is judged
(``results.jsonl``) and each baseline timed (``baselines.json``), and closes it; ``evalkit report`` opens it to add
the figures made of the rows (``summary.json``, ``index.html``, the detail pages, the KernelBench export).
tests/test_layout.py keeps every other module from writing them.

The lock is an ``flock`` on ``.lock`` in the folder, which the kernel lets go when its holder dies, so a killed run
never leaves a folder locked; the file says who holds it (process, host, command, since when).
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import logging
import os
import shutil
import socket
import sys
import threading
from pathlib import Path
from typing import IO, Any, Callable, Mapping

from evalkit.records import BASELINE_KINDS, EvalkitError
from evalkit.results_file import (BASELINES_FILE, DETAIL_DIR, ENVIRONMENT_FILE, EVAL_RESULTS_FILE, INDEX_FILE,
                                  LOCK_FILE, RESULTS_FILE, RUN_SETTINGS_FILE, SUMMARY_FILE, ResultsWriter,
                                  write_file)

logger = logging.getLogger(__name__)


class ReportFolderError(EvalkitError):
    """A report folder that cannot be opened: not a folder, not creatable, or one that another run writes."""


class ReportFolderBusy(ReportFolderError):
    """Another run writes this report folder now."""


class ReportFolder:
    """One report folder, opened by one run at a time (``open``); ``close`` (or leaving its ``with``) lets it go."""

    def __init__(self, path: Path, lock: IO[str], created: bool) -> None:
        self.path, self._lock, self._created = Path(path), lock, created
        self._rows: ResultsWriter | None = None
        self._writing = threading.Lock()  # the judges' threads record baselines one at a time

    @classmethod
    def open(cls, path: Path, *, create: bool = True) -> "ReportFolder":
        """The folder at ``path``, locked for this process (``create``: made where missing; else it must exist).
        ``ReportFolderBusy`` naming the run that holds it; ``ReportFolderError`` where it cannot be a folder."""
        path = Path(path)
        if path.exists() and not path.is_dir():
            raise ReportFolderError(f"{path}: that is a file, not a report folder; give a folder (created if "
                                    f"missing), e.g. {path.with_name(path.name + '-report')}")
        created = not path.exists()
        if created and not create:
            raise ReportFolderError(f"{path}: no such report folder; give a folder that `evalkit score` wrote")
        try:
            path.mkdir(parents=True, exist_ok=True)
            lock = open(path / LOCK_FILE, "a+", encoding="utf-8")  # noqa: SIM115 - held until ``close``
        except OSError as err:
            raise ReportFolderError(f"{path}: cannot create the report folder ({err.strerror or err}); choose "
                                    f"another one (--out)") from err
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().strip() or "another process"
            lock.close()
            raise ReportFolderBusy(f"{path}: another run is writing this report folder ({holder}); wait for it to "
                                   f"end, or write to another folder (--out NEW_DIR)") from None
        lock.seek(0)
        lock.truncate()
        lock.write(f"pid {os.getpid()} on {socket.gethostname()}, `{' '.join(sys.argv[:3])}`, since "
                   f"{_now()}\n")
        lock.flush()
        return cls(path, lock, created)

    def close(self) -> None:
        """Close the rows (synced to disk) and let the folder go; one this run created and left empty is removed."""
        if self._rows is not None:
            self._rows.close()
            self._rows = None
        if self._lock.closed:
            return
        if self._created and {p.name for p in self.path.iterdir()} == {LOCK_FILE}:
            shutil.rmtree(self.path, ignore_errors=True)  # a run refused before it wrote anything leaves nothing
        self._lock.close()  # the lock goes with it

    def __enter__(self) -> "ReportFolder":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- a run's records --------------------------------------------------------------------------------------

    def record_run(self, data: Mapping[str, Any]) -> Path:
        """Write ``run.json`` (its content: ``evalkit.schedule.run_settings``: the settings and every plan)."""
        return self._write(RUN_SETTINGS_FILE, json.dumps(data, indent=2) + "\n")

    def record_environment(self, facts: Mapping[str, Any]) -> None:
        """The machine this report is judged on (``environment.json``), kept from the report's first run."""
        if not (self.path / ENVIRONMENT_FILE).exists():
            self._write(ENVIRONMENT_FILE, json.dumps(dict(facts), indent=2) + "\n")

    def note_environment(self, name: str, value: Any) -> None:
        """Add one fact the judges only know once started. A resumed report keeps the first run's; a resume that
        differs is said (a warning) and recorded beside it (``<name>_on_resume``, each resume's value in order),
        never mixed in silently."""
        def change(facts: dict[str, Any]) -> bool:
            if name not in facts:
                facts[name] = value
            elif facts[name] != value:
                logger.warning("%s: this report's rows so far were judged with %s %r; the rows from now on with %r "
                               "(recorded as %s_on_resume)", self.path / ENVIRONMENT_FILE, name, facts[name], value,
                               name)
                facts[f"{name}_on_resume"] = [*facts.get(f"{name}_on_resume", []), value]
            else:
                return False
            return True
        self._update_environment(change)

    def add_run_figures(self, figures: Mapping[str, Any]) -> None:
        """Add this run's (or this resume's) figures (wall time, answers judged, GPUs busy) to ``runs``."""
        def add(facts: dict[str, Any]) -> bool:
            facts["runs"] = [*facts.get("runs", []), dict(figures)]
            return True
        self._update_environment(add)

    def add_row(self, row: Mapping[str, Any]) -> None:
        """Append one row to ``results.jsonl``, handed to the operating system at once (``ResultsWriter``)."""
        if self._rows is None:
            self._rows = ResultsWriter(self.path / RESULTS_FILE)
        self._rows.write(dict(row))

    # ---- baselines ----------------------------------------------------------------------------------------------

    def baselines_of(self, problem_id: str) -> dict[str, Any]:
        """The report's baseline entries of ``problem_id``, by key, for a judge to use (it reads no report)."""
        return {key: entry for key, entry in self._baselines().items()
                if isinstance(entry, dict) and entry.get("problem") == problem_id}

    def add_baselines(self, entry: Mapping[str, Any], kinds: tuple[str, ...]) -> None:
        """Record the kinds of a judge's baseline ``entry`` (its ``key`` says what it was timed under) that the run
        asked for, beside those recorded before (a problem's kinds may be timed at different moments)."""
        key = entry.get("key")
        if not isinstance(key, str) or not key:
            return
        with self._writing:
            entries = self._baselines()
            old = entries.get(key)
            asked = {name: value for name, value in entry.items() if name not in BASELINE_KINDS or name in kinds}
            entries[key] = {**(old if isinstance(old, dict) else {}), **asked}
            self._write(BASELINES_FILE, json.dumps(entries, indent=2))

    # ---- the figures made of the rows (``evalkit report``) ------------------------------------------------------

    def write_pages(self, summary: Mapping[str, Any], index: str, details: Mapping[str, str]) -> Path:
        """``summary.json``, ``index.html`` and the detail pages (file name -> page; any other page is stale and
        removed); return the index's path."""
        self._write(SUMMARY_FILE, json.dumps(summary, indent=2, allow_nan=False) + "\n")
        folder = self.path / DETAIL_DIR
        folder.mkdir(parents=True, exist_ok=True)
        for name, page in details.items():
            write_file(folder / name, page)
        for stale in folder.glob("*.html"):
            if stale.name not in details:
                stale.unlink()
        return self._write(INDEX_FILE, index)

    def write_export(self, text: str, out: Path | None = None) -> Path:
        """The rows in KernelBench's results format, to ``out`` where given, else the folder's own file."""
        if out is not None:
            write_file(Path(out), text)
            return Path(out)
        return self._write(EVAL_RESULTS_FILE, text)

    # ---- the files ----------------------------------------------------------------------------------------------

    def _write(self, name: str, text: str) -> Path:
        if self._lock.closed:
            raise ReportFolderError(f"{self.path}: closed; reopen it to write {name}")
        path = self.path / name
        write_file(path, text)
        return path

    def _baselines(self) -> dict[str, Any]:
        return _json_object(self.path / BASELINES_FILE)

    def _update_environment(self, change: Callable[[dict[str, Any]], bool]) -> None:
        """Apply ``change`` to the facts of ``environment.json`` and write them back where it says they changed."""
        path = self.path / ENVIRONMENT_FILE
        if path.exists() and (facts := _json_object(path)) and change(facts):
            self._write(ENVIRONMENT_FILE, json.dumps(facts, indent=2) + "\n")



def _json_object(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
