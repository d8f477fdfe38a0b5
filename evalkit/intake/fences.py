"""Trusted side, nothing runs: an answer's fenced code blocks and the reasoning tags outside them (pure; no I/O).

Fences are paired by a small state machine over events: runs of three or more backticks or tildes, and
markers (``evalkit.intake.markers``), each found by a linear regex scan that starts with a literal (so the
regex engine skips ahead to it) and merged in text order. Each event is one step, and no step looks back
past its own line's start, whose indentation and *lead* (the blanks and markers the line starts with) are
read at most once per line: the time is linear in the text.

A fence opens at a line's start (after indentation, as in CommonMark); after a line's lead of markers
(``<channel|>```python``, ``<|channel|>final<|message|>```python``), the same way with indentation 0;
and after prose on its line (``Here is the code: ```python``) when one language word and nothing but
markers follow it. A fence opened after prose is *tentative*: if the next fence line it meets opens a
block instead of closing it, the tentative one is dropped, so prose that merely ends with ```python does
not swallow the real block. A fence closes on a line holding, after its lead, a run of its character at
least as long and then nothing but blanks, or blanks and a marker ("```<|return|>"); what follows that
marker on the line is read on as a new lead, so harmony's
"```<|end|><|start|>assistant<|channel|>final<|message|>```python" closes the analysis draft, enters the
final channel and opens its block. A reasoning-closing tag in a line's lead ends a fence left open in the
reasoning (reasoning never contains its own closing tag): that block is cut off there.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

from evalkit.intake.markers import (MARKER, MAY_CLOSE, closing_tail, lead_end, prose_fence_info, reasoning_tag,
                                    without_markers)
from evalkit.row_parts import BlockRecord
from evalkit.sources.textio import normalise_newlines

_RUNS = (re.compile("```+"), re.compile("~~~+"))  # a whole run: finditer resumes after it
_MARKER = re.compile(MARKER)
_BLANKS = re.compile(r"[ \t]*")
_TAB = 4


@dataclass(frozen=True)
class Block:
    index: int  # 0-based order of appearance
    language: str  # first word of the info string, lowercased ("" if none)
    fence_line: int  # 1-based line of the opening fence
    start_line: int  # first code line (fence excluded)
    end_line: int  # last code line; start_line - 1 for an empty block
    closed: bool  # False when the text (or the reasoning, at its closing tag) ended before a closing fence
    indent: int  # columns of indentation of the opening fence
    code: str  # dedented by the fence's indentation
    fence_offset: int = 0  # where the opening fence's run starts in the text (newlines normalised)

    def to_dict(self) -> BlockRecord:
        return BlockRecord(index=self.index, language=self.language, fence_line=self.fence_line,
                           start_line=self.start_line, end_line=self.end_line, closed=self.closed, indent=self.indent)


class Tag(NamedTuple):
    """A reasoning tag outside code: ``name`` as messages show it (``</think>``, ``<|channel|>final``)."""

    line: int
    pos: int
    closing: bool
    name: str


class _Open(NamedTuple):
    char: str
    length: int
    indent: int
    language: str
    fence_line: int
    code_start: int
    offset: int
    tentative: bool = False


def _columns(space: str) -> int:
    return len(space.expandtabs(_TAB))  # a tab runs to the next multiple of _TAB


def _strip_columns(line: str, n: int) -> str:
    col = i = len(line) - len(line.lstrip(" "))  # leading spaces at C speed: deep indentation is common
    if col >= n:
        return line[n:]
    while i < len(line) and col < n and line[i] in " \t":
        col = col + 1 if line[i] == " " else (col // _TAB + 1) * _TAB
        i += 1
    return " " * max(col - n, 0) + line[i:]  # a tab that overshoots keeps its excess


def _make_block(text: str, fence: _Open, index: int, code_end: int, end_line: int, closed: bool) -> Block:
    code = text[fence.code_start:code_end]
    if fence.indent:
        code = "\n".join(_strip_columns(line, fence.indent) for line in code.split("\n"))
    if code and not code.endswith("\n"):
        code += "\n"
    return Block(index, fence.language, fence.fence_line, fence.fence_line + 1, end_line, closed, fence.indent,
                 code, fence.offset)


def _opening(indent: int, run: str, info: str, line: int, code_start: int, offset: int) -> _Open | None:
    if run[0] == "`" and "`" in info:
        return None  # CommonMark: a backtick fence's info string has no backticks (```py``` is inline)
    words = without_markers(info).split()
    language = words[0].strip("{}.").lower() if words else ""
    return _Open(run[0], len(run), indent, language, line, code_start, offset)


def _closes(fence: _Open, run: str) -> bool:
    return run[0] == fence.char and len(run) >= fence.length


class _Scanner:
    """One pass over the events of one text; see the module docstring."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.blocks: list[Block] = []
        self.tags: list[Tag] = []
        self.fence: _Open | None = None
        self.line, self.line_start, self.last = 1, 0, -1  # last: where the previous event starts
        self.anchor = 0  # where the current line's lead starts: its start, or the end of a fence closed on it
        self.lead_at, self.lead = -1, 0  # the anchor whose lead end is known, and that end
        self.indent_line, self.indent = -1, 0  # the same for the end of its indentation
        self.skip_until = -1  # events before this are on a line a fence opened or closed on

    def scan(self) -> tuple[list[Block], list[Tag]]:
        for match in _events(self.text):
            if match.start() < self.skip_until:
                continue
            self._advance(match.start())
            if match.re is _MARKER:
                self._marker(match)
            elif match.start() == self._indent_end():
                self._fence_line(match)
            else:
                self._fence_run(match)
        self._finish()
        return self.blocks, self.tags

    def _advance(self, pos: int) -> None:
        newlines = self.text.count("\n", self.last + 1, pos)
        if newlines:
            self.line += newlines
            self.line_start = self.text.rfind("\n", self.last + 1, pos) + 1
        self.last = pos

    def _lead_end(self) -> int:
        anchor = max(self.line_start, self.anchor)
        if self.lead_at != anchor:
            self.lead_at, self.lead = anchor, lead_end(self.text, anchor)
        return self.lead

    def _indent_end(self) -> int:
        if self.indent_line != self.line_start:
            blanks = _BLANKS.match(self.text, self.line_start)  # always matches: blanks may be none
            self.indent_line, self.indent = self.line_start, blanks.end() if blanks else self.line_start
        return self.indent

    def _line_end(self, pos: int) -> int:
        end = self.text.find("\n", pos)
        return len(self.text) if end < 0 else end

    def _open(self, fence: _Open | None) -> None:
        if fence is not None:
            self.fence, self.skip_until = fence, fence.code_start - 1

    def _close(self, code_end: int, closed: bool = True, end_line: int = 0) -> None:
        assert self.fence is not None
        end_line = end_line or self.line - 1  # the line before this event's
        self.blocks.append(_make_block(self.text, self.fence, len(self.blocks), code_end, end_line, closed))
        self.fence = None

    def _closing(self, run: str, end: int) -> bool:
        return self.fence is not None and _closes(self.fence, run) and closing_tail(self.text, end)

    def _close_run(self, end: int) -> None:
        self._close(self.line_start)
        self.anchor = end  # what follows on the line (markers, another fence) is read as a line's lead

    def _fence_line(self, match: re.Match[str]) -> None:
        """A run after nothing but indentation: unless it closes a block, its line is the fence's."""
        run, end = match.group(), match.end()
        if self._closing(run, end):
            self._close_run(end)
            return
        line_end = self.skip_until = self._line_end(end)
        if self.fence is None or self.fence.tentative:
            indent = _columns(self.text[self.line_start:match.start()])
            self._open(_opening(indent, run, self.text[end:line_end], self.line, line_end + 1, match.start()))

    def _fence_run(self, match: re.Match[str]) -> None:
        """A run after something else on its line: after the line's lead of markers, or after prose."""
        pos, end, run = match.start(), match.end(), match.group()
        clean = pos == self._lead_end()
        if clean and self._closing(run, end):
            self._close_run(end)
        elif clean and (self.fence is None or self.fence.tentative):
            line_end = self._line_end(end)
            self._open(_opening(0, run, self.text[end:line_end], self.line, line_end + 1, pos))
        elif self.fence is None and (found := prose_fence_info(self.text, end)) is not None:
            self._open(_Open(run[0], len(run), 0, found[0], self.line, found[1] + 1, pos, tentative=True))

    def _marker(self, match: re.Match[str]) -> None:
        token = match.group()
        if self.fence is not None and (token not in MAY_CLOSE or match.start() >= self._lead_end()):
            return  # inside code, only a closing tag in a line's lead counts
        tag = reasoning_tag(self.text, token, match.end())
        if tag is None or self.fence is not None and not tag.closing:
            return
        if self.fence is not None:
            self._close(self.line_start, closed=False)  # reasoning never contains its own closing tag
        self.tags.append(Tag(self.line, match.start(), tag.closing, tag.name))

    def _finish(self) -> None:
        if self.fence is not None:
            total = self.text.count("\n") + (0 if self.text.endswith("\n") else 1)
            self._close(len(self.text), closed=False, end_line=max(total, self.fence.fence_line))


def _events(text: str) -> Iterator[re.Match[str]]:
    """Fence runs and markers, in text order."""
    return heapq.merge(*(pattern.finditer(text) for pattern in (*_RUNS, _MARKER)), key=lambda m: m.start())


def scan_answer(text: str) -> tuple[list[Block], list[Tag]]:
    """Blocks and the reasoning tags outside them, in one pass; ``text``'s newlines already normalised."""
    return _Scanner(text).scan()


def find_blocks(text: str) -> list[Block]:
    """Every fenced code block, in order of appearance."""
    return scan_answer(normalise_newlines(text))[0]
