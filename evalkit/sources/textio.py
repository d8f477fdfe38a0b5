"""Reading a submission file as text: BOMs, CRLF, bad bytes, binaries and huge files, never a traceback.

Trusted side; reads submission files as bytes; never runs submission code.
"""

from __future__ import annotations

import codecs
import re
from pathlib import Path

from evalkit.records import EvalkitError

MAX_TEXT_BYTES = 64 * 1024 * 1024
_SNIFF_BYTES = 8192
_BAD_BYTE = re.compile("[\udc80-\udcff]")  # what surrogateescape makes of each undecodable byte
# Longest first: the UTF-32-LE BOM starts with the UTF-16-LE one.
_BOMS = ((codecs.BOM_UTF32_LE, "utf-32-le"), (codecs.BOM_UTF32_BE, "utf-32-be"),
         (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))


class UnreadableText(EvalkitError):
    """A submission file cannot be read as text; the message names the file and what to do."""


def normalise_newlines(text: str) -> str:
    """``text`` with every CRLF and lone CR turned into "\\n" (editors count each as one line break: so
    must we, to keep line numbers)."""
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def _bom_encoding(data: bytes) -> tuple[str, int] | None:
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return encoding, len(bom)
    return None


def _utf16_without_bom(sample: bytes) -> str | None:
    """'utf-16-le'/'utf-16-be' when NULs sit in every other byte, as in ASCII-range UTF-16 text."""
    pairs = len(sample) // 2
    if pairs < 2:
        return None
    even_nul = sample[0:pairs * 2:2].count(0)
    odd_nul = sample[1:pairs * 2:2].count(0)
    if odd_nul >= 0.9 * pairs and even_nul == 0:
        return "utf-16-le"
    if even_nul >= 0.9 * pairs and odd_nul == 0:
        return "utf-16-be"
    return None


def _decode_utf8(data: bytes, name: str) -> tuple[str, list[str]]:
    try:
        return data.decode("utf-8"), []
    except UnicodeDecodeError as err:
        first_line = data.count(b"\n", 0, err.start) + 1
    text = data.decode("utf-8", errors="surrogateescape")
    # surrogateescape keeps one character per bad byte where "ignore" drops it: counted, never listed
    bad = len(text) - len(data.decode("utf-8", errors="ignore"))
    noun = "byte is" if bad == 1 else "bytes are"
    warning = f"{name}: {bad} {noun} not valid UTF-8 (replaced with U+FFFD; first on line {first_line})"
    return _BAD_BYTE.sub("\ufffd", text), [warning]


def _decode_wide(data: bytes, encoding: str, name: str, note: str) -> tuple[str, list[str]]:
    warnings = [f"{name}: decoded as {encoding.upper()} ({note})"]
    try:
        return data.decode(encoding), warnings
    except UnicodeDecodeError:
        warnings.append(f"{name}: some bytes are not valid {encoding.upper()} (replaced with U+FFFD)")
        return data.decode(encoding, errors="replace"), warnings


def decode_text(data: bytes, name: str) -> tuple[str, list[str]]:
    """``data`` as text with "\\n" line breaks, and warnings about what had to be repaired."""
    if len(data) > MAX_TEXT_BYTES:
        raise UnreadableText(f"{name}: {len(data)} bytes is over the {MAX_TEXT_BYTES}-byte limit for an answer; "
                             f"trim it or remove it")
    bom = _bom_encoding(data)
    if bom is not None:
        text, warnings = _decode_wide(data[bom[1]:], bom[0], name, "byte-order mark")
    elif data.startswith(codecs.BOM_UTF8):
        text, warnings = _decode_utf8(data[len(codecs.BOM_UTF8):], name)
    elif b"\0" in data[:_SNIFF_BYTES]:
        wide = _utf16_without_bom(data[:_SNIFF_BYTES])
        if wide is None:
            raise UnreadableText(f"{name}: looks like a binary file (NUL bytes), not a text answer; "
                                 f"remove it or convert it to text")
        text, warnings = _decode_wide(data, wide, name, "no byte-order mark, guessed from NUL bytes")
    else:
        text, warnings = _decode_utf8(data, name)
    return normalise_newlines(text), warnings


def read_text(path: Path) -> tuple[str, list[str]]:
    """The text of the file at ``path`` (see ``decode_text``); UnreadableText when it cannot be had."""
    path = Path(path)
    try:
        if path.is_dir():
            raise UnreadableText(f"{path}: is a folder, not a text file; pass an answer file")
        size = path.stat().st_size
        if size > MAX_TEXT_BYTES:
            raise UnreadableText(f"{path}: {size} bytes is over the {MAX_TEXT_BYTES}-byte limit for an answer; "
                                 f"trim it or remove it")
        with path.open("rb") as handle:
            data = handle.read(MAX_TEXT_BYTES + 1)  # a file may grow (or be a device) after stat
    except OSError as err:
        reason = err.strerror or type(err).__name__
        raise UnreadableText(f"{path}: cannot read it ({reason}); check that it exists and is readable") from None
    return decode_text(data, str(path))
