"""Trusted side, nothing runs: chat-template markers and reasoning tags in an answer's text (pure; no I/O).

Models and serving stacks leave their chat template's control tokens in the answer: ``<|im_start|>assistant``,
``<start_of_turn>model``, ``<|end|>``, Gemma 4's ``<|channel>thought ... <channel|>``, the harmony format's
``<|start|>assistant<|channel|>analysis<|message|>...<|end|>``. A *marker* is ``<|name|>``, ``<|name>`` or
``<name|>`` (a name of at most 40 characters without ``<``, ``>``, ``|`` or a line break), or one of
``<think>``, ``</think>``, ``<start_of_turn>``, ``<end_of_turn>``, ``<eos>``. Markers may stand before a
fence on its line (with a role or channel word after each, as in ``<|channel|>final<|message|>```python``)
and after it ("```<|return|>").

A few markers open or close *reasoning* (what comes before the final answer): ``<think>`` ...
``</think>``; Gemma 4's ``<|channel>`` (``<|channel>thought``) ... ``<channel|>``; and harmony's channels:
``<|channel|>NAME`` opens reasoning for every NAME but ``final`` (``analysis``, ``commentary``), and
``<|channel|>final`` closes it: only the final channel is the answer.

Every pattern here is bounded (a marker is at most 44 characters, a word after one at most 40), so
matching them anywhere is linear in the text.
"""

from __future__ import annotations

import re
from typing import NamedTuple

MARKER = r"<\|[^<>|\n]{0,40}\|?>|<[^<>|\n]{1,40}\|>|</?think>|<(?:start|end)_of_turn>|<eos>"
_MARKER = re.compile(MARKER)
# A line's lead: indentation, then markers, each maybe followed by one word (a role or a channel name).
_LEAD = re.compile(rf"[ \t]*(?:(?:{MARKER})[ \t]*(?:\w{{1,40}}[ \t]*)?)*")
# What may follow a closing fence run: blanks to the line's end, or blanks and a marker ("```<|return|>").
_CLOSING_TAIL = re.compile(rf"[ \t]*(?:\n|\Z|{MARKER})")
# A fence opened after prose on its line: one language word, then only markers to the line's end.
_PROSE_INFO = re.compile(rf"[ \t]*([A-Za-z][\w+#.-]{{0,30}})[ \t]*(?:(?:{MARKER})[ \t]*)*(?=\n|\Z)")
_CHANNEL_NAME = re.compile(r"[ \t]*(\w{0,40})")
_CLOSERS = frozenset({"</think>", "<channel|>"})
_HARMONY_CHANNEL = "<|channel|>"
_CHANNELS = frozenset({"<|channel>", _HARMONY_CHANNEL})  # Gemma 4's opens reasoning; harmony's: by name
FINAL_CHANNEL = "final"
MAY_CLOSE = _CLOSERS | {_HARMONY_CHANNEL}  # the markers that can close reasoning (harmony's: when final)


class Reasoning(NamedTuple):
    """A marker that opens or closes reasoning; ``name`` is how messages show it (``<|channel|>analysis``)."""

    closing: bool
    name: str


def reasoning_tag(text: str, token: str, end: int) -> Reasoning | None:
    """What the marker ``token`` (ending at ``end`` in ``text``) does to reasoning; None for other markers."""
    if token in _CLOSERS:
        return Reasoning(True, token)
    if token == "<think>":
        return Reasoning(False, token)
    if token not in _CHANNELS:
        return None
    match = _CHANNEL_NAME.match(text, end)
    name = match.group(1) if match else ""
    return Reasoning(token == _HARMONY_CHANNEL and name == FINAL_CHANNEL, token + name)


def lead_end(text: str, line_start: int) -> int:
    """Where the line starting at ``line_start`` stops being blanks and markers (with their role words)."""
    match = _LEAD.match(text, line_start)
    return match.end() if match else line_start


def closing_tail(text: str, end: int) -> bool:
    """Whether a fence run ending at ``end`` is followed by nothing but blanks, or by blanks and a marker."""
    return _CLOSING_TAIL.match(text, end) is not None


def prose_fence_info(text: str, start: int) -> tuple[str, int] | None:
    """(language, line end) when a fence run ending at ``start`` is followed by one language word and
    nothing but markers up to the line's end: the shape of ``Here is the code: ```python``."""
    match = _PROSE_INFO.match(text, start)
    return (match.group(1).lower(), match.end()) if match else None


def without_markers(info: str) -> str:
    """A fence's info string with its markers blanked out: "```python<|im_end|>" has the language python."""
    return _MARKER.sub(" ", info) if "<" in info else info
