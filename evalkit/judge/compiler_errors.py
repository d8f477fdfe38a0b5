"""Trusted side: reading compiler output (text the submission's code caused) into error records.

Compiler logs are untrusted text, and reading them must stay linear in their size: every pattern here
is anchored, has no nested quantifiers and looks at no more than _MAX_LINE characters of a line. The
source files an error names are the submission's too (its build wrote them): only the first ``limit``
distinct errors look one up, and only the first _MAX_SOURCE_BYTES of a regular file are read (never a
FIFO or a device, which could block or never end).
"""

from __future__ import annotations

import glob
import os
import re
import stat
from collections.abc import Iterable
from itertools import islice
from pathlib import Path

from evalkit.row_parts import CompilerErrorRecord

_COMPILER_ERROR = re.compile(r"^(?P<file>[^\s:]+\.(?:cpp|cu|cuh|h|hpp|cc)):(?P<line>\d{1,9})(?::\d+)?:\s*(?:fatal )?error:?\s*(?P<msg>.*)$")
_NVCC_ERROR = re.compile(r"^(?P<file>[^\s(]+\.(?:cu|cuh))\((?P<line>\d{1,9})\):\s*error:?\s*(?P<msg>.*)$")
_MAX_LINE = 4096  # characters of a log line the patterns look at
_MAX_TEXT = 2000  # characters kept of a message or a source line
_MAX_SOURCE_BYTES = 4 * 1024 * 1024  # read of a source file an error names
_MAX_SOURCE_FILES = 8  # files of that name tried under the extension folder


def first_compiler_errors(log: str, extension_root: Path, limit: int = 5) -> list[CompilerErrorRecord]:
    """The first compiler error lines, each with the offending source line when it can be read."""
    lines = log.splitlines()
    errors: list[CompilerErrorRecord] = []
    seen: set[tuple[str, int, str]] = set()
    for raw in lines:
        match = _error_match(raw)
        if match is None:
            continue
        name = match["file"].rpartition("/")[2]  # what Path(...).name gives, without a Path per line
        key = (name, int(match["line"]), _clip(match["msg"].strip()))
        if key in seen:  # before the source lookup: a log repeating one error reads no file again
            continue
        seen.add(key)
        source = _source_line(Path(match["file"]), extension_root, key[1])
        errors.append(CompilerErrorRecord(file=key[0], line=key[1], message=key[2], source=source))
        if len(errors) >= limit:
            break
    return errors or _generic_errors(lines, limit)


_JIT_AT = re.compile(r"^(?:[\w.]{1,200}: )?at (?P<line>\d{1,9}):(?P<col>\d{1,9}):$")
_CARET = re.compile(r"^\s*\^+\s*$")


def first_jit_errors(text: str) -> list[CompilerErrorRecord]:
    """A kernel compile error a JIT raised at its first call (Triton's ``CompilationError``): ``at L:C:``, the
    kernel's source down to the offending line, a caret under it, then the error. The offending line is its
    ``source``, so it maps back to the answer's line (``map_to_submission``); ``line`` is within the kernel."""
    lines = [line[:_MAX_LINE] for line in text.splitlines()]
    for index, line in enumerate(lines):
        at = _JIT_AT.match(line.strip())
        if at is None:
            continue
        caret = next((i for i in range(index + 1, len(lines)) if _CARET.match(lines[i])), None)
        if caret is None or caret == index + 1:
            continue
        message = next((l.strip() for l in lines[caret + 1:] if l.strip()), "")
        return [CompilerErrorRecord(file="<jit kernel>", line=int(at["line"]), message=_clip(message),
                                    source=_clip(lines[caret - 1]))]
    return []


def _error_match(raw: str) -> re.Match[str] | None:
    if "error" not in raw:  # both patterns need it: most lines cost no regular expression
        return None
    line = raw.strip()[:_MAX_LINE]
    return _COMPILER_ERROR.match(line) or _NVCC_ERROR.match(line)


def _generic_errors(lines: list[str], limit: int) -> list[CompilerErrorRecord]:
    """Lines that merely mention an error, when none has a compiler's file:line form."""
    mentions = (line.strip() for line in lines if "error" in line.lower())
    return [CompilerErrorRecord(file="", line=0, message=_clip(line), source="") for line in islice(mentions, limit)]


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_TEXT else text[:_MAX_TEXT - 3] + "..."


def _source_line(path: Path, extension_root: Path, line: int) -> str:
    try:
        for candidate in _source_files(path, extension_root):
            lines = _read_head(candidate).splitlines()
            if 0 < line <= len(lines):
                return _clip(lines[line - 1])
    except OSError:  # e.g. a name longer than the file system allows
        pass
    return ""


def _source_files(path: Path, extension_root: Path) -> Iterable[Path]:
    if path.is_absolute():
        return [path]
    # The name comes from the log: escaped, it is only ever a name, never a pattern.
    return islice(extension_root.glob(f"*/{glob.escape(path.name)}"), _MAX_SOURCE_FILES)


def _read_head(path: Path) -> str:
    """The first _MAX_SOURCE_BYTES of a regular file; "" for anything else or what cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO opens at once instead of waiting for a writer
    except OSError:
        return ""
    try:
        with open(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                return ""
            return handle.read(_MAX_SOURCE_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return ""


def map_to_submission(source: str, code: str) -> int | None:
    """1-based line of ``code`` whose text matches a generated-source line, if exactly findable."""
    needle = source.strip()
    if len(needle) < 4 or needle not in code:
        return None
    for number, text in enumerate(code.splitlines(), start=1):
        if text.strip() == needle:
            return number
    return None
