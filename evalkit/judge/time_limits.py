"""Trusted side: how long a worker may take for each step of judging, from the problem's own time.

A step is one request and its reply: loading (import, build from cache, construct), the first call,
each later call. The limits come from the reference's eager time on this device, measured by the judge
before any submission runs, so a hang costs at most ``max(LOAD_S, FIRST_CALL_S)`` on problems whose
reference runs in milliseconds, while a correct answer up to ``SLOWDOWN_ALLOWED`` times slower than
eager is never cut off. A ceiling, ``hang_limit_s`` (``--hang-limit``, 60 s by default), bounds every one of an
answer's derived limits, so a hang costs at most that however slow the reference (an RL loop sets it lower to trade
the slowest correct answers for fewer seconds lost to hangs); the baselines, trusted code, keep the derived limits.
``--timeout`` or ``run_timeout_s`` in problem.toml set every step's limit instead.

The first call gets longer (``JIT_FIRST_CALL_S``) only when the answer may compile then: its code names a
JIT (Triton, torch.compile, ...) or it uses ``load_inline`` that the build stage did not build (built
lazily, in ``forward``). Reading the code for this is safe: a shorter limit can only cost the answer
itself, so hiding a JIT from the judge gains nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path

from evalkit.judge.reference import ReferenceProblem

LOAD_S = 60.0  # start Python and torch, load a cached extension, construct ModelNew
# Lazy CUDA module loading, cuDNN autotuning: an answer with nothing left to compile. Its worker started CUDA,
# cuDNN and cuBLAS before the answer arrived, and the whole correctness check of a shipped problem's answer
# (15 calls, the first among them) takes 0.5-1.8 s on an H200 beside 15 builds; 10 s, like every later call.
FIRST_CALL_S = 10.0
JIT_FIRST_CALL_S = 60.0  # an answer that may compile on its first call (a JIT, a load_inline left to forward)
# A JIT named in the code (comments too: "compile the extension" is not one, "torch.compile" is), or a virtual
# architecture (``compute_90``): code built as PTX only is compiled by the driver when first loaded.
_NAMES_A_JIT = re.compile(r"triton|torch\.compile|_dynamo|inductor|torch\.jit|\bjit\b|nvrtc|cupy|numba|cuda\.core|"
                          r"\btvm\b|\bjax\b|tilelang|cutlass\.cute|compute_\d", re.IGNORECASE)
CALL_FLOOR_S = 10.0  # a later call, however fast the reference (host jitter, a loaded machine)
SLOWDOWN_ALLOWED = 1000.0  # a call may be this many times slower than the reference's eager time


@dataclass(frozen=True)
class TimeLimits:
    load_s: float
    first_call_s: float
    call_s: float
    per_call_s: float = 0.0  # SLOWDOWN_ALLOWED x the reference's time: what each call of a request adds
    jit_first_call_s: float | None = None  # the first call's limit for an answer that may compile then
    ceiling_s: float | None = None  # no request waits longer (``capped``): what a hang costs at most

    @classmethod
    def derived(cls, reference_ms: float) -> "TimeLimits":
        per_call = SLOWDOWN_ALLOWED * reference_ms / 1e3
        call = max(CALL_FLOOR_S, per_call)
        return cls(load_s=LOAD_S, first_call_s=max(FIRST_CALL_S, call), call_s=call, per_call_s=per_call,
                   jit_first_call_s=max(JIT_FIRST_CALL_S, call))

    @classmethod
    def fixed(cls, seconds: float) -> "TimeLimits":
        return cls(load_s=seconds, first_call_s=seconds, call_s=seconds)

    def capped(self, ceiling_s: float) -> "TimeLimits":
        """These limits, none of them longer than ``ceiling_s``, a request of many calls included."""
        jit = self.jit_first_call_s
        return replace(self, load_s=min(self.load_s, ceiling_s), first_call_s=min(self.first_call_s, ceiling_s),
                       call_s=min(self.call_s, ceiling_s), jit_first_call_s=None if jit is None else min(jit, ceiling_s),
                       ceiling_s=ceiling_s)

    def for_answer(self, compiles_on_first_call: bool) -> "TimeLimits":
        """These limits for one answer: the longer first call when it may compile then."""
        if compiles_on_first_call and self.jit_first_call_s is not None:
            return replace(self, first_call_s=max(self.first_call_s, self.jit_first_call_s))
        return self

    def request_s(self, calls: int, first: bool) -> float:
        """The limit of one request that runs forward ``calls`` times: the floors do not multiply, nor the ceiling."""
        limit = max(self.first_call_s if first else self.call_s, self.per_call_s * calls)
        return limit if self.ceiling_s is None else min(limit, self.ceiling_s)


def compiles_on_first_call(code: str, extensions_dir: Path) -> bool:
    """Whether an answer may compile when first called: its code names a JIT, or it calls ``load_inline`` (or
    ``load``) while the build stage built no extension (so it builds in ``forward``)."""
    if _NAMES_A_JIT.search(code):
        return True
    builds_extension = "load_inline" in code or "cpp_extension" in code
    return builds_extension and not any(extensions_dir.glob("*/*.so"))


def reference_ms(ref: ReferenceProblem, seed: int) -> float:
    """The reference's eager time per call on its device (a few calls: it only sets limits and sizes a request),
    timed by the judge where the reference runs in its process, else bounded by the judge's own clock
    (``ReferenceProblem.eager_ms``)."""
    return ref.eager_ms(seed)


def time_limits(reference_ms: float, override_s: float | None, hang_limit_s: float | None = None) -> TimeLimits:
    """``override_s`` for every step when given, else limits derived from the reference's time, each at most
    ``hang_limit_s`` when given (an answer's; a baseline's are not capped)."""
    if override_s:
        return TimeLimits.fixed(override_s)
    derived = TimeLimits.derived(reference_ms)
    return derived.capped(hang_limit_s) if hang_limit_s else derived
