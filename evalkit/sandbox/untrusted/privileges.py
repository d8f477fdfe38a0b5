"""Untrusted side (the worker calls it on itself, before any submission code runs): giving up privileges.

- The worker dies with the judge: ``PR_SET_PDEATHSIG`` (SIGKILL), set after any change of user, since
  the kernel clears it then; if the judge is already gone, the worker exits at once.
- It leaves the host's network (a network namespace of its own): as root; or, run by an unprivileged judge, a
  build or a CPU worker does so inside a user namespace of its own (``leave_network``). Run as root, it then becomes the
  uid the judge leased it (``run_as``, its own: ``sandbox.uid_pool``), which leaves it no
  capabilities; where that uid cannot run the worker, it stays uid 0 but empties its
  capability bounding, permitted, effective and inheritable sets, so no program it executes regains any.

Returns a short description for the judge's records (a claim, like everything the worker says).
"""

from __future__ import annotations

import ctypes
import os
import signal

_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, _PR_CAPBSET_DROP = 1, 4, 24
_CLONE_NEWNET, _CLONE_NEWUSER = 0x40000000, 0x10000000
_CAP_VERSION_3 = 0x20080522


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_privileges(run_as: tuple[int, int] | None, judge_pid: int) -> str:
    """Become ``run_as`` (uid, gid) or drop every capability; die with the judge. Returns what was done."""
    libc = ctypes.CDLL(None, use_errno=True)
    done = "not root"
    if os.geteuid() == 0 and run_as:
        uid, gid = run_as
        own_folder(os.getcwd(), uid, gid)
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
        # A change of uid leaves the process undumpable: its /proc entries root's, which it then can neither read
        # nor write (the CUDA driver writes there). Only its own uid (its own sandbox) may trace a dumpable one.
        libc.prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0)
        done = f"uid {uid}"
    elif os.geteuid() == 0:
        done = "uid 0 without capabilities" if _drop_capabilities(libc) else "uid 0 WITH capabilities"
    die_with_judge(judge_pid)  # again: a change of user cleared it
    return done


def own_folder(folder: str, uid: int, gid: int) -> None:
    """Give ``uid`` what this process made in its own folder as root before its answer came: the judge hands a
    worker's folder over when it sends the setup, but a worker started ahead may still be preloading then, and
    what it makes afterwards (starting the profiler makes torch.compile's cache folder) would stay root's, where
    the answer's torch.compile then fails with EACCES. Symbolic links are not followed."""
    for root, folders, files in os.walk(folder):
        for name in [root, *(os.path.join(root, entry) for entry in folders + files)]:
            try:
                os.chown(name, uid, gid, follow_symlinks=False)
            except OSError:
                pass  # gone meanwhile: nothing to hand over


def leave_network(unprivileged_too: bool) -> bool:
    """Move into a network namespace of its own (only a loopback, down): no socket reaches any host, over TCP, UDP
    or abstract Unix sockets. As root (CAP_SYS_ADMIN) before the change of user; else, with ``unprivileged_too``
    and where the kernel lets unprivileged users make user namespaces, inside a user namespace of its own that maps
    only its uid and gid, whose capabilities it then drops. False elsewhere: Landlock's TCP rules are the wall."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(_CLONE_NEWNET) == 0:
        return True
    if not unprivileged_too or os.geteuid() == 0:
        return False
    uid, gid = os.geteuid(), os.getegid()
    if libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNET) != 0:
        return False
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w") as control:
            control.write(text)
    _drop_capabilities(libc)  # those it holds in its own user namespace
    return True


def die_with_judge(judge_pid: int) -> None:
    """Arm the parent-death signal (SIGKILL), and exit at once if the judge is already gone."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != judge_pid:  # the judge died before the death signal was armed
        os._exit(1)


def _drop_capabilities(libc: ctypes.CDLL) -> bool:
    last = int(open("/proc/sys/kernel/cap_last_cap").read())
    for cap in range(last + 1):
        libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)
    header, data = _CapHeader(_CAP_VERSION_3, 0), (_CapData * 2)()
    return libc.capset(ctypes.byref(header), data) == 0
