"""Untrusted side (the worker calls it on itself, before any submission code runs): no reaching into other processes'
resources.

Landlock keeps a sandbox from tracing other processes and, from ABI 6, from signalling them; but a process may
still change another's resource limits (``prlimit``), priority or memory placement whenever they
share a uid, and where workers cannot run as a user of their own they share the judge's. One answer that set the
judge's CPU limit to 1 s got it killed by the kernel (no row for anyone); one that lowered a spare worker's
open-file limit made the next answer crash. A seccomp filter, on every kernel since 3.5 and inherited by every
process the worker starts, lets these system calls act on the caller alone (pid 0); aimed at any other process
they fail with EPERM.
"""

from __future__ import annotations

import ctypes
import errno
import platform

_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, _PR_SET_NO_NEW_PRIVS = 22, 2, 38
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
_X32_BIT = 0x40000000  # x86-64's x32 calls carry this bit in their number: other numbers for the same calls
_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_NR_OFFSET, _ARCH_OFFSET, _ARGS_OFFSET = 0, 4, 16

# (syscall, the argument naming the target, the values that mean "the caller itself") per architecture; a call whose
# target argument is anything else is refused. setpriority and ioprio_set take (which, who): only "this process".
_SELF = (0,)
_ANY_PID = (0, 0xFFFFFFFF)  # perf_event_open: 0 (itself) or -1 (any process on one CPU, which needs privileges)
# CPU affinity and scheduling policy (sched_setaffinity and kin) are left out: runtimes set them on their own
# threads by thread id, which a filter cannot tell from another process's id.
_TARGETED = {
    "x86_64": ((302, 0, _SELF), (141, 0, _SELF), (141, 1, _SELF), (251, 0, (1,)), (251, 1, _SELF), (256, 0, _SELF),
               (279, 0, _SELF), (298, 1, _ANY_PID), (440, None, ()), (448, None, ())),
    "aarch64": ((261, 0, _SELF), (140, 0, _SELF), (140, 1, _SELF), (30, 0, (1,)), (30, 1, _SELF), (238, 0, _SELF),
                (239, 0, _SELF), (241, 1, _ANY_PID), (440, None, ()), (448, None, ())),
}


class _Filter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_Filter))]


def _program(machine: str) -> list[tuple[int, int, int, int]]:
    """The BPF program: a call of another calling convention (32-bit, x32: other numbers for the same calls) is
    refused; for each targeted call, load its target argument's low 32 bits and refuse any value that is not the
    caller itself; everything else is allowed."""
    refuse, allow = (_RET_K, 0, 0, _RET_ERRNO | errno.EPERM), (_RET_K, 0, 0, _RET_ALLOW)
    code = [(_LD_W_ABS, 0, 0, _ARCH_OFFSET), (_JEQ_K, 1, 0, _ARCH[machine]), refuse,
            (_LD_W_ABS, 0, 0, _NR_OFFSET), (_JGE_K, 0, 1, _X32_BIT), refuse]
    for number, arg, allowed in _TARGETED[machine]:
        checks = [(_LD_W_ABS, 0, 0, _ARGS_OFFSET + 8 * arg)] if arg is not None else []
        for i, value in enumerate(allowed):  # a match skips to the next call's block
            checks.append((_JEQ_K, len(allowed) - i, 0, value))
        checks.append(refuse)
        code += [(_LD_W_ABS, 0, 0, _NR_OFFSET), (_JEQ_K, 0, len(checks), number)] + checks
    return code + [allow]


def confine_to_self() -> bool:
    """Install the filter on this process (and every process it starts); False where it cannot (another
    architecture, no seccomp). Sets ``no_new_privs`` first, which a filter needs without CAP_SYS_ADMIN."""
    machine = platform.machine()
    if machine not in _ARCH:
        return False
    code = _program(machine)
    filters = (_Filter * len(code))(*[_Filter(*instruction) for instruction in code])
    program = _Program(len(code), filters)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    return libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(program), 0, 0) == 0
