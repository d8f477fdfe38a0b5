"""Trusted side: a uid of its own for every sandbox a root judge starts, never the judge's, never another's.

Sandboxes that share a uid can reach one another wherever the kernel checks only uids: signals, ``prlimit``,
``ptrace``, ``/proc/<pid>/mem``, files. Seccomp and Landlock close most of these doors on recent kernels
(``untrusted/confine.py``); a uid per sandbox closes them on any kernel. A root judge leases each sandbox a uid
from ``SANDBOX_UIDS`` (no user of the machine's, no group either: the sandbox's gid is the same number) for its
whole life:

- a lease is an exclusive ``flock`` on a file named after the uid in a folder only root may enter, held by the
  launcher that started the sandbox, so launchers in other processes (the build pool, judge processes, another
  run on the same host) never hand out the same uid at once; the kernel drops it if the launcher dies;
- a uid that any live process still runs as (a process that escaped an earlier sandbox's kill) is never leased;
- the launcher gives a lease back only once no process of its sandbox is left.
"""

from __future__ import annotations

import fcntl
import grp
import logging
import os
import pwd
import secrets
import tempfile
from pathlib import Path

from evalkit.records import EvalkitError

logger = logging.getLogger(__name__)

SANDBOX_UIDS = range(61000, 65000)  # below 65534 (nobody): within the 65536 uids a container's root usually maps
LEASE_FOLDER = "evalkit-sandbox-uids"


class NoSandboxUid(EvalkitError, RuntimeError):
    """Every uid of the pool is leased or in use."""


def lease_folder() -> Path:
    """Where the leases' lock files live: under the system's temporary folder, entered by root only."""
    folder = Path(tempfile.gettempdir()) / LEASE_FOLDER
    folder.mkdir(mode=0o700, exist_ok=True)
    return folder


def uids_in_use() -> set[int]:
    """The effective uid of every live process (the owner of its /proc entry)."""
    uids = set()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                uids.add(entry.stat().st_uid)
            except OSError:  # ended meanwhile
                pass
    return uids


def _known(uid: int) -> bool:
    """Whether ``uid`` names a user, or its number a group, of this machine: never a sandbox's."""
    for lookup in (pwd.getpwuid, grp.getgrgid):
        try:
            lookup(uid)
            return True
        except KeyError:
            pass
    return False


class UidLease:
    """One sandbox's uid (and gid, the same number), held until ``release``."""

    def __init__(self, uid: int, lock_fd: int) -> None:
        self.uid, self._lock_fd = uid, lock_fd

    @property
    def identity(self) -> tuple[int, int]:
        return self.uid, self.uid

    @classmethod
    def take(cls, folder: Path | None = None, uids: range = SANDBOX_UIDS) -> "UidLease":
        """A uid of ``uids`` that no other launcher holds and no process runs as, starting at a random place."""
        folder = folder or lease_folder()
        in_use = uids_in_use()
        start = secrets.randbelow(len(uids))
        for offset in range(len(uids)):
            uid = uids[(start + offset) % len(uids)]
            if uid in in_use or _known(uid):
                continue
            fd = os.open(folder / f"{uid}.lock", os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            return cls(uid, fd)
        raise NoSandboxUid(f"every sandbox uid in {uids.start}-{uids.stop - 1} is leased or in use: too many "
                           f"sandboxes at once, or processes left behind by earlier ones (ps -eo uid,pid,cmd); "
                           f"end them, or lower --jobs")

    def release(self) -> None:
        """Give the uid back (idempotent): only once no process of its sandbox is left."""
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1
