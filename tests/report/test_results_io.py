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
