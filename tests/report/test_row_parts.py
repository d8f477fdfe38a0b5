"""A row's sub-records have their keys declared once (evalkit/row_parts.py): a row is written with no other key,
rows of every schema ever written still read and write back, and docs/report-schema.md names exactly the declared
keys."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from evalkit.records import FLAG_INFO, ResultRow, Verdict, migrate
from evalkit.row_parts import (LEGACY_KEYS, PARTS, BaselineEntry, TimingRecord, baseline_entry, check_parts, declared,
                               part)

ROOT = Path(__file__).resolve().parents[2]
IDENTITY = {"run": "m", "problem": "p", "sample": "s", "path": "a.md", "sha256": "0" * 64, "verdict": "correct",
            "reason": ""}
# Backticked words of a sub-record's cell that are no key of it: JSON's null, a flag, a setting, a renamed key,
# another sub-record referred to.
NOT_KEYS = {"null", "timing_trials", "pytorch_float32", *(f.value for f in FLAG_INFO), *PARTS}


def _row(**parts: object) -> ResultRow:
    return ResultRow(**IDENTITY, **parts)  # type: ignore[arg-type]


# ---- written through one place ------------------------------------------------------------------------------------

@pytest.mark.parametrize("parts, where", [
    ({"timing": {"median_ms": 1.0, "fastest_ms": 0.5}}, "'timing' has the undeclared key 'fastest_ms'"),
    ({"timing": {"median_ms": 1.0, "speedup": {"vs": "eager", "value": 2.0, "ci": [1, 3], "pairs": 9, "p": 0}}},
     "'timing.speedup' has the undeclared key 'p'"),
    ({"build": {"status": "compile_error", "errors": [{"file": "a.cu", "line": 3, "column": 1}]}},
     "'build.errors' has the undeclared key 'column'"),
    ({"baselines": {"device_name": "cpu", "eager": {"median_ms": 1.0, "cold_ms": 2.0}}},
     "'baselines.eager' has the undeclared key 'cold_ms'"),
    ({"baselines": {"device_name": "cpu", "torch_version": "2"}}, "'baselines' has the undeclared key 'torch_version'"),
    ({"error": {"kind": "runtime_error", "traceback": [{"file": "x.py", "locals": {}}]}},
     "'error.traceback' has the undeclared key 'locals'"),
    ({"correctness": {"trials": 3, "pytorch_own": {"rel_l2_err": 0.0, "ulp": 1}}},
     "'correctness.pytorch_own' has the undeclared key 'ulp'"),
    ({"extraction": {"ok": True, "block": {"index": 0, "lang": "py"}}}, "'extraction.block' has the undeclared key"),
])
def test_a_key_declared_nowhere_is_refused_when_the_row_is_written(parts, where):
    row = _row(**parts)
    with pytest.raises(ValueError, match=re.escape(where)) as refused:
        row.to_dict()
    assert "evalkit/row_parts.py" in str(refused.value) and "docs/report-schema.md" in str(refused.value)


def test_every_declared_key_is_written():
    def full(record: type) -> dict[str, object]:
        values: dict[str, object] = {}
        for key, nested in declared(record).items():
            values[key] = full(nested) if nested is not None else 1
        return values

    parts = {name: full(record) for name, record in PARTS.items()}
    parts["build"]["errors"] = [full(declared(PARTS["build"])["errors"])]  # type: ignore[index]
    assert _row(**parts).to_dict()["timing"]["speedup"]["vs"] == 1


def test_the_judges_rows_are_written_through_to_dict():
    """``ResultRow.to_dict`` is the one place a row becomes a ``results.jsonl`` object: the scoring run and the API
    write nothing else."""
    writes = re.compile(r"folder\.add_row\((.*)\)$|yield (.*)\.to_dict\(\)$")
    found = [(path.name, m[1] or m[2]) for path in (ROOT / "evalkit").rglob("*.py")
             for line in path.read_text().splitlines() if (m := writes.search(line.strip()))]
    assert {name for name, _ in found} == {"local.py", "evaluator.py"}, found  # evalkit score; the Python API
    assert all(what.endswith(".to_dict()") for name, what in found if name == "local.py"), found


# ---- old rows still read, and write back --------------------------------------------------------------------------

def _recorded_rows() -> list[dict]:
    """Every row the repository's GPU records and benchmarks hold, of every schema they were written in."""
    rows = []
    for path in [*(ROOT / "docs" / "gpu-runs").rglob("*.jsonl"), *(ROOT / "benchmarks").rglob("*.jsonl")]:
        for line in path.read_text().splitlines():
            row = json.loads(line) if line.strip().startswith("{") else None
            if isinstance(row, dict) and "verdict" in row:
                rows.append(row)
    return rows


