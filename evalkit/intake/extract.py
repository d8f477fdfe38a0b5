"""Trusted side, nothing runs: text -> the Python code to evaluate: the block defining ``class ModelNew`` (pure; no I/O, no torch).

Fences are paired by a small state machine over fence-like lines and think tags (found with one linear
regex scan; each is one step, and no step looks back past the one before), so the time is linear in the
text: a 20 MB answer of prose takes well under a second, 20 MB of nothing but fence lines (the worst case)
about ten on a slow machine. The final answer after ``</think>`` wins over drafts in the reasoning, and the
last ModelNew block in it wins over earlier ones; at most MAX_CANDIDATES blocks are listed as candidates.
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from evalkit.sources.textio import normalise_newlines

PYTHON_LANGUAGES = frozenset({"python", "py", "python3", ""})
_MODEL_NEW = re.compile(r"^[ \t]*class\s+ModelNew\b", re.M)
# Fence-like lines and think tags, in text order: the events the state machine consumes.
_EVENT = re.compile(r"^([ \t]*)(`{3,}|~{3,})([^\n]*)|</?think>", re.M)
_CODE_START = re.compile(r"""\s*(?:import\s|from\s+[\w.]+\s+import\s|#|@|class\s|def\s|"{3}|'{3}|[A-Za-z_][\w.]*\s*=)""")
_SENTENCE_END = ('.', '!', '?', ':', ';', ')', ']', '}', '"', "'", '*', '`', '~')
_TAB = 4
MAX_CANDIDATES = 100  # rows of the candidate list; past it, the first and last halves and the chosen block


@dataclass(frozen=True)
class Block:
    index: int  # 0-based order of appearance
    language: str  # first word of the info string, lowercased ("" if none)
    fence_line: int  # 1-based line of the opening fence
    start_line: int  # first code line (fence excluded)
    end_line: int  # last code line; start_line - 1 for an empty block
    closed: bool  # False when the text (or the reasoning, at </think>) ended before a closing fence
    indent: int  # columns of indentation of the opening fence
    code: str  # dedented by the fence's indentation

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "language": self.language, "fence_line": self.fence_line,
                "start_line": self.start_line, "end_line": self.end_line, "closed": self.closed,
                "indent": self.indent}


@dataclass
class Extraction:
    ok: bool
    reason: str  # one line: why this code, or why there is none
    code: str = ""
    truncated: bool = False
    block: Block | None = None
    whole_text: bool = False
    line_offset: int = 0  # code line i is source line i + line_offset
    candidates: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def source_line(self, code_line: int) -> int:
        """The line of the original text that code line ``code_line`` (1-based) came from."""
        return code_line + self.line_offset

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "reason": self.reason, "code": self.code, "truncated": self.truncated,
                "block": self.block.to_dict() if self.block else None, "candidates": list(self.candidates),
                "whole_text": self.whole_text, "line_offset": self.line_offset, "warnings": list(self.warnings)}


class _Tag(NamedTuple):
    line: int
    pos: int
    closing: bool


class _Open(NamedTuple):
    char: str
    length: int
    indent: int
    language: str
    fence_line: int
    code_start: int


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
    return Block(index, fence.language, fence.fence_line, fence.fence_line + 1, end_line, closed, fence.indent, code)


def _opening(match: re.Match[str], line: int) -> _Open | None:
    indent, run, info = match.groups()
    if run[0] == "`" and "`" in info:
        return None  # CommonMark: a backtick fence's info string has no backticks (```py``` is inline)
    words = info.split()
    language = words[0].strip("{}.").lower() if words else ""
    return _Open(run[0], len(run), _columns(indent), language, line, match.end() + 1)


