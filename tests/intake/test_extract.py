"""evalkit.intake.extract: fence parsing, final-answer choice, diagnostics, line mapping, speed."""

from __future__ import annotations

import ast
import json
import time

import pytest

from conftest import SEEDS
from evalkit.intake.extract import Block, extract, find_blocks
from evalkit.sources.textio import decode_text

MODEL = "import torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n"


def seed(number: str) -> str:
    (path,) = SEEDS.glob(f"*/{number}_*.txt")
    return path.read_text(encoding="utf-8")


def fenced(code: str, info: str = "python", fence: str = "```") -> str:
    return f"{fence}{info}\n{code}{fence}\n"


def assert_maps_back(text: str, result) -> None:
    """Every code line is the (dedented) source line that source_line() names."""
    source = text.split("\n")
    indent = result.block.indent if result.block else 0
    for i, line in enumerate(result.code.rstrip("\n").split("\n"), start=1):
        original = source[result.source_line(i) - 1]
        assert original.endswith(line) and not original[: len(original) - len(line)].strip(" "), (i, line)
        assert len(original) - len(line) <= indent


# --- the real seeds -----------------------------------------------------------------------------------

def test_seed_000_no_fences_cut_off_mid_reasoning() -> None:
    result = extract(seed("000"))
    assert not result.ok and result.code == "" and result.block is None
    assert result.reason.startswith("no fenced code block; the text appears cut off before its final answer")
    assert "'// Apply GELU'" in result.reason
    assert result.candidates == []


def test_seed_001_final_block_after_think_not_indented_drafts() -> None:
    text = seed("001")
    result = extract(text)
    assert result.ok and not result.truncated and not result.whole_text
    block = result.block
    assert (block.fence_line, block.start_line, block.end_line, block.language) == (1857, 1858, 2024, "python")
    assert result.line_offset == 1857
    assert result.source_line(1) == 1858
    code_lines = result.code.split("\n")
    model_line = next(i for i, line in enumerate(code_lines, 1) if line.startswith("class ModelNew"))
    assert result.source_line(model_line) == 1863
    assert result.code == "\n".join(text.split("\n")[1857:2024]) + "\n"
    ast.parse(result.code)
    assert_maps_back(text, result)
    by_fence = {c["fence_line"]: c for c in result.candidates}
    assert sorted(by_fence) == [1549, 1681, 1857]
    assert by_fence[1549]["language"] == "cpp" and by_fence[1549]["status"] == "rejected"
    draft = by_fence[1681]
    assert draft["defines_model_new"] and not draft["in_final_answer"] and draft["status"] == "rejected"
    assert draft["why"] == "inside reasoning (before final </think>)"
    assert by_fence[1857]["status"] == "chosen" and by_fence[1857]["in_final_answer"]


def test_seed_001_indented_draft_is_a_dedented_block() -> None:
    blocks = find_blocks(seed("001"))
    draft = next(b for b in blocks if b.fence_line == 1681)
    assert draft.indent == 4 and draft.closed and draft.end_line == 1847
    assert draft.code.startswith("import ") and "\nclass ModelNew(nn.Module):\n" in draft.code


def test_seed_002_think_never_closed() -> None:
    result = extract(seed("002"))
    assert not result.ok
    assert result.reason.startswith("answer cut off inside the reasoning: <think> is never closed")
    assert "line 128" in result.reason


def test_seed_003_block_after_think() -> None:
    text = seed("003")
    result = extract(text)
    assert result.ok and result.block.fence_line == 1121 and result.block.start_line == 1122
    assert_maps_back(text, result)


def test_seed_004_block_after_first_think_not_draft_nor_second_think() -> None:
    text = seed("004")
    result = extract(text)
    assert result.ok and result.block.fence_line == 1250
    first = result.candidates[0]
    assert first["fence_line"] == 1074 and first["why"] == "inside reasoning (before final </think>)"
    assert text.split("\n")[1409] == "</think>"  # the second </think>, with no code after it
    assert_maps_back(text, result)


