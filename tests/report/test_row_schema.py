"""Rows of every schema version ever written are read as today's (one migration step per version); a row of a
newer schema is refused with the file named; and docs/report-schema.md lists exactly the rows' fields."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from evalkit.records import MIGRATIONS, SCHEMA_VERSION, ResultRow, SchemaError, migrate
from evalkit.results_file import read_rows

ROOT = Path(__file__).resolve().parents[2]
IDENTITY = {"run": "m", "problem": "p", "sample": "s", "path": "a.md", "sha256": "0" * 64, "verdict": "correct",
            "reason": ""}
TIMING = {"count": 10, "median_ms": 1.0}

# One row as each schema version wrote it (the fields that version had and later ones changed).
ROW_OF_VERSION = {
    1: {**IDENTITY, "schema_version": 1, "timing": {**TIMING, "observed_median_ms": 1.1},
        "speedup_vs_eager": 2.0},
    2: {**IDENTITY, "schema_version": 2, "timing": {**TIMING, "clock": "judge"}, "speedup_vs_eager": 2.0},
    3: {**IDENTITY, "schema_version": 3, "timing": {**TIMING, "clock": "judge"}, "speedup_vs_eager": 2.0,
        "speedup_vs_eager_ci": [1.9, 2.1], "speedup_vs_compile_ci": None,
        "correctness": {"rel_l2_err": 1e-7, "pytorch_float32": {"rel_l2_err": 1e-8}}},
    4: {**IDENTITY, "schema_version": 4, "timing": {**TIMING, "clock": "judge", "overhead_pings": 25},
        "speedup_vs_eager": 2.0, "speedup_vs_eager_ci": [1.9, 2.1], "speedup_vs_compile_ci": None, "precision": "bf16",
        "correctness": {"rel_l2_err": 1e-3, "pytorch_own": {"rel_l2_err": 1e-3}},
        "baselines": {"eager": {**TIMING, "clock": "judge", "overhead_pings": None}}},
    5: {**IDENTITY, "schema_version": 5, "timing": {**TIMING, "clock": "judge", "overhead_requests": 25},
        "speedup_vs_eager": 2.0, "speedup_vs_eager_ci": [1.9, 2.1], "speedup_vs_compile_ci": None, "precision": "fp32",
        "correctness": {"rel_l2_err": 1e-7, "pytorch_own": {"rel_l2_err": 1e-7}}},
    6: {**IDENTITY, "schema_version": 6, "timing": {**TIMING, "clock": "judge", "overhead_requests": 25},
        "speedup_vs_eager": 2.0, "speedup_vs_eager_ci": [1.9, 2.1], "speedup_vs_compile_ci": None, "precision": "bf16",
        "problem_sha256": "ab" * 32, "correctness": {"rel_l2_err": 1e-3, "pytorch_own": {"rel_l2_err": 1e-3}}},
}


def test_every_version_ever_written_has_a_row_here_and_a_step_to_the_next():
    assert set(ROW_OF_VERSION) == set(range(1, SCHEMA_VERSION + 1))
    assert set(MIGRATIONS) == set(range(1, SCHEMA_VERSION))


@pytest.mark.parametrize("version", sorted(ROW_OF_VERSION))
def test_a_row_of_any_version_reads_as_todays(version):
    row = migrate(ROW_OF_VERSION[version])
    assert row["schema_version"] == SCHEMA_VERSION
    assert row.get("migrated_from") == (version if version < SCHEMA_VERSION else None)
    assert "speedup_vs_eager_ci" in row and "speedup_vs_compile_ci" in row
    assert row["timing"]["clock"] in ("judge", "worker") and row["speedup_vs_eager"] == 2.0
    assert ResultRow.from_dict(ROW_OF_VERSION[version]).schema_version == SCHEMA_VERSION
    assert ResultRow.from_dict(ROW_OF_VERSION[version]).to_dict()["timing"]["median_ms"] == 1.0  # and writes back


def test_a_schema_3_row_was_judged_in_fp32_and_its_pytorch_error_is_pytorchs_own():
    row = migrate(ROW_OF_VERSION[3])
    assert row["precision"] == "fp32"
    assert row["correctness"] == {"rel_l2_err": 1e-7, "pytorch_own": {"rel_l2_err": 1e-8}}
    assert migrate(ROW_OF_VERSION[4])["precision"] == "bf16"
    assert "pytorch_float32" in ROW_OF_VERSION[3]["correctness"]  # the row given is not changed


def test_a_schema_4_rows_overhead_pings_are_its_overhead_requests():
    row = migrate(ROW_OF_VERSION[4])
    assert row["timing"]["overhead_requests"] == 25 and "overhead_pings" not in row["timing"]
    assert row["baselines"]["eager"]["overhead_requests"] is None
    assert "overhead_pings" in ROW_OF_VERSION[4]["timing"]  # the row given is not changed


def test_a_row_before_schema_6_names_no_version_of_its_problem():
    assert all(migrate(ROW_OF_VERSION[version])["problem_sha256"] is None for version in range(1, 6))
    assert migrate(ROW_OF_VERSION[6])["problem_sha256"] == "ab" * 32
    assert ResultRow.from_dict(ROW_OF_VERSION[5]).problem_sha256 is None


def test_a_schema_1_time_says_whose_clock_it_was():
    worker = migrate(ROW_OF_VERSION[1])
    judge = migrate({**ROW_OF_VERSION[1], "flags": ["timing_mismatch"]})
    assert (worker["timing"]["clock"], judge["timing"]["clock"]) == ("worker", "judge")
    assert ROW_OF_VERSION[1]["timing"].get("clock") is None  # the row given is not changed


def test_a_row_of_a_newer_schema_is_refused_with_its_file_named(tmp_path):
    from evalkit.cli.main import main

    folder = tmp_path / "report"
    folder.mkdir()
    rows = [ROW_OF_VERSION[SCHEMA_VERSION], {**ROW_OF_VERSION[SCHEMA_VERSION], "schema_version": SCHEMA_VERSION + 1}]
    (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(SchemaError, match=f"results.jsonl: a row of schema version {SCHEMA_VERSION + 1}"):
        read_rows(folder / "results.jsonl")
    result = CliRunner().invoke(main, ["report", str(folder)])
    assert result.exit_code == 1 and "upgrade evalkit" in result.output, result.output


def test_the_summary_says_which_versions_were_on_disk(tmp_path):
    from evalkit.report.summary import write_reports

    folder = tmp_path / "report"
    folder.mkdir()
    (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROW_OF_VERSION.values()))
    write_reports(folder)
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["results_schema_versions"] == sorted(ROW_OF_VERSION)


def test_the_documented_row_fields_are_the_records_fields():
    text = (ROOT / "docs" / "report-schema.md").read_text()
    table = text[text.index("## `results.jsonl` rows"):]
    table = table[:table.index("\n\n", table.index("| --- |"))]
    documented = {name for line in table.splitlines()[2:] if line.startswith("| `")
                  for name in re.findall(r"`([a-z_0-9]+)`", line.split("|")[1])}
    fields = {f.name for f in dataclasses.fields(ResultRow)}
    assert documented - {"answer"} == fields, (sorted(documented - fields), sorted(fields - documented))


def test_the_documented_files_are_the_ones_results_file_names():
    import evalkit.results_file as files

    names = {value for name, value in vars(files).items() if name.endswith(("_FILE", "_DIR"))}
    text = (ROOT / "docs" / "report-schema.md").read_text()
    table = text[:text.index("\n\n", text.index("| file | what it is |"))]
    documented = {re.split(r"[/<]", cell)[0].rstrip("/") for cell in re.findall(r"^\| `([^`]+)`", table, re.M)}
    assert documented == names, "docs/report-schema.md's table of files and evalkit/results_file.py's names differ"


def test_every_file_of_a_report_folder_is_written_whole_with_one_mode(tmp_path):
    import stat

    from evalkit.report.summary import write_reports
    from evalkit.results_file import write_file

    folder = tmp_path / "report"
    folder.mkdir()
    (folder / "results.jsonl").write_text(json.dumps(ROW_OF_VERSION[SCHEMA_VERSION]) + "\n")
    write_reports(folder)
    write_file(folder / "baselines.json", "{}")
    modes = {path.name: stat.S_IMODE(path.stat().st_mode) for path in folder.rglob("*") if path.is_file()}
    assert len(set(modes.values())) == 1 and next(iter(modes.values())) & stat.S_IROTH, modes
    assert not [p for p in folder.rglob("*") if p.name.endswith(".tmp")]  # no temporary file left behind
