"""Trusted side: who a sandbox runs as: its user (when evalkit runs as root), its environment, its folders.

A worker started by root becomes ``UNPRIVILEGED_USER`` (which leaves it no capabilities) when that user
can run it: read this Python, torch and evalkit, and enter the folders the worker writes to. Where it
cannot, the worker stays uid 0 and drops every capability instead (``sandbox/untrusted/privileges.py``).
"""

from __future__ import annotations

import logging
import os
import pwd
import stat
import subprocess
import sys
from pathlib import Path

logger = logging.getLogger(__name__)

UNPRIVILEGED_USER = "nobody"
_KEEP_ENV = (
    "PATH", "LANG", "LC_ALL", "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH",
    "CC", "CXX", "NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS", "TORCH_CUDA_ARCH_LIST", "NCCL_NVLS_ENABLE",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS", "OMP_NUM_THREADS", "CUDAHOSTCXX",
    "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES",
)


def package_root() -> Path:
    """The folder holding the ``evalkit`` package, so ``python -m evalkit.sandbox.untrusted.worker`` finds it
    also where evalkit is run from a checkout rather than installed."""
    return Path(__file__).resolve().parents[2]


def scrubbed_env(extra: dict[str, str], home: Path) -> dict[str, str]:
    """A minimal environment: no tokens, keys or user settings leak into submission code."""
    env = {k: os.environ[k] for k in _KEEP_ENV if k in os.environ}
    env.update(HOME=str(home), TMPDIR=str(home), PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1",
               PYTHONPATH=str(package_root()), PYTHONNOUSERSITE="1")
    env.update(extra)
    return env


def unprivileged_identity(user: str = UNPRIVILEGED_USER) -> tuple[int, int] | None:
    """(uid, gid) of ``user`` when this process is root and that user can run a worker, else None.

    The user must be able to read this Python, torch and evalkit; where they live under a folder only root
    may enter (a virtual environment in /root, say), workers stay uid 0 and drop every capability instead.
    """
    if os.geteuid() != 0:
        return None
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        logger.info("no user %r: sandboxes run as uid 0 without capabilities", user)
        return None
    probe = [sys.executable, "-c", "import torch, evalkit.sandbox.untrusted.worker"]
    try:
        result = subprocess.run(probe, user=entry.pw_uid, group=entry.pw_gid, extra_groups=[], cwd="/",
                                env=scrubbed_env({}, Path("/tmp")), capture_output=True, timeout=300)
    except (OSError, subprocess.SubprocessError) as err:
        logger.info("user %r cannot start a worker (%s): sandboxes run as uid 0 without capabilities", user, err)
        return None
    if result.returncode != 0:
        logger.info("user %r cannot import torch and evalkit (%s): sandboxes run as uid 0 without "
                       "capabilities", user, result.stderr.decode(errors="replace").strip().splitlines()[-1:])
        return None
    return entry.pw_uid, entry.pw_gid


def reachable_by(folder: Path, run_as: tuple[int, int]) -> bool:
    """Whether the user ``run_as`` (uid, gid) may enter every folder above ``folder`` (permission bits only)."""
    uid, gid = run_as
    for parent in folder.resolve().parents:
        try:
            info = parent.stat()
        except FileNotFoundError:
            continue  # made later by evalkit itself, open to others under the usual umask
        except OSError:
            return False
        allowed = (stat.S_IXOTH | (stat.S_IXGRP if info.st_gid == gid else 0)
                   | (stat.S_IXUSR if info.st_uid == uid else 0))
        if not info.st_mode & allowed:
            return False
    return True


def hand_over(folder: Path, run_as: tuple[int, int] | None) -> None:
    """Make ``folder`` (created if missing) and everything in it the sandbox user's, so its worker can write there."""
    folder.mkdir(parents=True, exist_ok=True)
    if run_as is None:
        return
    for path in [folder, *folder.rglob("*")]:
        os.chown(path, *run_as, follow_symlinks=False)


def sandbox_user(run_as: tuple[int, int] | None) -> str:
    """Who a run's sandboxes run as, in words (for the report's environment)."""
    if run_as is not None:
        return f"{pwd.getpwuid(run_as[0]).pw_name} (uid {run_as[0]})"
    if os.geteuid() == 0:
        return "uid 0 without capabilities (no unprivileged user could run the workers)"
    return f"the user running evalkit (uid {os.geteuid()})"