def _scan(text: str) -> tuple[list[Block], list[_Tag]]:
    """Blocks and the think tags outside them, in one pass over the fence-like lines."""
    blocks: list[Block] = []
    tags: list[_Tag] = []
    fence: _Open | None = None
    line, last = 1, -1  # last: where the previous event starts (never at a "\n")
    for match in _EVENT.finditer(text):
        pos = match.start()
        newlines = text.count("\n", last + 1, pos)
        line += newlines
        first_on_line, last = newlines > 0 or last < 0, pos
        token = match.group()
        if token[-1] == ">":
            if fence is not None and token == "</think>" and first_on_line:
                # Only a line's first event looks back to the line start: linear however many tags a line has.
                line_start = text.rfind("\n", 0, pos) + 1
                if not text[line_start:pos].strip():
                    # Reasoning never contains its own closing tag: an open fence was cut off here.
                    blocks.append(_make_block(text, fence, len(blocks), line_start, line - 1, closed=False))
                    fence = None
            if fence is None:
                tags.append(_Tag(line, pos, token == "</think>"))
        elif fence is None:
            fence = _opening(match, line)
        elif match.group(2)[0] == fence.char and len(match.group(2)) >= fence.length and not match.group(3).strip():
            blocks.append(_make_block(text, fence, len(blocks), pos, line - 1, closed=True))
            fence = None
    if fence is not None:
        total = text.count("\n") + (0 if text.endswith("\n") else 1)
        blocks.append(_make_block(text, fence, len(blocks), len(text), max(total, fence.fence_line), closed=False))
    return blocks, tags


def find_blocks(text: str) -> list[Block]:
    """Every fenced code block, in order of appearance."""
    return _scan(normalise_newlines(text))[0]


def _defines(block: Block) -> bool:
    return "ModelNew" in block.code and bool(_MODEL_NEW.search(block.code))


def _final_boundary(model: list[Block], tags: list[_Tag]) -> int:
    """Line of the last </think> that some ModelNew block follows (0: search the whole text)."""
    for tag in reversed(tags):
        if tag.closing and model and model[-1].fence_line > tag.line:
            return tag.line
    return 0


def _final_from(tags: list[_Tag], boundary: int) -> int:
    """Blocks whose fence is after this line are in the final answer (after the reasoning)."""
    if boundary or not tags:
        return boundary
    return tags[-1].line if tags[-1].closing else sys.maxsize  # an unclosed <think>: all reasoning


def _why(block: Block, defines: bool, chosen: Block | None, boundary: int, in_final: bool) -> str:
    if block is chosen:
        if in_final:
            return "chosen: last Python block defining ModelNew in the final answer"
        return "chosen: last Python block defining ModelNew (none follows the reasoning; taken from it)"
    if boundary and block.fence_line <= boundary:
        return "inside reasoning (before final </think>)"
    if block.language not in PYTHON_LANGUAGES:
        return f"language '{block.language}' is not Python"
    if not defines:
        return "does not define class ModelNew"
    return "an earlier ModelNew block; a later one wins"


def _listed(blocks: list[Block], chosen: Block | None) -> list[Block]:
    """The blocks the candidate list shows: every one, unless an answer has more than MAX_CANDIDATES."""
    half = MAX_CANDIDATES // 2
    if len(blocks) <= MAX_CANDIDATES:
        return blocks
    middle = [chosen] if chosen is not None and half <= chosen.index < len(blocks) - half else []
    return blocks[:half] + middle + blocks[-half:]


def _candidates(blocks: list[Block], defines: list[bool], chosen: Block | None, boundary: int,
                final_from: int) -> list[dict[str, Any]]:
    rows = []
    for b in _listed(blocks, chosen):
        has_model, in_final = defines[b.index], b.fence_line > final_from
        rows.append({**b.to_dict(), "in_final_answer": in_final, "defines_model_new": has_model,
                     "status": "chosen" if b is chosen else "rejected",
                     "why": _why(b, has_model, chosen, boundary, in_final)})
    return rows


def _listing_warnings(blocks: int, listed: int) -> list[str]:
    if listed == blocks:
        return []
    return [f"{blocks} code blocks: the candidate list shows {listed} of them (the first and last "
            f"{MAX_CANDIDATES // 2}, and the chosen one)"]


