"""Feedback for the model's next turn: what went wrong and where in the answer, or how fast it was; short, and
never a secret. And the hint of what a wrong output looks like, which the judge adds to the row."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from evalkit.judge.feedback import MAX_FEEDBACK, feedback_for
from evalkit.judge.tensor_check import compare_outputs
from evalkit.records import ResultRow

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "reports" / "results.jsonl"


def _rows() -> dict[str, ResultRow]:
    rows = {}
    for line in FIXTURE.read_text().splitlines():
        row = ResultRow.from_dict(json.loads(line))
        rows.setdefault(row.verdict, row)
    return rows


ROWS = _rows()


@pytest.mark.parametrize(("verdict", "says"), [
    ("no_code", ["No code was judged", "```python", "class ModelNew"]),
    ("syntax_error", ["SyntaxError at line 19", "def __init__(self)"]),
    ("compile_error", ["line 14 of the answer", "'y' was not declared", "return x * 2;"]),
    ("interface_error", ["interface error during interface", "takes 1 positional argument"]),
    ("runtime_error", ["NameError: name 'F' is not defined", "at line 23 of the answer, in forward"]),
    ("crash", ["crash during load", "Segmentation fault"]),
    ("incorrect", ["Output 0 (shape [8, 8]) is wrong: 64 of", "atol=0.01", "max abs difference 0.1",
                   "first wrong element at index [0, 0]"]),
    ("correct", ["Correct.", "1.50x vs PyTorch eager"]),
])
def test_each_verdict_says_what_went_wrong_and_where(verdict: str, says: list[str]) -> None:
    text = feedback_for(ROWS[verdict])
    for part in says:
        assert part in text, (part, text)
    assert "worker.py" not in text, "the harness's own frames are not the answer's"


def test_no_secret_reaches_the_feedback_and_it_stays_short() -> None:
    row = ResultRow.from_dict(ROWS["incorrect"].to_dict())
    row.correctness = {**row.correctness, "seed": 1571214227, "inputs_seed": 2318233093349897343,
                       "timing_inputs_seed": 2347771380996022755, "pattern": "off by a constant 0.5"}
    row.flags = ["implausible_speedup"] * 40
    text = feedback_for(row)
    assert not [s for s in ("1571214227", "2318233093349897343", "2347771380996022755") if s in text]
    assert "It looks like: off by a constant 0.5." in text
    assert "Flag implausible_speedup: faster than the problem's FLOP or byte floor" in text
    assert len(text) <= MAX_FEEDBACK and text.endswith("[... cut short]")


def test_a_correct_rows_feedback_names_its_interval_and_its_slowest_kernels() -> None:
    row = ResultRow.from_dict(ROWS["correct"].to_dict())
    row.speedup_vs_eager_ci = [1.4, 1.6]
    row.correctness = {**row.correctness, "kernel_us": {"small_kernel": 3.0, "conv_main_kernel": 677.0}}
    text = feedback_for(row)
    assert "(95% interval 1.40-1.60)" in text
    assert text.index("conv_main_kernel 677 us") < text.index("small_kernel 3 us")


@pytest.mark.parametrize(("wrong", "pattern"), [
    (lambda e: e + 0.5, "off by a constant 0.5"),
    (lambda e: e * 2.0, "scaled by a constant 2"),
    (lambda e: torch.zeros_like(e), "all zeros"),
    (lambda e: torch.where(e > 0, torch.nan, e), "NaN where the reference has none"),
    (lambda e: e.transpose(-1, -2).contiguous(), "the last two dimensions transposed"),
    (lambda e: torch.randn_like(e), ""),
])
def test_a_wrong_output_says_what_its_error_looks_like(wrong, pattern: str) -> None:
    expected = torch.randn(4, 16, 16, generator=torch.Generator().manual_seed(1)).double() + 3.0
    result = compare_outputs(wrong(expected).float(), expected, atol=1e-4, rtol=1e-4, expected_dtype=torch.float32)
    assert not result.ok and result.pattern == pattern
    assert result.mean_abs_err is not None  # over the elements both sides have finite
