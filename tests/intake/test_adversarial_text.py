"""Adversarial answer text through everything the trusted process does with it (decode, extract, parse,
scan, triage): each finishes within a generous bound, grows linearly with its input, and still gets the
right answer."""

from __future__ import annotations

import time
import tracemalloc

import pytest

from evalkit.intake.bindings import binds_model_new
from evalkit.intake.extract import MAX_CANDIDATES, extract
from evalkit.intake.static_scan import SyntaxProblem, scan, syntax_problem
from evalkit.intake.triage import triage
from evalkit.sources.textio import decode_text
from intake.time_bounds import MAX_GROWTH, QUICK_S, growth, timed

MODEL = "import torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n"
NO_EXTENSION = "static scan: the code builds no extension of its own (no load_inline)"
GUARDED = "static scan: the extension is built inside try/except: a failed build may fall back silently"
FALLBACK = "static scan: an except-branch calls PyTorch: a possible fallback to library ops"
DEEP = " " * 48
# The reported answer: 12 lines, a tuple indented 48 spaces after try/except. The old pattern for the
# fallback warning backtracked over every way of splitting each indentation: triage hung for minutes.
REPORTED = ("import torch.nn as nn\n" "try:\n" "    import fused_ext\n" "except ImportError:\n" "    SHAPES = (1,\n"
            + "".join(f"{DEEP}{k},\n" for k in range(2, 6)) + f"{DEEP}6)\n"
            "class ModelNew(nn.Module):\n" "    pass\n")


def fenced(code: str) -> str:
    return f"```python\n{code}```\n"


# --- the reported answer ------------------------------------------------------------------------------

def test_the_reported_answer_is_triaged_quickly() -> None:
    assert REPORTED.count("\n") == 12
    result, seconds = timed(lambda: triage(fenced(REPORTED)))
    assert seconds < QUICK_S
    assert result.extraction.ok and result.syntax is None and result.code == REPORTED
    assert result.warnings == [NO_EXTENSION]


def test_two_thousand_lines_of_it() -> None:
    code = REPORTED * 167
    assert code.count("\n") >= 2000
    result, seconds = timed(lambda: scan(code))
    assert seconds < QUICK_S and result.warnings == [NO_EXTENSION]
    triaged, seconds = timed(lambda: triage(fenced(code)))
    assert seconds < QUICK_S and triaged.syntax is None and triaged.warnings == [NO_EXTENSION]


def test_a_call_after_the_deep_lines_is_still_a_fallback() -> None:
    code = REPORTED.replace(f"{DEEP}6)\n", f"{DEEP}6)\n    x = torch.matmul(a, b)\n")
    result, seconds = timed(lambda: scan(code))
    assert seconds < QUICK_S and FALLBACK in result.warnings


def test_deep_lines_in_a_guarded_build() -> None:
    head = "try:\n" + f"{DEEP}pass\n" * 8
    found, seconds = timed(lambda: scan(head + "    ext = load_inline(name='k')\nexcept Exception:\n    ext = None\n"))
    assert seconds < QUICK_S and GUARDED in found.warnings
    missed, seconds = timed(lambda: scan(head + f"{DEEP}pass\n    ext = load_inline(name='k')\n"))
    assert seconds < QUICK_S and GUARDED not in missed.warnings


# --- what the line-based scan still finds -------------------------------------------------------------

@pytest.mark.parametrize(("between", "warned"), [(0, True), (8, True), (9, False)])
def test_a_load_call_counts_up_to_eight_lines_below_the_first_after_try(between: int, warned: bool) -> None:
    code = "try:\n\n   \n" + "    x = 1\n" * between + "    ext = load(name='k')\nexcept Exception:\n    pass\n"
    assert (GUARDED in scan(code).warnings) is warned


@pytest.mark.parametrize(("lines", "warned"), [
    ("\n    \n    torch.relu(x)\n", True),  # blank lines right after the except line do not count
    ("    a = 1\n" * 6 + "    F.relu(x)\n", True),
    ("    a = 1\n" * 7 + "    F.relu(x)\n", False),  # past the reach
    ("    a = 1\n\n    nn.ReLU()(x)\n", False),  # an empty line ends the indented run
    ("pass\n    torch.relu(x)\n", False),  # so does an unindented one
])
def test_a_fallback_call_counts_within_the_indented_lines_after_except(lines: str, warned: bool) -> None:
    code = "try:\n    import ext\nexcept ImportError:\n" + lines
    assert (FALLBACK in scan(code).warnings) is warned


