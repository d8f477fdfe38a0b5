"""Untrusted side (the worker calls it on itself, before any submission code runs): every wall a sandbox is put
behind, in the order they must go up.

1. its own network namespace, where it starts as root (``privileges.leave_network``: it needs CAP_SYS_ADMIN);
2. the unprivileged user, or no capabilities, and the parent-death signal (``privileges.drop_privileges``);
3. its resource limits: no core dumps, file size, open files, address space on CPU;
4. Landlock: writes only beneath its folders and device files, no TCP from ABI 4, signals and abstract sockets
   scoped from ABI 6 (``landlock.restrict_writes``);
5. seccomp: no reaching into other processes' limits, priority or memory placement (``seccomp.confine_to_self``).
"""

from __future__ import annotations

import os
import resource
from typing import Any

from evalkit.sandbox.untrusted.landlock import restrict_writes
from evalkit.sandbox.untrusted.privileges import drop_privileges, leave_network
from evalkit.sandbox.untrusted.seccomp import confine_to_self


def confine(limits: dict[str, Any], judge_pid: int, gpu: bool) -> tuple[int, str]:
    """Put this process behind every wall; (the Landlock ABI it got, 0 without; what was done, for the records)."""
    run_as = limits.get("run_as")
    isolated = leave_network()
    done = drop_privileges(tuple(run_as) if run_as else None, judge_pid)
    done += "; network: own namespace" if isolated else ""
    _apply_limits(limits)
    landlock_abi = restrict_writes(writable_paths(gpu))
    if confine_to_self():
        done += "; other processes' limits and priority out of reach"
    return landlock_abi, done


def _apply_limits(limits: dict[str, Any]) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits["file_size_bytes"], limits["file_size_bytes"]))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits["open_files"], limits["open_files"]))
    if limits.get("address_space_bytes"):
        resource.setrlimit(resource.RLIMIT_AS, (limits["address_space_bytes"], limits["address_space_bytes"]))


# Devices a worker may open for writing: the usual character devices and the GPU's. Not /dev/shm:
# shared memory it created there would outlive it and escape its memory limit.
WRITABLE_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty")
GPU_DEVICE_PREFIXES = ("nvidia", "dri", "kfd")


def writable_paths(gpu: bool = True) -> list[str]:
    """Where the worker may write: its own folder, its extension folder, its /proc entry and device files; the
    GPU's device files only with ``gpu`` (a build gets none: it cannot drive the GPU a judge times on)."""
    # /proc/<own pid>: the CUDA driver writes there while it initialises (Error 304 without it).
    writable = [os.getcwd(), os.path.realpath("/proc/self"), *WRITABLE_DEVICES]
    if gpu and os.path.isdir("/dev"):
        writable += [os.path.join("/dev", name) for name in sorted(os.listdir("/dev"))
                     if name.startswith(GPU_DEVICE_PREFIXES)]
    extensions = os.environ.get("TORCH_EXTENSIONS_DIR")
    if extensions:
        os.makedirs(extensions, exist_ok=True)
        writable.append(extensions)
    return writable
