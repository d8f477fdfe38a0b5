"""Trusted side: what sandboxes leave behind, and its end: every process of a run's sandboxes (``kill_group``),
with their cgroups; the System V shared memory segments they created; what their folders hold on disk, and what a
judged worker added to its build's folder (the build's own files stay: they are the answer's cache entry)."""

from __future__ import annotations

import ctypes
import fcntl
import os
import shutil
import signal
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any, Callable

from evalkit.sandbox.cgroup import remove_run_cgroups
from evalkit.sandbox.processes import MARKER_VARIABLE, sandbox_members

_IPC_RMID = 0


def folder_usage(folders: list[Path], max_files: int) -> tuple[int, int]:
    """Bytes and files under ``folders`` (links not followed), counting stops one file past ``max_files``."""
    used = files = 0
    stack = [str(folder) for folder in folders]
    while stack and files <= max_files:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                else:
                    files += 1
                    used += entry.stat(follow_symlinks=False).st_blocks * 512  # what it holds on disk: sparse files too
            except OSError:
                continue
    return used, files


def remove_shared_memory(pids: list[int]) -> None:
    """Remove the System V shared memory segments these processes created (they would outlive them)."""
    wanted = set(pids)
    try:
        lines = Path("/proc/sysvipc/shm").read_text().splitlines()[1:]
    except OSError:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    for line in lines:
        fields = line.split()
        if len(fields) > 4 and int(fields[4]) in wanted:
            libc.shmctl(int(fields[1]), _IPC_RMID, None)


def kill_group(group: str) -> int:
    """SIGKILL every live process of every sandbox of ``group`` (a run's ``Limits.group``); return how many."""
    members = sandbox_members(-1, f"{MARKER_VARIABLE}={group}.")
    for pid in members:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    remove_run_cgroups(group)
    return len(members)


def files_under(folder: Path) -> set[str]:
    """Every path under ``folder`` (links not followed)."""
    found = set()
    for root, dirs, files in os.walk(folder):
        found.update(os.path.join(root, name) for name in dirs + files)
    return found


def remove_added(folder: Path, before: set[str]) -> None:
    """Remove what was added under ``folder`` since ``before`` (``files_under``), outermost first."""
    for path in sorted(files_under(folder) - before, key=len):
        if os.path.lexists(path):
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.unlink(path)


def entry_lock(folder: Path, waiting: Callable[[], AbstractContextManager[Any]] = nullcontext) -> int:
    """A descriptor holding ``folder`` (a build-cache entry) for one judged worker, across every process on this
    host: blocks while another holds it, inside ``waiting()`` (entered only then). The lock file lies beside the
    folder, out of any worker's reach; the entry is free again once the descriptor is closed (or its process
    ends)."""
    fd = os.open(folder.parent / f".{folder.name}.judging", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        with waiting():
            fcntl.flock(fd, fcntl.LOCK_EX)
    return fd
