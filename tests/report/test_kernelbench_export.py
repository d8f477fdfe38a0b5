"""KernelBench's eval_results.json from a report's rows: its shape (problem number -> samples), where each
row's number comes from, and the errors when the rows are not one run of one level."""

from __future__ import annotations

import copy
import json
import logging
from pathlib import Path

import pytest

from conftest import FIXTURES
from evalkit.report.kernelbench_export import ExportError, eval_results, write_eval_results
from evalkit.results_file import EVAL_RESULTS_FILE

FIELDS = {"sample_id", "compiled", "correctness", "metadata", "runtime", "runtime_stats"}
ROWS = [json.loads(line) for line in (FIXTURES / "reports" / "results.jsonl").read_text().splitlines()]


def _like(verdict: str, **changes) -> dict:
    """A copy of the fixture's first row with ``verdict``, changed as given."""
    row = copy.deepcopy(next(r for r in ROWS if r["verdict"] == verdict))
    row.update(changes)
    return row


def _kernel(verdict: str, level: int, number: int, sample: int, problem: str = "p", run: str = "kb_run",
            **changes) -> dict:
    path = f"runs/{run}/level_{level}_problem_{number}_sample_{sample}_kernel.py"
    return _like(verdict, run=run, problem=problem, sample=str(sample), path=path, **changes)


def test_the_shape_is_kernelbench_s() -> None:
    rows = [_kernel("correct", 1, 10, 1, "l1_10_x"), _kernel("incorrect", 1, 10, 0, "l1_10_x"),
            _kernel("compile_error", 1, 2, 0, "two"), _kernel("crash", 1, 2, 1, "two"),
            _kernel("correct", 1, 2, 2, "two", flags=["implausible_speedup"])]
    data = eval_results(rows)
    assert list(data) == ["2", "10"]
    assert [e["sample_id"] for e in data["10"]] == [0, 1] and [e["sample_id"] for e in data["2"]] == [0, 1, 2]
    assert all(set(entry) == FIELDS for entries in data.values() for entry in entries)
    correct, incorrect = data["10"][1], data["10"][0]
    timing = rows[0]["timing"]
    assert (correct["compiled"], correct["correctness"], correct["runtime"]) == (True, True, timing["mean_ms"])
    assert correct["runtime_stats"] == {"mean": timing["mean_ms"], "std": timing["std_ms"], "min": timing["min_ms"],
                                        "max": timing["max_ms"], "num_trials": timing["count"],
                                        "median": timing["median_ms"], "hardware": "NVIDIA H100 80GB HBM3",
                                        "device": "cuda"}
    assert correct["metadata"]["correctness_trials"] == "(5 / 5)"
    assert correct["metadata"]["evalkit"]["verdict"] == "correct" and correct["metadata"]["evalkit"]["run"] == "kb_run"
    assert (incorrect["compiled"], incorrect["correctness"], incorrect["runtime"], incorrect["runtime_stats"]) == \
        (True, False, -1.0, {})
    assert incorrect["metadata"]["correctness_issue"] == rows[1]["reason"]
    failed_build, crashed, implausible = data["2"]
    assert failed_build["compiled"] is False and failed_build["metadata"]["compilation_error_name"] == "builtins.RuntimeError"
    assert crashed["correctness"] is False and "runtime_error" in crashed["metadata"]
    assert implausible["metadata"]["excessive_speedup"] is True
    json.dumps(data, allow_nan=False)


def test_where_the_number_comes_from() -> None:
    rows = [_like("correct", run="r", problem="alexnet_conv1", sample="0", path="x/alexnet_conv1/0.txt"),
            _like("correct", run="r", problem="l1_19_relu", sample="3", path="x/l1_19_relu/3.txt"),
            _like("correct", run="r", problem="q", sample="0", path="x/q/0.txt", kernelbench={"level": 1, "number": 7}),
            _kernel("correct", 1, 5, 2, problem="five", run="r")]
    data = eval_results(rows, numbers={"alexnet_conv1": (1, 50)})
    assert {key: [e["sample_id"] for e in entries] for key, entries in data.items()} == \
        {"5": [2], "7": [0], "19": [3], "50": [0]}


def test_rows_without_a_number_keep_their_problem_id_and_are_warned_about(caplog) -> None:
    rows = [r for r in ROWS if r["run"] == "model-a"]
    with caplog.at_level(logging.WARNING):
        data = eval_results(rows)
    assert list(data) == ["1_matmul", "2_relu", "3_softmax", "4_conv2d"]
    assert [e["sample_id"] for e in data["1_matmul"]] == [0, 1, 2]
    assert "no KernelBench problem number is known for problem(s) 1_matmul, 2_relu" in caplog.text


def test_samples_that_are_not_numbers_get_the_free_ones_in_order() -> None:
    rows = [_like("correct", run="r", problem="l1_3_x", sample=name, path=f"x/{name}.txt") for name in ("b", "1", "a")]
    assert [(e["sample_id"], e["metadata"]["evalkit"]["sample"]) for e in eval_results(rows)["3"]] == \
        [(0, "a"), (1, "1"), (2, "b")]


def test_one_run_one_level() -> None:
    with pytest.raises(ExportError, match=r"2 runs \(model-a, model-b\).*run=\.\.\."):
        eval_results(ROWS)
    assert {e["metadata"]["evalkit"]["run"] for es in eval_results(ROWS, run="model-b").values() for e in es} == \
        {"model-b"}
    curated_too = [_kernel("correct", 1, 1, 0), _kernel("correct", 1, 1, 0, run="curated")]
    assert [e["metadata"]["evalkit"]["run"] for e in eval_results(curated_too)["1"]] == ["kb_run"]
    with pytest.raises(ExportError, match="no rows of run 'nope'"):
        eval_results(ROWS, run="nope")
    levels = [_kernel("correct", 1, 1, 0, "a"), _kernel("correct", 2, 1, 0, "b")]
    with pytest.raises(ExportError, match=r"KernelBench levels 1, 2.*level=\.\.\."):
        eval_results(levels)
    assert eval_results(levels, level=2)["1"][0]["metadata"]["evalkit"]["problem"] == "b"


def test_the_last_row_of_a_key_wins() -> None:
    rows = [_kernel("incorrect", 1, 4, 0), _kernel("correct", 1, 4, 0)]
    assert eval_results(rows)["4"][0]["correctness"] is True


def test_write_eval_results(tmp_path: Path) -> None:
    rows = [_kernel("correct", 1, 4, 0), _kernel("crash", 1, 4, 1)]
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"torn')
    written = write_eval_results(tmp_path)
    assert written == tmp_path / EVAL_RESULTS_FILE
    text = written.read_text()
    assert text.startswith('{\n    "4": [\n        {\n            "sample_id": 0,') and text.endswith("}\n")
    assert json.loads(text) == eval_results(rows)
    elsewhere = write_eval_results(tmp_path, tmp_path / "kb" / "out.json")
    assert elsewhere == tmp_path / "kb" / "out.json" and json.loads(elsewhere.read_text()) == json.loads(text)
    with pytest.raises(ExportError, match=rf"{tmp_path / 'empty'}: no results.jsonl here"):
        write_eval_results(tmp_path / "empty")
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    (mixed / "results.jsonl").write_text((FIXTURES / "reports" / "results.jsonl").read_text())
    with pytest.raises(ExportError, match=rf"{mixed / 'results.jsonl'}: the rows hold 2 runs"):
        write_eval_results(mixed)