def test_the_line_based_scan_on_many_candidate_lines() -> None:
    many_try = "try:\n" + "    x = 1\n" * 10
    many_except = "except E:\n" + "    x = 1\n" * 8
    code = (many_try + many_except) * 5_000 + "load(x)\ntorch.relu(x)\n"
    result, seconds = timed(lambda: scan(code))
    assert seconds < QUICK_S and GUARDED not in result.warnings and FALLBACK not in result.warnings


# --- extraction ---------------------------------------------------------------------------------------

def test_many_think_tags_on_one_line_inside_an_open_fence() -> None:
    text = "<think>\n```python\n" + "x </think>" * 100_000 + "\n</think>\n" + fenced(MODEL)
    result, seconds = timed(lambda: extract(text))
    assert seconds < QUICK_S
    assert result.ok and result.code == MODEL and result.block.fence_line == 5
    assert result.candidates[0]["closed"] is False  # the draft, cut off by the </think> at a line start


def test_many_think_tags_and_lines() -> None:
    text = "<think>" * 20_000 + "\n" + "</think>\n<think>\n" * 20_000 + "</think>\n" + fenced(MODEL)
    result, seconds = timed(lambda: extract(text))
    assert seconds < QUICK_S and result.ok and result.code == MODEL


def test_many_fences_keep_a_bounded_candidate_list() -> None:
    text = "```\n```\n" * 20_000 + fenced(MODEL)
    result, seconds = timed(lambda: extract(text))
    assert seconds < QUICK_S and result.ok and result.code == MODEL and result.block.index == 20_000
    assert len(result.candidates) == MAX_CANDIDATES and result.candidates[-1]["status"] == "chosen"
    assert any("20001 code blocks: the candidate list shows 100" in w for w in result.warnings)


def test_deeply_indented_fence() -> None:
    indent = " " * 1_000_000
    text = indent + "```python\n" + "".join(indent + line + "\n" for line in MODEL.splitlines()) + indent + "```\n"
    result, seconds = timed(lambda: extract(text))
    assert seconds < QUICK_S and result.ok and result.code == MODEL and result.block.indent == 1_000_000


def test_long_lines_without_events() -> None:
    text = ("`" * 2 + "~" * 2 + ":" * 1_000_000 + "\n") * 5 + "x = ((((" * 200_000 + "\n" + fenced(MODEL)
    result, seconds = timed(lambda: extract(text))
    assert seconds < QUICK_S and result.ok and result.code == MODEL


def test_harmony_turns_closing_and_opening_fences_on_each_line() -> None:
    line = "```<|end|><|start|>assistant<|channel|>final<|message|>```python\n"
    text = "```python\n" + line * 20_000 + "```\n" + fenced(MODEL)
    result, seconds = timed(lambda: extract(text))
    assert seconds < QUICK_S and result.ok and result.code == MODEL and result.block.index == 20_001


def test_a_long_line_naming_model_new_in_every_way_but_binding() -> None:
    line = "x = f(" + "ModelNew, ModelNew.y, 'as ModelNew', ModelNew == 1, " * 40_000 + ")\n"
    result, seconds = timed(lambda: extract(fenced(MODEL.replace("class ModelNew", "class Other") + line)))
    assert seconds < QUICK_S and not result.ok


# --- parsing: the parser's own limits are a syntax problem, never an exception ------------------------

DEEPLY_NESTED = {
    "not not ... y": "x = " + "not " * 100_000 + "y\n",  # MemoryError from the parser
    "- - ... y": "x = " + "-" * 100_000 + "y\n",
    "a.b.b ... .b": "x = a" + ".b" * 100_000 + "\n",  # RecursionError building the tree
    "a+a+ ... a": "x = " + "a+" * 100_000 + "a\n",
}


@pytest.mark.parametrize("code", DEEPLY_NESTED.values(), ids=DEEPLY_NESTED)
def test_deep_nesting_is_a_syntax_problem(code: str) -> None:
    problem, seconds = timed(lambda: syntax_problem(code))
    assert seconds < QUICK_S and isinstance(problem, SyntaxProblem)
    assert problem.message.startswith("too deeply nested to parse (")


