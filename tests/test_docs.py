"""The GPU records the docs and code cite exist, and each record is listed in the records' index."""

from __future__ import annotations

import re

from conftest import ROOT

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
