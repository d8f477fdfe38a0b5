"""Trusted side: what a device judge holds of a problem it keeps loaded (``device_judge``), and letting go of it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evalkit.judge.contender import Contender
from evalkit.judge.submission_judge import Judge, close_contender
from evalkit.sandbox.launcher import UntrustedProcess
from evalkit.sandbox.spare import discard
from evalkit.sources.problems import Problem


@dataclass
class ProblemContext:
    """One problem: its baselines (None until known), its judge once an answer needs it (or why not), and, while
    it is the current problem, the live baseline its answers are timed beside (``partner``)."""

    problem: Problem
    baselines: dict[str, Any] | None = None
    judge: Judge | None = None
    setup_error: str = ""
    partner: Contender | None = None


def close_judge(context: ProblemContext | None) -> None:
    """End the problem's live baseline and its reference (a sandboxed one's worker): it is loaded anew if needed."""
    close_partner(context)
    if context is not None and context.judge is not None:
        context.judge.ref.close()
        context.judge = None


def held_bytes(context: ProblemContext) -> int:
    """About what a kept problem holds on the GPU: what its judge lent its sandboxed reference, and the float64
    outputs it keeps (0 before it is loaded)."""
    return context.judge.ref.lent_device_bytes() + context.judge.expected_bytes if context.judge else 0


def close_partner(context: ProblemContext | None) -> None:
    """End the problem's live baseline, if it has one."""
    if context is not None and context.partner is not None:
        close_contender(context.partner)
        worker = context.partner.session.worker
        if isinstance(worker, UntrustedProcess):  # its folder goes too (a test's channel has none)
            discard(worker)
        context.partner = None