def test_every_recorded_row_of_every_schema_has_only_declared_keys():
    rows = _recorded_rows()
    assert {row.get("schema_version", 1) for row in rows} >= {1, 2, 4}
    for row in rows:
        check_parts(migrate(row))


def test_a_schema_1_row_with_its_old_timing_keys_reads_and_writes_back():
    old = {**IDENTITY, "timing": {"count": 5, "median_ms": 1.0, "observed_median_ms": 1.1, "reported_median_ms": 0.2,
                                  "copy_ms": 0.01, "ping_ms": 0.02},
           "baselines": {"device_name": "cpu", "eager": {"median_ms": 2.0, "observed_median_ms": 2.1}},
           "correctness": {"trials": 5, "pytorch_float32": {"rel_l2_err": 1e-8}}}
    written = ResultRow.from_dict(old).to_dict()
    assert written["timing"]["observed_median_ms"] == 1.1 and written["timing"]["clock"] == "worker"
    assert written["correctness"]["pytorch_own"] == {"rel_l2_err": 1e-8}
    assert set(LEGACY_KEYS["timing"]) <= set(written["timing"])


# ---- read through one place ---------------------------------------------------------------------------------------

def test_a_sub_record_reads_as_itself_or_empty():
    row = {"timing": {"median_ms": 1.0}, "build": None, "error": "not an object",
           "baselines": {"eager": {"median_ms": 2.0}, "compile": "bad"}}
    assert part(row, "timing") == {"median_ms": 1.0}
    assert part(row, "build") == {} and part(row, "error") == {} and part(row, "correctness") == {}
    assert baseline_entry(row, "eager") == {"median_ms": 2.0} and baseline_entry(row, "compile") == {}
    with pytest.raises(KeyError, match="not a row sub-record"):
        part(row, "timings")  # type: ignore[call-overload]


# ---- docs/report-schema.md names the declared keys --------------------------------------------------------------

def _keys(record: type, inherited: frozenset[str] = frozenset()) -> set[str]:
    """Every key ``record`` declares, nested ones too; the keys a baseline entry shares with ``timing`` left out of
    what ``inherited`` names (the baselines cell refers to ``timing``'s)."""
    found = set()
    for key, nested in declared(record).items():
        if key in inherited:
            continue
        found.add(key)
        if nested is not None:
            found |= _keys(nested, frozenset(declared(TimingRecord)) if nested is BaselineEntry else inherited)
    return found


def _cells() -> dict[str, str]:
    text = (ROOT / "docs" / "report-schema.md").read_text()
    table = text[text.index("## `results.jsonl` rows"):]
    cells = {}
    for line in table.splitlines():
        found = re.match(r"\| `(\w+)` \| (.*) \|$", line)
        if found and found[1] in PARTS:
            cells[found[1]] = found[2]
    return cells


