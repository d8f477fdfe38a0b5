"""Extraction through chat-template markers and reasoning channels: Gemma 4's ``<channel|>``, harmony's
analysis and final channels, ``<|im_start|>``/``<start_of_turn>`` turns, fences after prose on their line;
drafts in reasoning never promoted over a final answer."""

from __future__ import annotations

from evalkit.intake.extract import extract, find_blocks

MODEL = "import torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n"
DRAFT = "import torch.nn as nn\n\nclass ModelNew(nn.Module):\n    draft = True\n"
ALIASED = ("import torch.nn as nn\n\nclass FusedScaleReLU(nn.Module):\n    def forward(self, x):\n"
           "        return x\n\nModelNew = FusedScaleReLU\n")


def fenced(code: str, info: str = "python") -> str:
    return f"```{info}\n{code}```\n"


def chosen_row(result) -> dict:
    return next(c for c in result.candidates if c["status"] == "chosen")


# --- Gemma 4: <|channel>thought ... <channel|> ---------------------------------------------------------

def test_gemma_fence_on_the_channel_line() -> None:
    text = "<|turn>model\n<|channel>thought\nLet me think.\n<channel|>```python\n" + MODEL + "```<turn|>\n"
    result = extract(text)
    assert result.ok and result.code == MODEL and not result.warnings
    assert (result.block.fence_line, result.block.start_line, result.block.indent) == (4, 5, 0)
    assert result.source_line(1) == 5


def test_gemma_draft_in_thought_is_not_promoted() -> None:
    text = "<|channel>thought\nDraft:\n" + fenced(DRAFT) + "Better.\n<channel|>```python\n" + MODEL + "```\n"
    result = extract(text)
    assert result.ok and result.code == MODEL and "draft" not in result.code
    draft = result.candidates[0]
    assert draft["defines_model_new"] and not draft["in_final_answer"] and draft["status"] == "rejected"
    assert draft["why"] == "inside reasoning (before final <channel|>)"


def test_gemma_unclosed_draft_is_cut_off_by_the_channel_end() -> None:
    text = "<|channel>thought\n```python\n" + DRAFT + "<channel|>```python\n" + MODEL + "```\n"
    result = extract(text)
    assert result.ok and result.code == MODEL and result.block.fence_line == 7
    assert result.candidates[0]["closed"] is False and result.candidates[0]["end_line"] == 6


def test_gemma_thought_without_an_answer_uses_the_draft_with_a_warning() -> None:
    result = extract("<|channel>thought\n" + fenced(DRAFT) + "<channel|>I ran out of room.<turn|>")
    assert result.ok and result.code == DRAFT and not chosen_row(result)["in_final_answer"]
    assert any("inside the reasoning" in w for w in result.warnings)


# --- harmony: <|channel|>analysis ... <|channel|>final -------------------------------------------------

def harmony(analysis: str, final: str) -> str:
    return (f"<|start|>assistant<|channel|>analysis<|message|>{analysis}<|end|>"
            f"<|start|>assistant<|channel|>final<|message|>{final}<|return|>")


def test_harmony_final_channel_wins_over_the_analysis_draft() -> None:
    result = extract(harmony("Plan.\n" + fenced(DRAFT), "Here it is.\n" + fenced(MODEL)))
    assert result.ok and result.code == MODEL and not result.warnings
    draft, final = result.candidates
    assert draft["why"] == "inside reasoning (before final <|channel|>final)" and not draft["in_final_answer"]
    assert final["status"] == "chosen" and final["in_final_answer"]


def test_harmony_closing_fence_and_final_fence_on_one_line() -> None:
    text = harmony("```python\n" + DRAFT + "```", "```python\n" + MODEL + "```")
    blocks = find_blocks(text)
    assert [b.code for b in blocks] == [DRAFT, MODEL] and all(b.closed for b in blocks)
    result = extract(text)
    assert result.ok and result.code == MODEL and (result.block.fence_line, result.block.start_line) == (6, 7)


def test_harmony_final_channel_without_code_falls_back_to_the_analysis_draft() -> None:
    # As for <think> reasoning with no code after </think>: the draft, with a warning, beats no code.
    result = extract(harmony(fenced(DRAFT), "Done, see the analysis."))
    assert result.ok and result.code == DRAFT
    assert chosen_row(result)["why"] == ("chosen: last Python block defining ModelNew (none follows the "
                                         "reasoning; taken from it)")
    assert "no block after the reasoning defines class ModelNew; using the last draft from inside the reasoning" \
        in result.warnings


def test_harmony_cut_off_in_analysis() -> None:
    result = extract("<|start|>assistant<|channel|>analysis<|message|>Thinking.\n" + fenced("x = 1\n") + "more")
    assert not result.ok
    assert result.reason == ("answer cut off inside the reasoning: <|channel|>analysis is never closed and no block "
                             "defines ModelNew (<|channel|>analysis at line 1)")
    assert result.candidates[0]["why"] == "inside reasoning (after <|channel|>analysis)"


def test_harmony_commentary_is_not_the_answer() -> None:
    text = ("<|channel|>commentary<|message|>" + fenced(DRAFT) + "<|end|>"
            "<|start|>assistant<|channel|>final<|message|>" + fenced(MODEL))
    result = extract(text)
    assert result.code == MODEL and result.candidates[0]["why"] == "inside reasoning (before final <|channel|>final)"


