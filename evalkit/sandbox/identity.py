"""Trusted side: who a sandbox runs as: its user (when evalkit runs as root), its environment, its folders.

A worker started by root becomes a uid of its own, leased for its life from ``uid_pool.SANDBOX_UIDS`` (which leaves
it no capabilities), when such a uid can run it: read this Python, torch and evalkit, and enter the folders the
worker writes to. Where it cannot, the judge says at start what to change, and the worker stays uid 0 and drops
every capability instead (``sandbox/untrusted/privileges.py``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

from evalkit.results_file import write_file
from evalkit.sandbox.uid_pool import SANDBOX_UIDS, NoSandboxUid, UidLease

logger = logging.getLogger(__name__)

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


# The JIT caches of the answer languages (Triton, Inductor, CuTe DSL, TileLang), each named inside the sandbox's own
# home: what one answer compiled is never found by another, nor by the judge, whatever the parent's environment says.
SANDBOX_USER = "evalkit-sandbox"
JIT_CACHES = {"TRITON_CACHE_DIR": ".triton/cache", "TORCHINDUCTOR_CACHE_DIR": "torchinductor",
              "CUTE_DSL_CACHE_DIR": "cute_dsl_cache", "TILELANG_CACHE_DIR": ".tilelang/cache"}


def scrubbed_env(extra: dict[str, str], home: Path) -> dict[str, str]:
    """A minimal environment: no tokens, keys or user settings leak into submission code."""
    env = {k: os.environ[k] for k in _KEEP_ENV if k in os.environ}
    env.update(HOME=str(home), TMPDIR=str(home), PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1",
               PYTHONPATH=str(package_root()), PYTHONNOUSERSITE="1")
    env.update({name: str(home / folder) for name, folder in JIT_CACHES.items()})
    # A pool uid names no user: getpass.getuser(), which torch.compile asks, reads these before the password file.
    env.update(USER=SANDBOX_USER, LOGNAME=SANDBOX_USER)
    env.update(extra)
    return env


# What a worker does before it runs anything of a submission's, as a pool uid: open the way to this Python
# (``untrusted/mounts.py``), become the uid, import torch and the harness.
_PROBE = """
import os
from evalkit.sandbox.untrusted.mounts import open_the_way
open_the_way({uid}, [os.getcwd()])
os.setgroups([]); os.setgid({uid}); os.setuid({uid})
import torch, evalkit.sandbox.untrusted.worker
"""


def unprivileged_identity(remembered: Path | None = None) -> tuple[int, int] | None:
    """(uid, gid) a probe ran as, when this process is root and a uid of the sandbox pool can run a worker (each
    sandbox then leases a uid of its own: ``uid_pool``); else None. ``remembered``: a file of the probes that
    passed (``probe_key``); a probe whose key it holds is not run again (it imports torch: seconds of a run's start).

    A pool uid must be able to read this Python, torch and evalkit: where they live under a folder only root may
    enter (a virtual environment in /root, say), the worker opens the way in a mount namespace of its own
    (``untrusted/mounts.py``); where it cannot (no CAP_SYS_ADMIN), the judge warns with what to change, and
    workers stay uid 0 and drop every capability instead.
    """
    if os.geteuid() != 0:
        logger.warning("sandboxes run as your own uid (%d), in user and network namespaces of their own where the "
                       "kernel allows: run evalkit as root (a container will do) for a uid of its own per sandbox "
                       "(docs/hostile.md, Known limits, says what a shared uid leaves open)", os.geteuid())
        return None
    key = probe_key()
    if remembered is not None and key in _passed(remembered):
        return SANDBOX_UIDS.start, SANDBOX_UIDS.start  # which uid does not matter: each sandbox leases its own
    try:
        lease = UidLease.take()
    except (NoSandboxUid, OSError) as err:
        logger.warning("no uid for sandboxes (%s): they run as uid 0 without capabilities", err)
        return None
    probe = [sys.executable, "-c", _PROBE.format(uid=lease.uid)]
    try:
        with tempfile.TemporaryDirectory(prefix="evalkit-probe-") as staging:
            result = subprocess.run(probe, cwd=staging, env=scrubbed_env({}, Path(staging)), capture_output=True,
                                    timeout=300)
    except (OSError, subprocess.SubprocessError) as err:
        logger.warning("uid %d cannot start a worker (%s): sandboxes run as uid 0 without capabilities",
                       lease.uid, err)
        return None
    finally:
        lease.release()
    if result.returncode != 0:
        logger.warning("sandboxes run as uid 0 without capabilities, not as a uid of their own: another user cannot "
                       "import torch and evalkit with %s (%s). Install evalkit where every user may read it (e.g. "
                       "a virtual environment under /opt), or open the folders above it to others (chmod o+rx)",
                       sys.executable, result.stderr.decode(errors="replace").strip().splitlines()[-1:])
        return None
    if remembered is not None:
        _remember(remembered, key)
    return lease.identity


# What a pool uid's probe depends on, for a passed probe to be remembered: the host and its boot, the mount and user
# namespaces (a container), this process's capabilities (opening the way needs CAP_SYS_ADMIN), the pool, the
# owners and modes of the folders down to this Python, torch and evalkit, and when those were last installed
# (their folders' times: a reinstall changes them). A change of permissions deep inside torch, with no reinstall,
# after a probe passed is not seen: workers would then fail to start (deleting the file makes the next run probe).
REMEMBERED_PROBES = 16  # keys kept in the file (hosts and containers sharing one cache)


def probe_key() -> str:
    """The key of a pool uid's probe here and now (see above)."""
    torch_spec = importlib.util.find_spec("torch")
    torch_dir = Path(torch_spec.origin).parent if torch_spec and torch_spec.origin else Path("/")
    facts: list[object] = [platform.node(), _read("/proc/sys/kernel/random/boot_id"), _capabilities(),
                           [os.stat(f"/proc/self/ns/{ns}").st_ino for ns in ("mnt", "user")],
                           (SANDBOX_UIDS.start, SANDBOX_UIDS.stop), sys.version]
    for leaf in (Path(sys.executable).resolve(), torch_dir, torch_dir / "lib", package_root() / "evalkit"):
        for folder in (leaf, *leaf.parents):
            info = os.stat(folder)
            facts.append((str(folder), info.st_mode, info.st_uid, info.st_gid,
                          info.st_mtime_ns if folder == leaf else None))
    return hashlib.sha256(repr(facts).encode()).hexdigest()


def _read(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


def _capabilities() -> str:
    return next((line for line in _read("/proc/self/status").splitlines() if line.startswith("CapEff")), "")


def _passed(remembered: Path) -> list[str]:
    try:
        keys = json.loads(remembered.read_text()).get("passed", [])
    except (OSError, ValueError, AttributeError):
        return []
    return [key for key in keys if isinstance(key, str)] if isinstance(keys, list) else []


def _remember(remembered: Path, key: str) -> None:
    """Add ``key`` to the file (written whole, then renamed into place; a failure only costs the next run a probe)."""
    keys = [known for known in _passed(remembered) if known != key][-(REMEMBERED_PROBES - 1):] + [key]
    try:
        write_file(remembered, json.dumps({"passed": keys}))
    except OSError as err:
        logger.debug("could not remember the sandbox uid's probe in %s: %s", remembered, err)


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
        return f"a uid of its own per sandbox ({SANDBOX_UIDS.start}-{SANDBOX_UIDS.stop - 1}), without capabilities"
    if os.geteuid() == 0:
        return "uid 0 without capabilities (no other uid could run the workers)"
    return (f"the user running evalkit (uid {os.geteuid()}): run evalkit as root (a container will do) for a uid "
            f"of its own per sandbox")
