"""Untrusted side (the worker calls it on itself, before any submission code runs): every wall a sandbox is put
behind, in the order they must go up.

1. its own network namespace (``privileges.leave_network``: as root, or unprivileged inside a user namespace of its
   own, for builds and CPU workers);
   and, where this Python lives under a folder closed to other users, its own mount namespace opening the way to
   it (``mounts.open_the_way``);
2. its own uid, or no capabilities, and the parent-death signal (``privileges.drop_privileges``);
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
from evalkit.sandbox.untrusted.mounts import open_the_way, still_closed
from evalkit.sandbox.untrusted.privileges import drop_privileges, leave_network
from evalkit.sandbox.untrusted.seccomp import confine_to_self


def confine(limits: dict[str, Any], judge_pid: int, gpu: bool) -> tuple[int, str]:
    """Put this process behind every wall; (the Landlock ABI it got, 0 without; what was done, for the records)."""
    run_as = limits.get("run_as")
    # A GPU worker of an unprivileged judge stays in the judge's user namespace: the CUDA driver was never shown to
    # work inside one of its own (Landlock's TCP rules are its network wall).
    isolated = leave_network(unprivileged_too=not gpu)
    opened, closed = _open_the_way(run_as[0] if run_as else None)
    done = drop_privileges(tuple(run_as) if run_as and not closed else None, judge_pid)
    done += "; network: own namespace" if isolated else ""
    done += f"; opened to its uid: {', '.join(opened)}" if opened else ""
    done += f"; its uid could not reach {', '.join(closed)}" if closed else ""
    _apply_limits(limits)
    landlock_abi = restrict_writes(writable_paths(gpu))
    if confine_to_self():
        done += "; other processes' limits and priority out of reach"
    return landlock_abi, done


def _open_the_way(uid: int | None) -> tuple[list[str], list[str]]:
    """As root, before becoming its own uid: open the way to this Python and the worker's folders where a closed
    folder bars it (``mounts``). (The closed folders opened; the folders still out of the uid's reach, in which
    case it stays uid 0 without capabilities.)"""
    if uid is None or os.geteuid() != 0:
        return [], []
    folders = [os.getcwd()] + ([os.environ["TORCH_EXTENSIONS_DIR"]] if os.environ.get("TORCH_EXTENSIONS_DIR") else [])
    for folder in folders:
        os.makedirs(folder, exist_ok=True)
    # The judge's precompiled headers (read-only): a build compiled with them lists them among its dependencies.
    folders += [folder for folder in os.environ.get("CPATH", "").split(os.pathsep) if os.path.isdir(folder)]
    return open_the_way(uid, folders), still_closed(uid, folders)


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