@pytest.mark.parametrize("name", sorted(PARTS))
def test_the_docs_name_every_declared_key_of_each_sub_record_and_no_other(name):
    cell = _cells()[name]
    named = set(re.findall(r"`([a-z_0-9]+)`", cell))  # a key is backticked bare; a value in quotes: `"ok"`
    legacy = {key for path, keys in LEGACY_KEYS.items() if path.split(".")[0] == name for key in keys}
    required = _keys(PARTS[name]) | (legacy if name == "timing" else set())
    allowed = _keys(PARTS[name]) | legacy | (_keys(BaselineEntry) if name == "baselines" else set())
    assert not required - named, f"docs/report-schema.md's {name!r} cell lacks {sorted(required - named)}"
    assert not named - allowed - NOT_KEYS, \
        f"docs/report-schema.md's {name!r} cell names {sorted(named - allowed - NOT_KEYS)}, declared nowhere"


def test_every_sub_record_has_its_docs_cell():
    assert set(_cells()) == set(PARTS)


def test_the_report_reads_a_sub_record_only_through_part():
    direct = re.compile(r"\b(row|r|best)(\.get\(|\[)\"(" + "|".join(PARTS) + r")\"")
    found = [f"{path.relative_to(ROOT)}: {line.strip()}"
             for path in [*(ROOT / "evalkit" / "report").rglob("*.py"), ROOT / "evalkit" / "kernelbench.py"]
             for line in path.read_text().splitlines() if direct.search(line)]
    assert not found, found


# ---- a new verdict: at most three places ---------------------------------------------------------------------------

def test_every_verdict_is_documented_coloured_and_exported():
    from evalkit.records import VERDICT_INFO, Verdict
    from evalkit.report.html.assets import CSS
    from evalkit.report.kernelbench_export import _error_metadata

    text = (ROOT / "docs" / "report-schema.md").read_text()
    rows_table = text[text.index("## `results.jsonl` rows"):]
    verdict_row = next(line for line in rows_table.splitlines() if line.startswith("| `verdict` |"))
    assert set(re.findall(r"`([a-z_]+)`", verdict_row.split("|")[2])) == {v.value for v in Verdict}
    for verdict, info in VERDICT_INFO.items():
        assert f".v-{verdict.value}{{background:{info.colour}}}" in CSS
        metadata = _error_metadata({**IDENTITY, "verdict": verdict.value, "reason": "why"})
        assert (metadata.get(info.kernelbench) == "why") if info.kernelbench else metadata == {}
    # named as KernelBench names the exception: a failed torch build raises RuntimeError
    assert _error_metadata({"verdict": "compile_error", "reason": ""})["compilation_error_name"] == "builtins.RuntimeError"
    assert _error_metadata({"verdict": "no_code", "reason": ""})["compilation_error_name"] == "SyntaxError"  # its own
    assert _error_metadata({"verdict": "crash", "reason": ""})["runtime_error_name"] == "evalkit.crash"  # no exception


def test_the_readme_and_the_judge_page_name_every_verdict():
    """The two other pages that list verdicts (``docs/changes.md``, A new verdict, item 3, names them)."""
    readme = (ROOT / "README.md").read_text()
    sentence = readme[readme.index("Each row has a `verdict`, in pipeline order:"):]
    sentence = sentence[:sentence.index(".")]
    assert re.findall(r"`([a-z_]+)`", sentence)[1:] == [v.value for v in Verdict], "README's list of verdicts"
    judge_page = (ROOT / "docs" / "judge.md").read_text()
    stage_rows = [line for line in judge_page.splitlines() if line.startswith("| ") and line.count("|") == 5]
    in_table = {word for line in stage_rows for word in re.findall(r"`([a-z_]+)`", line.split("|")[4])}
    assert in_table == {v.value for v in Verdict}, "docs/judge.md's table of stages and their verdicts"


def test_the_places_a_new_verdict_touches_are_at_most_three():
    text = (ROOT / "docs" / "changes.md").read_text()
    section = text[text.index("## A new verdict"):]
    section = section[:section.index("\n## ")]
    places = re.findall(r"^\d+\. `([^`]+)`", section, re.M)
    assert 0 < len(places) <= 3, places
    assert places == ["evalkit/records.py", "evalkit/judge/verdicts.py", "docs/report-schema.md"]
