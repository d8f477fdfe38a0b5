"""Trusted side: what a build left in its cache entry, to tell whether anything rewrote it since.

A judged worker owns its build's extension folder while it runs (``sandbox.launcher``: it loads the extension
from there), and only what it *adds* is removed after it (``sandbox.remains.remove_added``). A file it rewrote, or
replaced, or removed would stay for every later judging of the same text. So the builder records each file's
size and digest once the build succeeds (``manifest``), and checks them each time the cached build is used
(``changed``): an entry that no longer matches is built again. An honest cached load leaves every file as it was
(torch compares the sources and ninja finds nothing to do); the files it is allowed to touch are left out.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from evalkit.sandbox.remains import files_under

# torch's lock file (made and removed by each load) and ninja's logs: written by tools, never loaded as code
UNCHECKED = frozenset({"lock", ".ninja_log", ".ninja_deps"})
_CHUNK = 1 << 20
UNREADABLE = "unreadable"  # no digest is this: such a file never matches


def _digest(path: str, mode: int) -> str:
    """A regular file's sha256, a link's target, or the kind of anything else (never opened: a FIFO would block)."""
    if stat.S_ISLNK(mode):
        return "link:" + os.readlink(path)
    if not stat.S_ISREG(mode):
        return f"mode:{stat.S_IFMT(mode):o}"
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _entries(folder: Path) -> dict[str, os.stat_result]:
    """Every file, link and other non-folder under ``folder`` (links not followed), by path relative to it."""
    found = {}
    for path in files_under(folder):
        try:
            info = os.lstat(path)
        except OSError:  # gone since the walk
            continue
        if os.path.basename(path) not in UNCHECKED and not stat.S_ISDIR(info.st_mode):
            found[os.path.relpath(path, folder)] = info
    return found


def manifest(folder: Path) -> dict[str, list[object]]:
    """``[size, digest]`` of every file under ``folder`` (a build's extension folder), by relative path. A file the
    builder cannot read (a build may leave one so) is recorded as such, and counts as changed at every use."""
    recorded: dict[str, list[object]] = {}
    for rel, info in _entries(folder).items():
        try:
            recorded[rel] = [info.st_size, _digest(str(folder / rel), info.st_mode)]
        except OSError:
            recorded[rel] = [info.st_size, UNREADABLE]
    return recorded


def changed(folder: Path, recorded: dict[str, list[object]]) -> list[str]:
    """The recorded files under ``folder`` that are gone or differ (size first, so a file grown huge is never
    read); files added since are not counted (a judged worker's additions are removed after it)."""
    try:
        now = _entries(folder)
    except OSError:
        return sorted(recorded)
    differing = []
    for rel, (size, digest) in recorded.items():
        info = now.get(rel)
        try:
            if info is None or info.st_size != size or _digest(str(folder / rel), info.st_mode) != digest:
                differing.append(rel)
        except OSError:
            differing.append(rel)
    return differing
