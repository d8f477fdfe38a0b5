"""Trusted side: reading compiler output (text the submission's code caused) into error records.

Every pattern here is anchored and has no nested quantifiers: compiler logs are untrusted text, and
reading them must stay linear in their size.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

_COMPILER_ERROR = re.compile(r"^(?P<file>[^\s:]+\.(?:cpp|cu|cuh|h|hpp|cc)):(?P<line>\d+)(?::\d+)?:\s*(?:fatal )?error:?\s*(?P<msg>.*)$")
_NVCC_ERROR = re.compile(r"^(?P<file>[^\s(]+\.(?:cu|cuh))\((?P<line>\d+)\):\s*error:?\s*(?P<msg>.*)$")


def first_compiler_errors(log: str, extension_root: Path, limit: int = 5) -> list[dict[str, Any]]:
    """The first compiler error lines, each with the offending source line when it can be read."""
    errors: list[dict[str, Any]] = []
    for raw in log.splitlines():
        line = raw.strip()
        match = _COMPILER_ERROR.match(line) or _NVCC_ERROR.match(line)
        if not match:
            continue
        entry = {"file": Path(match["file"]).name, "line": int(match["line"]), "message": match["msg"].strip()}
        entry["source"] = _source_line(Path(match["file"]), extension_root, entry["line"])
        if entry not in errors:
            errors.append(entry)
        if len(errors) >= limit:
            break
    if not errors:
        generic = [ln.strip() for ln in log.splitlines() if "error" in ln.lower()][:limit]
        errors = [{"file": "", "line": 0, "message": ln, "source": ""} for ln in generic]
    return errors


def _source_line(path: Path, extension_root: Path, line: int) -> str:
    candidates = [path] if path.is_absolute() else list(extension_root.glob(f"*/{path.name}"))
    for candidate in candidates:
        try:
            lines = candidate.read_text(errors="replace").splitlines()
        except OSError:
            continue
        if 0 < line <= len(lines):
            return lines[line - 1]
    return ""


def map_to_submission(source: str, code: str) -> int | None:
    """1-based line of ``code`` whose text matches a generated-source line, if exactly findable."""
    needle = source.strip()
    if len(needle) < 4:
        return None
    for number, text in enumerate(code.splitlines(), start=1):
        if text.strip() == needle:
            return number
    return None
