"""Untrusted side (the worker calls it on itself): confining a process's file writes to a few folders with Linux Landlock (kernel 5.13+, no privileges).

The worker calls ``restrict_writes`` on itself before importing submission code: afterwards it (and
every process it starts) may still read anything, but may create, write, truncate, rename or delete
files only beneath the allowed folders. Landlock also stops it from ptracing any process outside its
domain (so it cannot read another process's ``/proc/<pid>/environ`` or ``mem``), from ABI 5 from driving a
device it opened outside those folders (``ioctl``: a build, whose list holds no GPU device, cannot use the
GPU), from ABI 4 from binding or connecting any TCP socket (no network: on a Ray node the cluster's ports are
out of reach too), and, from ABI 6, from signalling one or connecting to its abstract Unix sockets. Where the
kernel lacks Landlock this returns 0 and changes nothing; the judge records that in the row.
"""

from __future__ import annotations

import ctypes
import os

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446  # x86-64 and arm64 alike
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

_WRITE_FILE, _REMOVE_DIR, _REMOVE_FILE = 1 << 1, 1 << 4, 1 << 5
_MAKE_ALL = sum(1 << bit for bit in range(6, 13))  # char, dir, reg, sock, fifo, block, sym
_REFER, _TRUNCATE, _IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
LANDLOCK_ABI_FOR_DEVICES = 5  # the first that controls ioctls on devices
_FILE_RIGHTS = _WRITE_FILE | _TRUNCATE | _IOCTL_DEV  # the rights that apply to a single file


_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1  # ABI 4: handled with no rule, so every port is denied
LANDLOCK_ABI_FOR_NETWORK = 4


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64)]


class _ScopedRulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _write_rights(abi: int) -> int:
    rights = _WRITE_FILE | _REMOVE_DIR | _REMOVE_FILE | _MAKE_ALL
    if abi >= 2:
        rights |= _REFER
    if abi >= 3:
        rights |= _TRUNCATE
    if abi >= LANDLOCK_ABI_FOR_DEVICES:
        rights |= _IOCTL_DEV
    return rights


def _ruleset_attr(abi: int, rights: int) -> ctypes.Structure:
    """What a ruleset handles: the file rights, TCP bind and connect from ABI 4, signals and abstract sockets
    scoped from ABI 6 (a kernel takes the longer struct with the fields it does not know left zero)."""
    if abi < LANDLOCK_ABI_FOR_NETWORK:
        return _RulesetAttr(rights)
    scoped = _SCOPE_SIGNAL | _SCOPE_ABSTRACT_UNIX_SOCKET if abi >= 6 else 0
    return _ScopedRulesetAttr(rights, _NET_BIND_TCP | _NET_CONNECT_TCP, scoped)


def abi_version() -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    version = libc.syscall(_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    return max(int(version), 0)


def restrict_writes(writable: list[str]) -> int:
    """Allow writes only beneath ``writable``; return the Landlock ABI used, or 0 if unavailable."""
    abi = abi_version()
    if abi <= 0:
        return 0
    libc = ctypes.CDLL(None, use_errno=True)
    rights = _write_rights(abi)
    attr = _ruleset_attr(abi, rights)
    ruleset = libc.syscall(_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)), ctypes.c_uint32(0))
    if ruleset < 0:
        return 0
    try:
        for path in writable:
            if os.path.exists(path):
                _allow(libc, ruleset, path, rights)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return 0
        if libc.syscall(_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            return 0
    finally:
        os.close(ruleset)
    return abi


def _allow(libc: ctypes.CDLL, ruleset: int, path: str, rights: int) -> None:
    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        rule = _PathBeneathAttr(rights if os.path.isdir(path) else rights & _FILE_RIGHTS, fd)
        if libc.syscall(_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH), ctypes.byref(rule),
                        ctypes.c_uint32(0)) != 0:
            raise OSError(ctypes.get_errno(), f"landlock: cannot allow writes beneath {path}")
    finally:
        os.close(fd)