def test_too_many_parentheses_is_the_parsers_syntax_error() -> None:
    problem = syntax_problem("x = " + "(" * 100_000 + ")" * 100_000 + "\n")
    assert problem is not None and problem.message == "too many nested parentheses" and problem.line == 1


def test_triage_of_a_deeply_nested_answer() -> None:
    result, seconds = timed(lambda: triage(fenced(MODEL + "y = " + "not " * 100_000 + "x\n")))
    assert seconds < QUICK_S and result.extraction.ok
    assert result.syntax is not None and "too deeply nested" in result.syntax.message


# --- decoding -----------------------------------------------------------------------------------------

def test_megabytes_of_invalid_bytes() -> None:
    (text, warnings), seconds = timed(lambda: decode_text(b"\xff" * 4_000_000 + b"\n" + fenced(MODEL).encode(), "a"))
    assert seconds < QUICK_S and text.startswith("\ufffd" * 4_000_000 + "\n")
    assert warnings == ["a: 4000000 bytes are not valid UTF-8 (replaced with U+FFFD; first on line 1)"]
    assert extract(text).code == MODEL


def test_invalid_bytes_are_counted_without_a_list_of_them() -> None:
    data = b"\xff" * 1_000_000
    tracemalloc.start()
    try:
        decode_text(data, "a")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 25 * len(data)  # the text and its repair: 12x; a list of every bad byte was 86x


# --- growth: four times the input, about four times the time ------------------------------------------

GROWING = {
    "extract: think tags on a line in a fence": (extract, lambda n: "```python\n" + "x </think>" * n, 100_000),
    "extract: fences": (extract, lambda n: "```\n" * n, 20_000),
    "scan: the reported answer": (scan, lambda n: REPORTED * n, 1_500),
    "scan: try and except lines": (scan, lambda n: ("try:\n" + "except E:\n" + " " * 40 + "x\n") * n + "load(\n", 6_000),
    "decode_text: invalid bytes": (lambda data: decode_text(data, "a"), lambda n: b"a\xff" * n, 800_000),
    "extract: fence runs after prose on a line": (extract, lambda n: "a ``` " * n, 100_000),
    "extract: a lead of markers, then runs": (extract, lambda n: "<|a|>" * n + "```x y " * n, 40_000),
    "extract: channel markers on a line in a fence": (extract, lambda n: "```\n" + "x <|channel|>final" * n, 80_000),
    "extract: closing runs and markers on a line": (extract, lambda n: "```python\nx\n" + "```<|end|>" * n, 60_000),
    "extract: tentative fences": (extract, lambda n: "see ```python\n" * n, 60_000),
    "binds_model_new: names on a line": (binds_model_new, lambda n: "x = " + "ModelNew, " * n + "\n", 200_000),
    "binds_model_new: import items": (binds_model_new,
                                      lambda n: "from k import " + "a as b, " * n + "ModelNew as c\n", 400_000),
    "binds_model_new: a line of a parenthesised import": (binds_model_new,
                                                          lambda n: "    " + "a as b, " * n + "F as ModelNew,\n",
                                                          100_000),
}


@pytest.mark.parametrize("case", GROWING)
def test_time_grows_linearly(case: str) -> None:
    function, make_input, n = GROWING[case]
    assert growth(function, make_input, n) < MAX_GROWTH


def test_the_growth_measure_tells_quadratic_code() -> None:
    # Quadratic in Python's own steps. ``list.insert(0, ...)`` was not clearly so: its memmove is so quick at such
    # sizes that the per-character loop hid its growth (7.7x once, against 8).
    def quadratic(text: str) -> None:
        for i in range(len(text)):
            for _ in range(i):
                pass

    assert growth(quadratic, lambda n: "a" * n, 2_000, rounds=1) > MAX_GROWTH  # one round: 16x is slow


def test_code_too_large_to_parse_is_a_syntax_problem_without_parsing():
    from evalkit.intake.static_scan import MAX_CODE_BYTES, syntax_problem

    code = "x = 1\n" * (MAX_CODE_BYTES // 6 + 1)
    start = time.thread_time()
    problem = syntax_problem(code)
    assert problem is not None and "over the" in problem.message
    assert time.thread_time() - start < 0.5
