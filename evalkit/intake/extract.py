"""Trusted side, nothing runs: text -> the Python code to evaluate: the block that binds ``ModelNew`` (pure; no I/O, no torch).

Blocks and reasoning tags come from ``evalkit.intake.fences`` (one linear scan, which also finds fences
after chat-template markers or prose on their line), and whether a block binds ModelNew (``class``, ``def``,
assignment, import alias) from ``evalkit.intake.bindings``. The time is linear in the text: a 20 MB answer
of prose takes well under a second, 20 MB of nothing but fence lines (the worst case) about ten on a slow
machine.

Which block: a block is *in reasoning* when the last reasoning tag before it opens reasoning (``<think>``,
Gemma's ``<|channel>``, a harmony channel other than ``final``), or when it comes before the final answer's
start: the last closing tag (``</think>``, ``<channel|>``, ``<|channel|>final``) that some ModelNew block
outside reasoning follows. Text before a closing tag is reasoning even without an opening tag (templates
often put ``<think>`` in the prompt). The last Python ModelNew block of the final answer wins over earlier
ones and over every draft in reasoning. When the final answer has none, the last ModelNew draft from the
reasoning is taken with a warning, whether the reasoning was closed (``</think>``, the harmony final
channel, with no code after it) or never closed (cut off). At most MAX_CANDIDATES blocks are listed.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import NamedTuple

from evalkit.intake.bindings import binds_model_new
from evalkit.intake.fences import Block, Tag, find_blocks, scan_answer
from evalkit.row_parts import CandidateRecord, ExtractionRecord
from evalkit.sources.textio import normalise_newlines

__all__ = ["MAX_CANDIDATES", "PYTHON_LANGUAGES", "Block", "Extraction", "extract", "find_blocks"]

PYTHON_LANGUAGES = frozenset({"python", "py", "python3", ""})
_MODEL_NEW = re.compile(r"^[ \t]*class\s+ModelNew\b", re.M)  # in prose: said so in the no-code reason
_CODE_START = re.compile(r"""\s*(?:import\s|from\s+[\w.]+\s+import\s|#|@|class\s|def\s|"{3}|'{3}|[A-Za-z_][\w.]*\s*=)""")
_SENTENCE_END = ('.', '!', '?', ':', ';', ')', ']', '}', '"', "'", '*', '`', '~')
MAX_CANDIDATES = 100  # rows of the candidate list; past it, the first and last halves and the chosen block


@dataclass
class Extraction:
    ok: bool
    reason: str  # one line: why this code, or why there is none
    code: str = ""
    truncated: bool = False
    block: Block | None = None
    whole_text: bool = False
    line_offset: int = 0  # code line i is source line i + line_offset
    candidates: list[CandidateRecord] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def source_line(self, code_line: int) -> int:
        """The line of the original text that code line ``code_line`` (1-based) came from."""
        return code_line + self.line_offset

    def to_dict(self) -> ExtractionRecord:
        return ExtractionRecord(ok=self.ok, reason=self.reason, code=self.code, truncated=self.truncated,
                                block=self.block.to_dict() if self.block else None, candidates=list(self.candidates),
                                whole_text=self.whole_text, line_offset=self.line_offset, warnings=list(self.warnings))


class _Answer(NamedTuple):
    """Where the blocks stand: the last reasoning tag before each, and where the final answer starts."""

    regions: list[Tag | None]
    boundary: Tag | None  # the closing tag the final answer follows (None: no ModelNew block follows one)
    final_from: int  # blocks whose fence starts after this offset, outside reasoning, are the final answer


def _defines(block: Block) -> bool:
    return binds_model_new(block.code)


def _in_reasoning(tag: Tag | None) -> bool:
    return tag is not None and not tag.closing


def _regions(blocks: list[Block], tags: list[Tag]) -> list[Tag | None]:
    """The last reasoning tag before each block (None where none is), by one merge of the two lists."""
    regions: list[Tag | None] = []
    last, i = None, 0
    for block in blocks:
        while i < len(tags) and tags[i].pos < block.fence_offset:
            last, i = tags[i], i + 1
        regions.append(last)
    return regions


def _final_boundary(eligible: list[Block], tags: list[Tag]) -> Tag | None:
    """The last closing tag that the last ModelNew block outside reasoning follows."""
    if not eligible:
        return None
    for tag in reversed(tags):
        if tag.closing and eligible[-1].fence_offset > tag.pos:
            return tag
    return None


def _answer(blocks: list[Block], model: list[Block], tags: list[Tag]) -> tuple[_Answer, list[Block]]:
    """Where the blocks stand, and the ModelNew blocks of the final answer (the pool to choose from)."""
    regions = _regions(blocks, tags)
    eligible = [b for b in model if not _in_reasoning(regions[b.index])]
    boundary = _final_boundary(eligible, tags)
    closers = [t.pos for t in tags if t.closing]
    final_from = boundary.pos if boundary else (closers[-1] if closers else -1)
    pool = [b for b in eligible if boundary is None or b.fence_offset > boundary.pos]
    return _Answer(regions, boundary, final_from), pool


def _in_final(block: Block, answer: _Answer) -> bool:
    return block.fence_offset > answer.final_from and not _in_reasoning(answer.regions[block.index])


def _why(block: Block, defines: bool, chosen: Block | None, answer: _Answer, in_final: bool) -> str:
    if block is chosen:
        if in_final:
            return "chosen: last Python block defining ModelNew in the final answer"
        return "chosen: last Python block defining ModelNew (none follows the reasoning; taken from it)"
    region = answer.regions[block.index]
    if answer.boundary is not None and block.fence_offset < answer.boundary.pos:
        return f"inside reasoning (before final {answer.boundary.name})"
    if region is not None and not region.closing:
        return f"inside reasoning (after {region.name})"
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


def _candidates(blocks: list[Block], defines: list[bool], chosen: Block | None,
                answer: _Answer) -> list[CandidateRecord]:
    rows = []
    for b in _listed(blocks, chosen):
        has_model, in_final = defines[b.index], _in_final(b, answer)
        rows.append(CandidateRecord(**b.to_dict(), in_final_answer=in_final, defines_model_new=has_model,
                                    status="chosen" if b is chosen else "rejected",
                                    why=_why(b, has_model, chosen, answer, in_final)))
    return rows


def _listing_warnings(blocks: int, listed: int) -> list[str]:
    if listed == blocks:
        return []
    return [f"{blocks} code blocks: the candidate list shows {listed} of them (the first and last "
            f"{MAX_CANDIDATES // 2}, and the chosen one)"]


def _chosen(block: Block, candidates: list[CandidateRecord]) -> Extraction:
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


_CUT_OFF = "cut off"  # what a reason says when the text ends mid-answer (``Extraction.truncated`` then)
# A text this short that ends mid-sentence is a reply, not an answer cut off by a length limit ("hello", a refusal).
CUT_OFF_MIN_CHARS = 400


def _no_code_reason(text: str, blocks: list[Block], tags: list[Tag]) -> str:
    if tags and not tags[-1].closing:
        name = tags[-1].name
        return (f"answer cut off inside the reasoning: {name} is never closed and no block defines ModelNew "
                f"({name} at line {tags[-1].line})")
    if not blocks:
        prose = _MODEL_NEW.search(text)
        last = _last_line(text)
        if not tags and not last.endswith(_SENTENCE_END) and len(text.strip()) >= CUT_OFF_MIN_CHARS:
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
    if not binds_model_new(text):
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
    blocks, tags = scan_answer(text)
    whole = _whole_text(text, bool(blocks))
    if whole is not None:
        return whole
    defines = [_defines(b) for b in blocks]
    model = [b for b, d in zip(blocks, defines) if d and b.language in PYTHON_LANGUAGES]
    answer, pool = _answer(blocks, model, tags)
    chosen = pool[-1] if pool else (model[-1] if model else None)  # else: the last draft in reasoning
    candidates = _candidates(blocks, defines, chosen, answer)
    listing = _listing_warnings(len(blocks), len(candidates))
    if chosen is None:
        reason = _no_code_reason(text, blocks, tags)
        return Extraction(ok=False, reason=reason, candidates=candidates, warnings=listing,
                          truncated=_CUT_OFF in reason)
    result = _chosen(chosen, candidates)
    result.warnings.extend(listing)
    if len(pool) > 1:
        result.warnings.append(f"{len(pool)} blocks define class ModelNew in the final answer; "
                               f"using the last (fence at line {chosen.fence_line})")
    return result
