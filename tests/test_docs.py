"""The GPU records the docs and code cite exist, each record is listed in the records' index, and each names the
row archives and logs it keeps out of git by sha256."""

from __future__ import annotations

import fnmatch
import re

import pytest

from conftest import ROOT
from tracked_files import is_git_checkout, tracked_sizes

RECORDS = ROOT / "docs" / "gpu-runs"
CITED = re.compile(r"gpu-runs/(\d{4}-\d{2}-\d{2}-[a-z0-9-]*[a-z0-9])")


def _citing_files() -> list:
    places = [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "evalkit").rglob("*.py"),
              *(ROOT / "benchmarks").glob("*.py"), *(ROOT / "tests").rglob("*.py")]
    return [path for path in places if path.is_file()]


def test_every_cited_gpu_record_exists():
    missing = {(path.relative_to(ROOT).as_posix(), name) for path in _citing_files()
               for name in CITED.findall(path.read_text()) if not (RECORDS / name).is_dir()}
    assert not missing, f"cited GPU records that are not in docs/gpu-runs: {sorted(missing)}"


def test_every_gpu_record_is_in_the_index():
    index = (RECORDS / "README.md").read_text()
    unlisted = [d.name for d in RECORDS.iterdir() if d.is_dir() and f"`{d.name}/`" not in index]
    assert not unlisted, f"add these records to docs/gpu-runs/README.md: {unlisted}"


# ---- records keep row archives and logs out of git, named by sha256 ------------------------------------------------

OUT_OF_GIT = (".tar.gz", ".log", ".out", ".err")  # row archives and logs: listed by sha256, never tracked
NAMED = re.compile(r"`([\w.*-]+(?:" + "|".join(re.escape(s) for s in OUT_OF_GIT) + r"))`")
LISTED = re.compile(r"^\| `([^`]+)` \| (\d+) \| `([0-9a-f]{64})` \|$", re.MULTILINE)
BY_SHA = re.compile(r"`sha256:([0-9a-f]{16,64})`")


def _readmes() -> list:
    return sorted(RECORDS.glob("*/README.md"))


def out_of_git(readme_text: str) -> dict[str, str]:
    """The "Out of git" table of a record's README: each file's name and sha256."""
    section = readme_text.split("\n## Out of git\n", 1)
    return {name: sha for name, _, sha in LISTED.findall(section[1])} if len(section) == 2 else {}


def test_every_archive_or_log_a_record_names_is_listed_by_sha256() -> None:
    unlisted = set()
    for readme in _readmes():
        text = readme.read_text()
        listed = out_of_git(text)
        prose = "".join(text.split("```")[0::2])  # a command in a code block may name what it writes
        for name in NAMED.findall(prose):
            if not any(fnmatch.fnmatchcase(entry, name) for entry in listed):
                unlisted.add((readme.parent.name, name))
    assert not unlisted, f"list these in the record's '## Out of git' table (name, bytes, sha256): {sorted(unlisted)}"


def test_every_archive_named_by_sha256_is_in_a_records_table() -> None:
    listed = {sha for readme in _readmes() for sha in out_of_git(readme.read_text()).values()}
    unknown = [(readme.parent.name, prefix) for readme in _readmes() for prefix in BY_SHA.findall(readme.read_text())
               if not any(sha.startswith(prefix) for sha in listed)]
    assert not unknown, f"sha256 prefixes no record's 'Out of git' table holds: {unknown}"
    assert listed, "no record lists a file kept out of git: the tables' format changed?"


@pytest.mark.skipif(not is_git_checkout(ROOT), reason="not a git checkout: no tracked files to check")
def test_gpu_records_track_no_row_archive_or_log() -> None:
    records = RECORDS.relative_to(ROOT).as_posix() + "/"
    tracked = [path for path in tracked_sizes(ROOT) if path.startswith(records) and path.endswith(OUT_OF_GIT)]
    assert not tracked, (f"row archives and logs stay out of git: git rm --cached them and list each in its record's "
                         f"'## Out of git' table by sha256 (docs/gpu-runs/README.md): {tracked}")