def _chosen(block: Block, candidates: list[dict[str, Any]]) -> Extraction:
    row = next(c for c in candidates if c["status"] == "chosen")
    why, in_final = row["why"], row["in_final_answer"]
    where = f"fence at line {block.fence_line}, code lines {block.start_line}-{block.end_line}"
    result = Extraction(ok=True, reason=f"{why} ({where})", code=block.code, truncated=not block.closed,
                        block=block, line_offset=block.start_line - 1, candidates=candidates)
    if not block.closed:
        result.reason += "; cut off: no closing fence"
        result.warnings.append(f"the code block at line {block.fence_line} has no closing fence: the answer "
                               f"looks cut off, the code may be incomplete")
    if not in_final:
        result.warnings.append("no block after the reasoning defines class ModelNew; using the last draft "
                               "from inside the reasoning")
    return result


def _last_line(text: str) -> str:
    return text.rstrip().rsplit("\n", 1)[-1].strip()


def _shorten(line: str) -> str:
    return line if len(line) <= 80 else line[:77] + "..."


def _no_code_reason(text: str, blocks: list[Block], tags: list[_Tag]) -> str:
    if tags and not tags[-1].closing:
        return ("answer cut off inside the reasoning: <think> is never closed and no block defines ModelNew "
                f"(<think> at line {tags[-1].line})")
    if not blocks:
        prose = _MODEL_NEW.search(text)
        last = _last_line(text)
        if not tags and not last.endswith(_SENTENCE_END):
            return ("no fenced code block; the text appears cut off before its final answer "
                    f"(last line: {_shorten(last)!r})")
        if prose:
            line = text.count("\n", 0, prose.start()) + 1
            return f"no fenced code block; class ModelNew appears only unfenced in prose (line {line}), not taken as code"
        return "no fenced code block and no code defining class ModelNew"
    n = len(blocks)
    reason = f"{n} code block{'s' if n != 1 else ''} but none defines class ModelNew"
    other = [b for b in blocks if _defines(b)]
    if other:
        reason = (f"{n} code block{'s' if n != 1 else ''} but none is a Python block defining class ModelNew "
                  f"(the '{other[-1].language}' block at line {other[-1].fence_line} defines it)")
    if not blocks[-1].closed:
        reason += f"; the last block (line {blocks[-1].fence_line}) is cut off"
    return reason


def _whole_text(text: str, has_blocks: bool) -> Extraction | None:
    """The whole text as Python, if it is a Python file defining ModelNew."""
    if not _MODEL_NEW.search(text):
        return None
    try:
        ast.parse(text)
        return Extraction(ok=True, reason="the whole text is Python defining class ModelNew", code=text,
                          whole_text=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as err:
        error = err
    if has_blocks or not _CODE_START.match(text):
        return None
    where = f"line {error.lineno}: {error.msg}" if isinstance(error, SyntaxError) else type(error).__name__
    return Extraction(ok=True, reason="the whole text taken as Python: it starts like code and defines class "
                      "ModelNew", code=text, whole_text=True,
                      warnings=[f"the text is not valid Python ({where}); taken whole anyway"])


def extract(text: str) -> Extraction:
    """The code to evaluate out of an answer, with why it was chosen (or why there is none)."""
    text = normalise_newlines(text)
    if not text.strip():
        return Extraction(ok=False, reason="empty text")
    blocks, tags = _scan(text)
    whole = _whole_text(text, bool(blocks))
    if whole is not None:
        return whole
    defines = [_defines(b) for b in blocks]
    model = [b for b, d in zip(blocks, defines) if d and b.language in PYTHON_LANGUAGES]
    boundary = _final_boundary(model, tags)
    pool = [b for b in model if b.fence_line > boundary]
    chosen = pool[-1] if pool else None
    candidates = _candidates(blocks, defines, chosen, boundary, _final_from(tags, boundary))
    listing = _listing_warnings(len(blocks), len(candidates))
    if chosen is None:
        return Extraction(ok=False, reason=_no_code_reason(text, blocks, tags), candidates=candidates,
                          warnings=listing)
    result = _chosen(chosen, candidates)
    result.warnings.extend(listing)
    if len(pool) > 1:
        result.warnings.append(f"{len(pool)} blocks define class ModelNew in the final answer; "
                               f"using the last (fence at line {chosen.fence_line})")
    return result
