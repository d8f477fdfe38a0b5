"""``ReportFolder``: one run at a time writes a report folder (a second is refused, naming the first), and what it
writes there (rows, baselines, pages) it writes whole."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import prose_answer_options
from evalkit.report_folder import ReportFolder, ReportFolderBusy, ReportFolderError
from evalkit.results_file import BASELINES_FILE, DETAIL_DIR, LOCK_FILE, RESULTS_FILE, read_rows

_HOLDER = """
import sys
from evalkit.report_folder import ReportFolder
folder = ReportFolder.open(sys.argv[1])
print("held", flush=True)
sys.stdin.readline()  # until the test lets go
folder.close()
"""


def test_a_second_opening_is_refused_naming_the_run_that_holds_the_folder(tmp_path: Path) -> None:
    out = tmp_path / "report"
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(out)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(ReportFolderBusy, match=rf"another run is writing this report folder \(pid {holder.pid} "):
            ReportFolder.open(out)
    finally:
        holder.stdin.close()  # it closes the folder and ends
        assert holder.wait(timeout=60) == 0
    with ReportFolder.open(out) as folder:  # let go: the next run takes it
        folder.add_row({"problem": "p"})


def test_a_holder_that_dies_leaves_the_folder_free(tmp_path: Path) -> None:
    out = tmp_path / "report"
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(out)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    holder.kill()
    holder.wait(timeout=60)
    ReportFolder.open(out).close()  # the kernel let the lock go with its holder


def test_within_one_process_the_folder_is_held_once_too(tmp_path: Path) -> None:
    with ReportFolder.open(tmp_path / "report") as first:
        first.add_row({"problem": "p"})
        with pytest.raises(ReportFolderBusy):
            ReportFolder.open(tmp_path / "report")
    assert [row["problem"] for row in read_rows(tmp_path / "report" / RESULTS_FILE)] == ["p"]


def test_a_folder_it_made_and_left_empty_is_removed_and_one_that_is_a_file_is_refused(tmp_path: Path) -> None:
    ReportFolder.open(tmp_path / "empty").close()
    assert not (tmp_path / "empty").exists()  # a run refused before it wrote anything leaves nothing behind
    (tmp_path / "kept").mkdir()
    ReportFolder.open(tmp_path / "kept").close()
    assert (tmp_path / "kept").is_dir() and [p.name for p in (tmp_path / "kept").iterdir()] == [LOCK_FILE]
    (tmp_path / "file").write_text("")
    with pytest.raises(ReportFolderError, match="that is a file, not a report folder"):
        ReportFolder.open(tmp_path / "file")
    with pytest.raises(ReportFolderError, match="no such report folder"):
        ReportFolder.open(tmp_path / "missing", create=False)


def test_baselines_are_recorded_as_the_run_asked_and_given_back_by_problem(tmp_path: Path) -> None:
    with ReportFolder.open(tmp_path / "report") as folder:
        folder.add_baselines({"key": "k1", "problem": "p", "eager": {"median_ms": 1.0},
                              "compile": {"median_ms": 0.5}}, kinds=("eager",))
        folder.add_baselines({"key": "k1", "problem": "p", "compile": {"median_ms": 0.5}}, kinds=("compile",))
        folder.add_baselines({"key": "k2", "problem": "q", "eager": {"median_ms": 2.0}}, kinds=("eager",))
        folder.add_baselines({"problem": "r", "eager": {}}, kinds=("eager",))  # no key: nothing to file it under
        assert set(folder.baselines_of("p")) == {"k1"} and folder.baselines_of("r") == {}
        assert folder.baselines_of("p")["k1"]["compile"] == {"median_ms": 0.5}  # asked for the second time
    entries = json.loads((tmp_path / "report" / BASELINES_FILE).read_text())
    assert set(entries) == {"k1", "k2"} and entries["k1"]["eager"] == {"median_ms": 1.0}


def test_pages_replace_the_stale_ones(tmp_path: Path) -> None:
    with ReportFolder.open(tmp_path / "report") as folder:
        folder.write_pages({"rows": 2}, "<html>", {"a.html": "A", "b.html": "B"})
        index = folder.write_pages({"rows": 1}, "<html>", {"a.html": "A2"})
    assert index.read_text() == "<html>"
    assert sorted(p.name for p in (tmp_path / "report" / DETAIL_DIR).iterdir()) == ["a.html"]


def test_a_score_into_a_folder_another_run_writes_is_refused_before_anything_starts(tmp_path: Path) -> None:
    from evalkit.schedule.local import score

    options = prose_answer_options(tmp_path)
    with ReportFolder.open(options.out_dir):
        with pytest.raises(ReportFolderBusy, match="another run is writing this report folder"):
            score(options)
    assert not (options.out_dir / RESULTS_FILE).exists()