# --- fence parsing ------------------------------------------------------------------------------------

def test_tilde_fence_and_backticks_inside_it() -> None:
    text = "Answer:\n~~~python\n" + MODEL + "s = '''\n```\n'''\n~~~\n"
    (block,) = find_blocks(text)
    assert block.language == "python" and block.closed and block.fence_line == 2
    assert "```" in block.code and block.end_line == 10
    assert extract(text).ok


def test_untagged_fence_counts_as_python() -> None:
    result = extract("Here:\n" + fenced(MODEL, info=""))
    assert result.ok and result.block.language == ""


def test_info_string_language_is_first_word_lowercased() -> None:
    (block,) = find_blocks(fenced("x = 1\n", info="Python title=model.py"))
    assert block.language == "python"


def test_closing_fence_needs_same_char_enough_length_and_nothing_else() -> None:
    text = "````\n```\n~~~~\n``` trailing\n````\n"
    (block,) = find_blocks(text)
    assert block.code == "```\n~~~~\n``` trailing\n" and block.end_line == 4


def test_nested_fences_in_a_longer_fence_stay_inside() -> None:
    text = "````markdown\n" + fenced(MODEL) + "````\n"
    (block,) = find_blocks(text)
    assert block.language == "markdown" and "```python" in block.code
    result = extract(text)
    assert not result.ok and "'markdown' block at line 1 defines it" in result.reason


def test_backtick_info_with_backticks_is_not_a_fence() -> None:
    text = "```python``` is how you tag it.\n" + fenced(MODEL)
    blocks = find_blocks(text)
    assert [b.fence_line for b in blocks] == [2]
    assert extract(text).block.start_line == 3


def test_indented_fence_is_dedented_by_its_indentation_only() -> None:
    text = "1. Step one:\n\n    ```python\n    class ModelNew:\n        x = 1\n  y = 2\n    ```\n"
    (block,) = find_blocks(text)
    assert block.indent == 4 and block.fence_line == 3 and block.start_line == 4 and block.end_line == 6
    assert block.code == "class ModelNew:\n    x = 1\ny = 2\n"


def test_tab_indented_fence() -> None:
    (block,) = find_blocks("\t```python\n\tclass ModelNew:\n\t\tpass\n\t```\n")
    assert block.indent == 4 and block.code == "class ModelNew:\n\tpass\n"
    (block,) = find_blocks("  ```python\n\tx = 1\n  ```\n")
    assert block.indent == 2 and block.code == "  x = 1\n"  # the tab's other two columns stay


def test_empty_block_line_numbers() -> None:
    (block,) = find_blocks("text\n```python\n```\n")
    assert (block.start_line, block.end_line, block.code, block.closed) == (3, 2, "", True)


def test_unclosed_fence_runs_to_end() -> None:
    (block,) = find_blocks("a\n```python\nx = 1\ny = 2")
    assert not block.closed and block.end_line == 4 and block.code == "x = 1\ny = 2\n"
    (block,) = find_blocks("a\n```python\nx = 1\n")
    assert not block.closed and block.end_line == 3


def test_block_fields_are_frozen() -> None:
    (block,) = find_blocks(fenced("x\n"))
    with pytest.raises(AttributeError):
        block.code = "y"  # type: ignore[misc]
    assert isinstance(block, Block) and block.index == 0


# --- choosing the block -------------------------------------------------------------------------------

def test_cpp_block_after_python_block() -> None:
    text = "Plan.\n" + fenced(MODEL) + "And the kernel:\n" + fenced("__global__ void k() {}\n", info="cpp")
    result = extract(text)
    assert result.ok and result.block.index == 0
    assert result.candidates[1]["why"] == "language 'cpp' is not Python"
    assert result.candidates[1]["status"] == "rejected"


