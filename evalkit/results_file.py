"""The report folder's files (no side of the trust boundary; no torch): ``results.jsonl``, one row per judged
submission, appended and handed to the operating system as it is judged (synced to disk every few seconds), read
back skipping a torn last line; the names of the other files; and ``write_file``, the one way every other file
of a report folder (summary, pages, baselines, environment, run settings, exports) is written."""

from __future__ import annotations

import json
import logging
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

import jsonlines

from evalkit.records import SchemaError, migrate, resume_key

logger = logging.getLogger(__name__)

RESULTS_FILE = "results.jsonl"
SUMMARY_FILE = "summary.json"
BASELINES_FILE = "baselines.json"  # the judge's cache of PyTorch baseline timings
ENVIRONMENT_FILE = "environment.json"  # the judging machine's torch/CUDA/GPU/driver facts, from the scoring run
RUN_SETTINGS_FILE = "run.json"  # settings that change verdicts or times, recorded at a run's start (--resume checks)
INDEX_FILE = "index.html"  # the report's page
DETAIL_DIR = "submissions"  # a page per scored answer
EVAL_RESULTS_FILE = "eval_results.json"  # ``evalkit report --format kernelbench``: KernelBench's results file
LOCK_FILE = ".lock"  # held (flock) by the run that writes the folder (``report_folder.ReportFolder``); says who


def write_file(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all (a temporary file of its own, then a rename: no reader sees
    half a file, and writers in other processes never share a temporary file), with the mode any other file
    created here gets (0666 less the umask: one mode for every file of a report, which a web server may serve)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, _created_mode())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _created_mode() -> int:
    """The mode a file created here would get: 0666 less the process's umask (read without changing it)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return 0o666 & ~int(line.split()[1], 8)
    except OSError:
        pass
    return 0o644


def read_rows(path: Path) -> list[dict[str, Any]]:
    """All complete rows, each brought to the current schema (``records.migrate``); a torn last line (a run
    killed mid-write) is skipped with a warning. ``SchemaError`` naming the file for a row of a newer schema."""
    if not path.exists():
        return []
    with jsonlines.open(path) as reader:
        rows = list(_iter_valid(reader, path))
    try:
        return [migrate(row) for row in rows]
    except SchemaError as err:
        raise SchemaError(f"{path}: {err}") from None


def _iter_valid(reader: jsonlines.Reader, path: Path) -> Iterator[dict[str, Any]]:
    try:
        for row in reader.iter(type=dict, skip_invalid=True):
            yield row
    except jsonlines.InvalidLineError as err:
        logger.warning("%s: skipping an unreadable line (%s)", path, err)


def resume_key_of(row: dict[str, Any]) -> str:
    """The row's ``records.resume_key``: what ``--resume`` skips."""
    return resume_key(*(str(row.get(k)) for k in ("run", "problem", "sample", "sha256")))


SYNC_EVERY_S = 5.0  # the most seconds of rows a machine crash (not a killed run) can take back


_SURROGATES = re.compile("[\ud800-\udfff]")


class ResultsWriter:
    """Appends rows and hands each to the operating system at once, so a killed run loses only what was in
    flight; forces them onto the disk (fsync) at most every ``SYNC_EVERY_S`` seconds and on close, so a
    crash of the machine loses at most those seconds. An fsync per row cost a second each on a GPU machine's
    disk, most of a rescore's wall time."""

    def __init__(self, path: Path, sync_every_s: float = SYNC_EVERY_S) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        _drop_torn_tail(path)
        self.path, self.sync_every_s = path, sync_every_s
        self._file = path.open("a", encoding="utf-8")
        self._synced_at = time.monotonic()

    def write(self, row: dict[str, Any]) -> None:
        """Append ``row``. No string in it can stop the writer: a lone surrogate, which UTF-8 cannot hold, is
        written as U+FFFD (strings from a worker are made safe where they are read; this is the last guard)."""
        text = json.dumps(row, ensure_ascii=False, allow_nan=False)
        self._file.write(_SURROGATES.sub("\ufffd", text) + "\n")
        self._file.flush()
        if time.monotonic() - self._synced_at >= self.sync_every_s:
            self._sync()

    def close(self) -> None:
        if not self._file.closed:
            self._sync()
            self._file.close()

    def _sync(self) -> None:
        os.fsync(self._file.fileno())
        self._synced_at = time.monotonic()

    def __enter__(self) -> "ResultsWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _drop_torn_tail(path: Path) -> None:
    if not path.exists() or path.stat().st_size == 0:
        return
    data = path.read_bytes()
    if data.endswith(b"\n"):
        return
    keep = data.rfind(b"\n") + 1
    logger.warning("%s: dropping a partly written last row (%d bytes)", path, len(data) - keep)
    with path.open("r+b") as handle:
        handle.truncate(keep)
