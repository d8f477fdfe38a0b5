"""The text of an answer, for the detail pages of rows that have no code to show (no side of the trust
boundary: reads files as text only, never runs or imports them, never torch).

Rows record where an answer came from (``path``: a file, or ``<manifest>.jsonl:<line>``) and the SHA-256
of its text, not the text itself (a row may carry it as the optional field ``answer``). ``answer_of``
reads it back and shows it only when its hash still matches the row's, so a page never shows text
other than the one judged; otherwise it says why the text is not shown.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.records import sha256_text

MAX_SHOWN_CHARS = 200_000  # a detail page shows at most this much of an answer
_MANIFEST_LINE = re.compile(r"^(?P<file>.+\.jsonl):(?P<line>\d+)$")

Row = dict[str, Any]


@dataclass(frozen=True)
class Answer:
    """An answer's text (None when it cannot be shown) and a note saying where it came from, or why not."""

    text: str | None
    note: str


def _newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _decoded(data: bytes) -> str:
    text = data.decode("utf-8")  # strict: an answer that needed repair is not re-decoded here
    return _newlines(text[1:] if text.startswith("\ufeff") else text)


def _read(where: str, bases: list[Path]) -> str | None:
    """The text at ``where`` (a file, or a manifest's line), looked up as given and then under each base."""
    match = _MANIFEST_LINE.match(where)
    name = match.group("file") if match else where
    for candidate in [Path(name)] + [base / name for base in bases if not Path(name).is_absolute()]:
        try:
            data = candidate.read_bytes()
        except OSError:
            continue
        if not match:
            return _decoded(data)
        lines = data.decode("utf-8", errors="replace").splitlines()
        number = int(match.group("line"))
        if 0 < number <= len(lines):
            row = json.loads(lines[number - 1])
            return _newlines(str(row.get("text", ""))) if isinstance(row, dict) else None
    return None


def answer_of(row: Row, bases: list[Path]) -> Answer:
    """The row's answer text when it can be had and its SHA-256 matches the row's, else why not."""
    if isinstance(row.get("answer"), str):
        return _capped(row["answer"], "the answer as recorded in the row")
    where = str(row.get("path") or "")
    try:
        text = _read(where, bases) if where else None
    except (ValueError, UnicodeDecodeError):
        text = None
    if text is None:
        return Answer(None, f"the answer's text is not in the report and {where or 'its file'} cannot be read "
                            "from here (score and rebuild the report where the answers are)")
    if row.get("sha256") and sha256_text(text) != row.get("sha256"):
        return Answer(None, f"{where} has changed since it was judged (its SHA-256 differs), so it is not shown")
    return _capped(text, f"read from {where} (same SHA-256 as judged)")


def _capped(text: str, note: str) -> Answer:
    if len(text) <= MAX_SHOWN_CHARS:
        return Answer(text, note)
    return Answer(text[:MAX_SHOWN_CHARS], f"{note}; the first {MAX_SHOWN_CHARS} of {len(text)} characters")

