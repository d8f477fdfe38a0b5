"""results.jsonl survives a run killed mid-write, and resuming appends after the last whole row."""

from __future__ import annotations

import json
from pathlib import Path

from evalkit.results_file import ResultsWriter, read_rows, resume_key_of


def test_a_torn_last_row_is_dropped_and_writing_resumes_cleanly(tmp_path: Path):
    path = tmp_path / "results.jsonl"
    with ResultsWriter(path) as writer:
        writer.write({"run": "r", "problem": "p", "sample": "1", "sha256": "a"})
    with path.open("a") as handle:
        handle.write('{"run": "r", "problem": "p", "sam')  # killed mid-write
    assert [resume_key_of(r) for r in read_rows(path)] == ["r/p/1@a"]
    with ResultsWriter(path) as writer:
        writer.write({"run": "r", "problem": "p", "sample": "2", "sha256": "b"})
    lines = path.read_text().splitlines()
    assert [json.loads(line)["sample"] for line in lines] == ["1", "2"]


def test_missing_results_read_as_empty(tmp_path: Path):
    assert read_rows(tmp_path / "none.jsonl") == []


def test_each_row_is_readable_at_once_and_synced_to_disk_only_every_few_seconds(tmp_path: Path, monkeypatch):
    synced: list[int] = []
    monkeypatch.setattr("evalkit.results_file.os.fsync", lambda fd: synced.append(fd))
    path = tmp_path / "results.jsonl"
    writer = ResultsWriter(path, sync_every_s=3600)
    for n in range(3):
        writer.write({"run": "r", "problem": "p", "sample": str(n), "sha256": "a"})
        assert len(read_rows(path)) == n + 1  # handed to the OS: another process (or a resume) sees it
    assert synced == []  # a disk flush per row cost a second each on a GPU machine's disk
    writer.close()
    assert len(synced) == 1  # and everything is on the disk once the writer closes
    eager = ResultsWriter(tmp_path / "eager.jsonl", sync_every_s=0)
    eager.write({"run": "r"})
    eager.write({"run": "r"})
    assert len(synced) == 3
    eager.close()


def test_no_string_stops_the_writer_a_lone_surrogate_is_written_as_a_replacement(tmp_path: Path):
    with ResultsWriter(tmp_path / "results.jsonl") as writer:
        writer.write({"sample": "a", "reason": "bad \ud800 text"})
        writer.write({"sample": "b", "reason": "fine"})
    assert [r["reason"] for r in read_rows(tmp_path / "results.jsonl")] == ["bad \ufffd text", "fine"]