def test_analysis_after_the_final_channel_is_not_promoted() -> None:
    text = harmony("thinking", fenced(MODEL)) + "<|start|>assistant<|channel|>analysis<|message|>" + fenced(DRAFT)
    result = extract(text)
    assert result.ok and result.code == MODEL and not result.warnings
    assert result.candidates[1]["why"] == "inside reasoning (after <|channel|>analysis)"
    assert not result.candidates[1]["in_final_answer"]


# --- <think> drafts are never promoted over a final answer ---------------------------------------------

def test_reopened_think_draft_is_not_promoted_over_the_answer() -> None:
    text = "<think>\nplan\n</think>\n" + fenced(MODEL) + "<think>\nwait, maybe\n" + fenced(DRAFT)
    result = extract(text)
    assert result.ok and result.code == MODEL and not result.warnings
    assert result.candidates[1]["why"] == "inside reasoning (after <think>)"


def test_closed_second_think_draft_is_not_promoted_over_the_answer() -> None:
    text = "<think>\na\n</think>\n" + fenced(MODEL) + "<think>\n" + fenced(DRAFT) + "</think>\nDone.\n"
    result = extract(text)
    assert result.ok and result.code == MODEL
    assert result.candidates[1]["why"] == "inside reasoning (after <think>)"


def test_alias_in_the_answer_wins_over_a_class_draft_in_think() -> None:
    text = "<think>\nA PyTorch draft first:\n" + fenced(DRAFT) + "</think>\nFinal:\n" + fenced(ALIASED)
    result = extract(text)
    assert result.ok and result.code == ALIASED and not result.warnings
    assert [c["defines_model_new"] for c in result.candidates] == [True, True]
    assert result.candidates[0]["why"] == "inside reasoning (before final </think>)"


def test_import_alias_in_the_answer_wins_over_a_class_draft_in_think() -> None:
    code = "from fused_kernels import FusedScaleReLU as ModelNew\n"
    result = extract("<think>\n" + fenced(DRAFT) + "</think>\n" + fenced(code))
    assert result.ok and result.code == code and chosen_row(result)["in_final_answer"]


# --- other templates' markers around fences -------------------------------------------------------------

def test_im_start_and_im_end_around_the_fences() -> None:
    for text in ("<|im_start|>assistant\n" + fenced(MODEL).rstrip("\n") + "<|im_end|>\n",
                 "<|im_start|>assistant```python\n" + MODEL + "```<|im_end|><|endoftext|>"):
        result = extract(text)
        assert result.ok and result.code == MODEL and result.block.closed


def test_start_of_turn_and_end_of_turn() -> None:
    text = "<start_of_turn>model\n```python\n" + MODEL + "``` <end_of_turn>\n<eos>"
    result = extract(text)
    assert result.ok and result.code == MODEL and result.block.closed and result.block.fence_line == 2


def test_marker_after_the_language_is_not_part_of_it() -> None:
    (block,) = find_blocks("<|message|>```python<|im_sep|>\nx = 1\n```\n")
    assert block.language == "python" and block.code == "x = 1\n"


def test_marker_before_a_closing_fence() -> None:
    (block,) = find_blocks("```python\nx = 1\n<|im_sep|>``` <|im_end|>\nafter\n")
    assert block.closed and block.code == "x = 1\n" and block.end_line == 2


def test_closing_fence_followed_by_text_is_still_code() -> None:
    (block,) = find_blocks("```python\nx = 1\n``` not a fence\ny = 2\n```\n")
    assert block.code == "x = 1\n``` not a fence\ny = 2\n"


# --- a fence after prose on its line --------------------------------------------------------------------

def test_fence_after_prose_on_its_line() -> None:
    result = extract("Here is the code: ```python\n" + MODEL + "```\n")
    assert result.ok and result.code == MODEL
    assert (result.block.fence_line, result.block.start_line, result.block.language) == (1, 2, "python")


def test_fence_after_prose_with_a_marker_after_it() -> None:
    (block,) = find_blocks("Final version:```py <|im_sep|>\nx = 1\n```\n")
    assert block.language == "py" and block.code == "x = 1\n"


def test_prose_mentioning_a_fence_is_not_one() -> None:
    text = "Use ```python``` to tag it, or wrap it in ``` fences.\nClose with ```\n" + fenced(MODEL)
    blocks = find_blocks(text)
    assert [b.fence_line for b in blocks] == [3]
    assert extract(text).code == MODEL


def test_prose_fence_met_by_a_real_opening_fence_is_dropped() -> None:
    text = "I will put the code in ```python\nlike this:\n" + fenced(MODEL)
    blocks = find_blocks(text)
    assert len(blocks) == 1 and blocks[0].fence_line == 3 and blocks[0].code == MODEL


def test_prose_fence_in_reasoning_is_cut_off_by_the_closing_tag() -> None:
    text = "<think>\nAnswer format: ```python\n</think>\n" + fenced(MODEL)
    result = extract(text)
    assert result.ok and result.code == MODEL and result.candidates[0]["closed"] is False


def test_fence_inside_code_after_text_does_not_close() -> None:
    code = 'DOC = "see ```"\nclass ModelNew:\n    pass\n'
    result = extract(fenced(code))
    assert result.ok and result.code == code
