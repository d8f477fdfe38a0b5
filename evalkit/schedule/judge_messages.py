"""Trusted side (both ends are evalkit's own processes; no submission code runs in either): every message between
the scheduler and a judge process, declared once, one type per message, with the protocol's version.

    scheduler -> judge:  Start (first, with the version) | AddProblem (one given after the start, e.g. from a
                         reference's text) | Prepare | JudgeAnswer | Exit; and Held / Released,
                         the answers to the judge's Hold / Release
    judge -> scheduler:  Hold / Release (a measurement begins / ends: the scheduler freezes the builds meanwhile)
                         | Progress | Failed | Done (the baselines for Prepare; for JudgeAnswer, the row and the
                         problem the judge now has loaded) | Refused (a Start of another protocol version)

They travel pickled over a socket pair (``judge_process``); ``expect`` checks each one's type on arrival, so a
message of the wrong kind is a clear error naming both, never a tuple read by position.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

from evalkit.intake.triage import Triage
from evalkit.judge.builder import BuildOutcome
from evalkit.records import Submission
from evalkit.sandbox.launcher import Limits
from evalkit.schedule.options import JudgeOptions
from evalkit.schedule.station import BaselineFiles
from evalkit.sources.problems import Problem

PROTOCOL_VERSION = 2  # bump when a message changes; a judge process refuses a Start of another version
# 2: AddProblem


@dataclass(frozen=True)
class StationSpec:
    """Everything a judge process needs to build its ``JudgeStation``."""

    problems: dict[str, Problem]
    options: JudgeOptions
    device: str
    seed: int
    limits: Limits
    baselines: BaselineFiles
    driver: str | None


# ---- scheduler -> judge --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Start:
    spec: StationSpec
    version: int = PROTOCOL_VERSION


@dataclass(frozen=True)
class AddProblem:
    problem: Problem


@dataclass(frozen=True)
class Prepare:
    problem_id: str
    kinds: tuple[str, ...] | None


@dataclass(frozen=True)
class JudgeAnswer:
    submission: Submission
    triage: Triage
    outcome: BuildOutcome


@dataclass(frozen=True)
class Exit:
    pass


@dataclass(frozen=True)
class Held:
    pass


@dataclass(frozen=True)
class Released:
    pass


# ---- judge -> scheduler --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Hold:
    pass


@dataclass(frozen=True)
class Release:
    pass


@dataclass(frozen=True)
class Progress:
    text: str


@dataclass(frozen=True)
class Failed:
    message: str


@dataclass(frozen=True)
class Done:
    value: Any


@dataclass(frozen=True)
class Refused:
    """The judge process speaks another protocol version than the scheduler's Start (another evalkit)."""

    version: int


TO_JUDGE = (Start, AddProblem, Prepare, JudgeAnswer, Exit, Held, Released)
TO_SCHEDULER = (Hold, Release, Progress, Failed, Done, Refused)

M = TypeVar("M")


class WrongMessage(RuntimeError):
    """A message of a kind the protocol does not allow here (a bug in evalkit, or two versions of it)."""


def expect(message: Any, *kinds: type[M]) -> M:
    """``message`` if it is one of ``kinds``; ``WrongMessage`` naming both otherwise."""
    if not isinstance(message, kinds):
        raise WrongMessage(f"judge protocol {PROTOCOL_VERSION}: got {type(message).__name__}, expected "
                           f"{' or '.join(kind.__name__ for kind in kinds)}")
    return message