def test_two_model_blocks_last_wins() -> None:
    text = "v1\n" + fenced(MODEL) + "v2, better\n" + fenced(MODEL.replace("return x", "return x * 1"))
    result = extract(text)
    assert result.block.index == 1 and "x * 1" in result.code
    assert result.candidates[0]["why"] == "an earlier ModelNew block; a later one wins"
    assert result.candidates[1]["why"] == "chosen: last Python block defining ModelNew in the final answer"
    assert any("2 blocks define class ModelNew" in w for w in result.warnings)


def test_helper_block_after_model_is_rejected() -> None:
    text = fenced(MODEL) + fenced("print('usage')\n")
    result = extract(text)
    assert result.block.index == 0 and result.candidates[1]["why"] == "does not define class ModelNew"


def test_truncated_final_block() -> None:
    text = "<think>\nhmm\n</think>\n\n```python\n" + MODEL + "    def extra(self):"
    result = extract(text)
    assert result.ok and result.truncated and not result.block.closed
    assert result.block.end_line == len(text.split("\n"))
    assert "cut off" in result.reason and any("no closing fence" in w for w in result.warnings)


def test_later_think_with_code_wins_over_earlier_answer() -> None:
    text = "</think>\n" + fenced(MODEL) + "more thought\n</think>\n" + fenced(MODEL.replace("x\n", "-x\n"))
    result = extract(text)
    assert result.block.index == 1 and "-x" in result.code
    assert result.candidates[0]["why"] == "inside reasoning (before final </think>)"


def test_draft_in_reasoning_used_when_answer_has_no_code() -> None:
    text = "<think>\n" + fenced(MODEL) + "</think>\nDone, see above.\n"
    result = extract(text)
    assert result.ok and result.block.index == 0
    assert not result.candidates[0]["in_final_answer"]
    assert any("inside the reasoning" in w for w in result.warnings)


def test_think_closing_tag_ends_an_unclosed_fence_in_reasoning() -> None:
    draft = "```python\nclass ModelNew:\n    draft = True\n"
    text = "<think>\n" + draft + "</think>\n" + fenced(MODEL)
    result = extract(text)
    assert result.ok and result.block.index == 1 and "draft" not in result.code
    assert result.block.fence_line == 6
    assert result.candidates[0]["closed"] is False and result.candidates[0]["end_line"] == 4


def test_think_tag_inside_code_is_ignored() -> None:
    code = MODEL + "TAG = '</think>'\n"
    text = "reasoning </think>\n" + fenced(code)
    result = extract(text)
    assert result.ok and result.code == code


def test_candidate_list_of_many_blocks_keeps_both_ends_and_the_chosen_one() -> None:
    text = fenced("x = 1\n") * 70 + fenced(MODEL) + fenced("y = 2\n") * 79
    result = extract(text)
    assert result.ok and result.block.index == 70
    assert [c["index"] for c in result.candidates] == [*range(50), 70, *range(100, 150)]
    assert result.candidates[50]["status"] == "chosen" and result.candidates[50]["fence_line"] == 211
    assert result.warnings[-1] == ("150 code blocks: the candidate list shows 101 of them (the first and last 50, "
                                   "and the chosen one)")
    assert extract(fenced("x = 1\n") * 99 + fenced(MODEL)).warnings == []  # 100 blocks: every one listed


# --- no code ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text", ["", "  \n\n\t\n"])
def test_empty_text(text: str) -> None:
    result = extract(text)
    assert not result.ok and result.reason == "empty text"


def test_blocks_without_model_new() -> None:
    result = extract("a\n" + fenced("x = 1\n") + fenced("int main() {}\n", info="cpp"))
    assert not result.ok and result.reason == "2 code blocks but none defines class ModelNew"
    assert [c["status"] for c in result.candidates] == ["rejected", "rejected"]


def test_unfenced_model_new_in_prose_is_not_code() -> None:
    text = "I will write:\n\nclass ModelNew(nn.Module):\n    pass\n\nThat is the plan.\n"
    result = extract(text)
    assert not result.ok and not result.whole_text
    assert "appears only unfenced in prose (line 3)" in result.reason


