"""Feedback for the model's next turn: what went wrong and where in the answer, or how fast it was; short, and
never a secret. And the hint of what a wrong output looks like, which the judge adds to the row."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from evalkit.judge.feedback import MAX_FEEDBACK, feedback_for
from evalkit.judge.tensor_check import compare_outputs
from evalkit.judge.verdicts import unreadable_row
from evalkit.records import ResultRow, Submission, Verdict, to_jsonable

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
    ("interface_error", ["Interface error: TypeError: ModelNew.__init__() takes 1 positional argument"]),
    ("runtime_error", ["NameError: name 'F' is not defined", "at line 23 of the answer, in forward"]),
    ("crash", ["Crash while importing the module", "Segmentation fault"]),
    ("incorrect", ["Output 0 (shape [8, 8]) is wrong in trial 1: 64 of", "atol=0.01", "max abs difference 0.1",
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
    assert "Pattern: off by a constant 0.5." in text
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


@pytest.mark.parametrize("verdict", [v.value for v in Verdict])
def test_every_verdict_has_feedback_even_with_nothing_in_its_row(verdict: str) -> None:
    row = ResultRow(run="r", problem="p", sample="s", path="p/s.py", sha256="0", verdict=verdict, reason="")
    text = feedback_for(row).strip()
    assert text and not text.endswith(":"), text  # something after the verdict's name, even with no reason given


def test_a_binary_files_row_says_why_no_code_was_judged() -> None:
    why = "s.py: looks like a binary file (NUL bytes), not a text answer"
    row = unreadable_row(Submission("r", "p", "s", "p/s.py", ""), why, "cpu")
    assert row.feedback and row.feedback.startswith(f"No code was judged: {why}")


@pytest.mark.parametrize(("verdict", "error", "says"), [
    ("runtime_error", {"kind": "runtime_error", "stage": "forward", "type": "RuntimeError",
                       "message": "RuntimeError: CUDA error: an illegal memory access was encountered",
                       "traceback": [{"file": "submission.py", "line": 30, "source_line": 41, "function": "forward",
                                     "in_submission": True, "text": "return ext.run(x)"}]},
     "Runtime error in forward: RuntimeError: CUDA error: an illegal memory access was encountered\n"
     "  at line 41 of the answer, in forward: return ext.run(x)"),
    ("interface_error", {"kind": "interface_error", "stage": "construct", "type": "TypeError",
                         "message": "ModelNew(*get_init_inputs()) failed: TypeError: __init__() missing 1 required "
                                    "positional argument: 'hidden'"},
     "Interface error while constructing ModelNew: ModelNew(*get_init_inputs()) failed: TypeError: __init__() "
     "missing 1 required positional argument: 'hidden'"),
    ("timeout", {"kind": "timeout", "message": "timeout: stage 'forward' exceeded its 8 s limit"},
     "Timeout: stage 'forward' exceeded its 8 s limit\nIt did not finish in time"),
    ("runtime_error", {"kind": "runtime_error", "stage": "load", "type": "ImportError", "message": "no module named x"},
     "Runtime error while importing the module: ImportError: no module named x"),
])
def test_an_errors_feedback_names_the_exception_once_and_the_answers_line(verdict: str, error: dict, says: str) -> None:
    row = ResultRow(run="r", problem="p", sample="s", path="p/s.py", sha256="0", verdict=verdict,
                    reason=error["message"], error=error)
    text = feedback_for(row)
    assert text.startswith(says), text
    for word in ("RuntimeError", "TypeError", "timeout", "ImportError"):
        assert text.lower().count(f"{word.lower()}:") <= 1, text


def _wrong_row(actual: torch.Tensor, expected: torch.Tensor) -> tuple[ResultRow, dict]:
    """The row the judge makes of a wrong output: its comparison as ``contender`` records it."""
    result = compare_outputs(actual, expected, atol=1e-2, rtol=1e-2, expected_dtype=actual.dtype)
    correctness = {"failed_trial": 1, "output_index": 0, "atol": 1e-2, "rtol": 1e-2, **to_jsonable(result)}
    row = ResultRow(run="r", problem="p", sample="s", path="p/s.py", sha256="0", verdict="incorrect",
                    reason=result.reason, correctness=correctness)
    return row, correctness


def test_a_wrong_output_names_the_slice_that_is_wrong_and_its_worst_values() -> None:
    # half its columns left zero, as a kernel launched over half the grid leaves them
    expected = torch.randn(64, 16384, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    actual = expected.float()
    actual[:, 8192:] = 0
    row, correctness = _wrong_row(actual, expected)
    text = feedback_for(row)
    assert "Pattern: columns 8192-16383 (out[:, 8192:16384]) are all zero; the rest matches the reference." in text
    worst = correctness["worst"]
    assert len(worst) == 4 and all(w["index"][1] >= 8192 and w["got"] == 0.0 for w in worst)
    assert [abs(w["expected"]) for w in worst] == sorted((abs(w["expected"]) for w in worst), reverse=True)
    assert abs(worst[0]["expected"]) == float(expected[:, 8192:].abs().max())  # the worst, read from the output
    first = worst[0]
    assert f"out{first['index']} {first['expected']:.6g} vs 0" in text
    assert "atol + rtol * |expected| (atol=0.01, rtol=0.01)" in text and len(text) <= MAX_FEEDBACK


@pytest.mark.parametrize(("wrong", "pattern"), [
    (lambda a: a[40:].fill_(float("nan")), "rows 40-63 (out[40:64]) are all NaN"),
    (lambda a: a[:, ::2].add_(1.0), "every 2nd column from 0 to 30 (out[:, 0:31:2]) are off by a constant 1"),
    (lambda a: a[0:8, 4:12].fill_(7.0), "rows 0-7, columns 4-11 (out[0:8, 4:12]) are all 7"),
    (lambda a: a.view(-1)[1500:].zero_(), "the elements from index [46, 28] to [63, 31] (out.flatten()[1500:2048], "
                                          "27% of the output) are all zero"),
    (lambda a: a.index_fill_(0, torch.tensor([1, 5, 20]), 0.0), "rows 1, 5, 20 are all zero"),
])
def test_a_wrong_part_of_an_output_is_named_with_what_it_holds(wrong, pattern: str) -> None:
    expected = torch.randn(64, 32, generator=torch.Generator().manual_seed(3), dtype=torch.float64) + 5.0
    actual = expected.float()
    wrong(actual)
    row, correctness = _wrong_row(actual, expected)
    assert correctness["pattern"].startswith(pattern), correctness["pattern"]
    assert f"Pattern: {pattern}" in feedback_for(row)


def test_scattered_wrong_elements_name_no_slice_but_their_worst_values() -> None:
    expected = torch.randn(64, 64, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    actual = expected.float()
    picked = torch.randperm(actual.numel(), generator=torch.Generator().manual_seed(5))[:200]
    actual.view(-1)[picked] += 3.0
    row, correctness = _wrong_row(actual, expected)
    assert correctness["pattern"] == "" and "Pattern:" not in feedback_for(row)
    assert all(abs(w["got"] - w["expected"]) > 2.9 for w in correctness["worst"])


def test_a_kernel_that_fails_to_compile_at_its_first_call_is_shown_at_the_answers_line() -> None:
    error = {"kind": "compile_error", "stage": "forward", "type": "CompilationError",
             "message": "CompilationError: at 12:4: NameError('tl.foo is not defined')",
             "compiler_errors": [{"file": "submission.py", "line": 12, "message": "tl.foo is not defined",
                                  "source": "    y = tl.foo(x)", "submission_line": 30}]}
    row = ResultRow(run="r", problem="p", sample="s", path="p/s.py", sha256="0", verdict="compile_error",
                    reason="forward: CompilationError (line 30 of the answer)", error=error)
    assert feedback_for(row) == ("A kernel failed to compile at its first call. First compiler errors:\n"
                                 "- line 30 of the answer: tl.foo is not defined\n    y = tl.foo(x)")
