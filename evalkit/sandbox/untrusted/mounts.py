"""Untrusted side (the worker calls it on itself as root, before it becomes its sandbox uid and before any
submission code runs): the way to this Python, opened in a mount namespace of its own.

A Python that lives under a folder only root may enter (``/root/.pyenv``, a virtual environment in ``/root``:
common in containers) cannot be read by the uid a sandbox becomes. Rather than run the sandbox as root, the
worker moves into a private mount namespace and, for each such closed folder, mounts an empty tmpfs over it
(open to all, writable by root only) with only the folders this Python needs bound back in place: its prefixes
and import path. Everything else in the closed folder (keys, tokens, other projects) is hidden from the sandbox;
nothing changes outside the namespace.
"""

from __future__ import annotations

import ctypes
import os
import stat
import sys
from pathlib import Path

_CLONE_NEWNS = 0x00020000
_MS_BIND, _MS_REC, _MS_PRIVATE = 0x1000, 0x4000, 1 << 18


def needed_folders(extra: list[str] | None = None) -> list[str]:
    """The folders this Python reads from: its prefixes and every folder on its import path, outermost only."""
    candidates = [sys.base_prefix, sys.base_exec_prefix, sys.prefix, sys.exec_prefix, *sys.path, *(extra or [])]
    folders = set()
    for path in candidates:
        if not path:
            continue
        real = os.path.realpath(path)
        folder = real if os.path.isdir(real) else os.path.dirname(real)
        if os.path.isdir(folder):
            folders.add(folder)
    return sorted(folder for folder in folders
                  if not any(folder != other and folder.startswith(other + os.sep) for other in folders))


def closed_folder(path: str, uid: int) -> str | None:
    """The outermost folder above ``path`` (or ``path`` itself) that ``uid`` (whose gid is the same number) may not
    enter, if any."""
    parts = Path(path).parts
    for depth in range(2, len(parts) + 1):
        folder = os.path.join(*parts[:depth])
        info = os.stat(folder)
        allowed = (stat.S_IXOTH | (stat.S_IXUSR if info.st_uid == uid else 0)
                   | (stat.S_IXGRP if info.st_gid == uid else 0))
        if not info.st_mode & allowed:
            return folder
    return None


def open_the_way(uid: int, extra: list[str] | None = None) -> list[str]:
    """Make every needed folder (and each of ``extra``) under a folder closed to ``uid`` reachable by it, in a mount
    namespace of this process's own. The closed folders opened."""
    closed: dict[str, list[str]] = {}
    for folder in needed_folders(extra):
        outer = closed_folder(folder, uid)
        if outer is not None:
            closed.setdefault(outer, []).append(folder)
    if not closed:
        return []
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(_CLONE_NEWNS) != 0 or _mount(libc, None, "/", None, _MS_REC | _MS_PRIVATE) != 0:
        return []
    return [outer for outer, inner in sorted(closed.items()) if _open(libc, outer, inner)]


def still_closed(uid: int, extra: list[str] | None = None) -> list[str]:
    """The needed folders (and ``extra``) that ``uid`` still may not reach."""
    return [folder for folder in needed_folders(extra) if closed_folder(folder, uid) is not None]


def _open(libc: ctypes.CDLL, outer: str, inner: list[str]) -> bool:
    """Hold each of ``inner`` by a descriptor, cover ``outer`` with an open tmpfs, bind each back in place from its
    descriptor (no staging folder: a folder under ``outer`` would be covered too)."""
    held = [(folder, os.open(folder, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)) for folder in inner]
    try:
        if _mount(libc, "tmpfs", outer, "tmpfs", 0, "mode=0755,size=1m") != 0:
            return False
        for folder, fd in held:
            os.makedirs(folder, exist_ok=True)
            _mount(libc, f"/proc/self/fd/{fd}", folder, None, _MS_BIND | _MS_REC)
        return True
    finally:
        for _, fd in held:
            os.close(fd)


def _mount(libc: ctypes.CDLL, source: str | None, target: str, fstype: str | None, flags: int,
           data: str | None = None) -> int:
    encode = (lambda text: text.encode() if text is not None else None)
    return libc.mount(encode(source), encode(target), encode(fstype), ctypes.c_ulong(flags), encode(data))