def test_no_fences_complete_text_is_not_called_cut_off() -> None:
    result = extract("I cannot help with that.\n")
    assert not result.ok and result.reason.startswith("no fenced code block")
    assert "cut off" not in result.reason


def test_unclosed_think_with_blocks_but_no_model() -> None:
    result = extract("<think>\nLet me try\n" + fenced("x = 1\n") + "so then")
    assert not result.ok and result.reason.startswith("answer cut off inside the reasoning")


def test_unclosed_think_with_a_draft_model_block_uses_it_with_a_warning() -> None:
    result = extract("<think>\n" + fenced(MODEL) + "hmm")
    assert result.ok and not result.candidates[0]["in_final_answer"]
    assert result.warnings


# --- whole-file Python --------------------------------------------------------------------------------

def test_whole_python_file() -> None:
    result = extract(MODEL)
    assert result.ok and result.whole_text and result.block is None and result.code == MODEL
    assert result.line_offset == 0 and result.source_line(3) == 3
    assert result.to_dict()["block"] is None


def test_whole_python_file_with_a_syntax_error_is_taken_with_a_warning() -> None:
    broken = MODEL.replace("def forward(self, x):", "def forward(self, x)")
    result = extract(broken)
    assert result.ok and result.whole_text and result.code == broken
    assert any("not valid Python (line 4" in w for w in result.warnings)


def test_python_file_with_fence_in_a_string_is_still_whole() -> None:
    text = 'DOC = """\n```python\nclass ModelNew: pass\n```\n"""\n' + MODEL
    result = extract(text)
    assert result.whole_text and result.code == text


# --- newlines, json, speed ----------------------------------------------------------------------------

def test_crlf_text_keeps_line_numbers() -> None:
    text = seed("001").replace("\n", "\r\n")
    assert extract(text).block.fence_line == 1857
    decoded, warnings = decode_text(text.encode("utf-8"), "seed.txt")
    assert warnings == [] and extract(decoded).block.fence_line == 1857


def test_lone_cr_counts_as_a_line_break() -> None:
    result = extract("a\rb\r```python\r" + MODEL.replace("\n", "\r") + "```\r")
    assert result.block.fence_line == 3 and "\r" not in result.code


def test_to_dict_is_json_safe_and_complete() -> None:
    data = json.loads(json.dumps(extract(seed("004")).to_dict()))
    assert {"ok", "reason", "code", "truncated", "block", "candidates", "whole_text", "line_offset",
            "warnings"} <= set(data)
    assert data["block"]["fence_line"] == 1250 and data["line_offset"] == 1250
    assert {"index", "language", "fence_line", "start_line", "end_line", "closed", "in_final_answer",
            "defines_model_new", "status", "why"} <= set(data["candidates"][0])
    failed = json.loads(json.dumps(extract(seed("002")).to_dict()))
    assert failed["ok"] is False and failed["block"] is None


def test_twenty_megabytes_is_fast() -> None:
    reasoning = seed("001").split("</think>")[0]
    text = "<think>\n" + reasoning * (20_000_000 // len(reasoning) + 1) + "</think>\n" + fenced(MODEL)
    assert len(text) > 20_000_000
    start = time.thread_time()
    result = extract(text)
    elapsed = time.thread_time() - start
    assert result.ok and result.code == MODEL and result.candidates[-1]["status"] == "chosen"
    assert elapsed < 5, f"{elapsed:.1f} s for {len(text) / 1e6:.0f} MB"


def test_twenty_megabytes_one_line_is_fast() -> None:
    start = time.thread_time()
    result = extract("`" * 2 + "a" * 20_000_000)
    assert not result.ok and time.thread_time() - start < 5


def test_a_short_reply_without_code_is_not_called_cut_off_and_a_long_one_is():
    short = extract("hello")
    assert not short.ok and "cut off" not in short.reason and not short.truncated
    long = extract("Let me think about the kernel. " * 20 + "First we tile the output and then we")
    assert "cut off" in long.reason and long.truncated
