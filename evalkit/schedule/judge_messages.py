"""Trusted side (both ends are evalkit's own processes; no submission code runs in either): every message between
the scheduler and a judge, declared once, one type per message, with the protocol's version. One vocabulary
whichever way a judge is reached: in the scheduler's own process, a judge process, or a Ray actor.

    scheduler -> judge:  Start (first, with the version) | AddProblem (one given after the start, e.g. from a
                         reference's text) | Prepare | JudgeAnswer | Exit; and Held / Released,
                         the answers to the judge's Hold / Release; and Cancel (out of band, while a JudgeAnswer is
                         out: a judge process reads it from its cancel file on ``judge_process.CANCEL_SIGNAL``, a
                         Ray actor takes it through its ``cancel``, served beside ``handle`` in a concurrency group
                         of its own)
    judge -> scheduler:  Started | Refused (the answers to Start: a Start of another protocol version is refused)
                         | Done (the baselines for Prepare; nothing for AddProblem, Exit and Cancel) | Judged (for
                         JudgeAnswer) | Failed (any request the judge could not serve, or a message it does not
                         take there) | Hold / Release (a measurement begins / ends: the scheduler freezes the builds
                         meanwhile; a judge process only) | Progress; and Decided (apart from the requests: the
                         row of an answer judged past its timing beside the next one, ``overlap``; a judge process
                         sends it on a second socket)
    scheduler -> node:   a Ray task's one argument, with the version: Build (``ray_judge.build_task``) | Probe
                         (``ray_judge.node_facts``) | Sweep (``ray_judge.kill_sandboxes``); and ActorStart, a Ray
                         judge actor's one argument at its creation (the version comes with its Start)
    node -> scheduler:   the task's answer (``REPLIES``): BuildOutcome (``evalkit.judge.builder``'s, as a local
                         build gives it) | NodeFacts | Done (how many sandboxes a Sweep killed); or Refused (a request
                         of another protocol version) | Failed (a message of another kind, or a task that raised)

``judge_server.JudgeServer`` is the judge's end, ``judge_client.MessageStation`` the scheduler's; the transports
(``judge_client`` in-process, ``judge_process`` pickled over a socket pair, ``ray_backend`` as the arguments and
results of a Ray actor's methods or a Ray task) carry the messages as they are. ``expect`` checks each one's type
on arrival, so a message of the wrong kind is a clear error naming both, never a tuple read by position; and every
field of it against its declaration (``evalkit.sandbox.typed_fields``, nested dataclasses and containers
included), so a field of the wrong type is an error naming the message, the field and both types, never a value
read as another.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from evalkit.intake.triage import Triage
from evalkit.judge.baselines import BaselineCache
from evalkit.judge.builder import BuildOutcome
from evalkit.records import ResultRow, Submission
from evalkit.sandbox.launcher import Limits
from evalkit.sandbox.typed_fields import wrong_field
from evalkit.sources.problems import Problem
from evalkit.sources.settings import JudgingPlan

PROTOCOL_VERSION = 14  # bump when a message changes; a judge refuses a Start (a Ray task its request) of another version
# 2: AddProblem. 3: Started, Judged, Prepare.report_entries (one vocabulary for judge processes and Ray actors).
# 4: Cancel. 5: Build (a Ray build task's request, which took positional arguments before). 6: Probe, NodeFacts,
# Sweep, ActorStart (the Ray probe and sweep tasks and the judge actor took positional arguments before).
# 7: Start's options carry hang_limit_s (the ceiling of an answer's time limits). 8: Problem.trusted (a judge of an
# earlier version would import a problem given as text in its own process). 9: StationSpec.gpu, gpu_judges (several
# judges per GPU, and its host-wide gate). 10: the plan travels instead of the raw
# options (StationSpec.plans, AddProblem.plan: each problem's settings resolved once, at the run's start), and a row
# comes back stamped with its problem's sha256; the report's baselines reach every judge by Prepare.report_entries
# (BaselineFiles.in_report), as they reached a Ray actor's, and the judge writes no file of the report folder.
# 11: Judged.kept (the problems the judge holds loaded, for the dispatcher to hand it their answers first).
# 12: StationSpec.start_cpus (where a pinned judge's workers start, before one is moved onto its cores).
# 13: StationSpec.overlap, JudgeAnswer.alone, Judged.row may be None, Decided (a judge overlapping answers).
# 14: a plan's settings carry timing_checks (how many timed requests are checked; a judge before it checks 10).


@dataclass(frozen=True)
class BaselineFiles:
    """Where a station keeps baselines: its own copy of the report's (``report``: a file of the judge's, which the
    judge server fills with what the scheduler sends, ``Prepare.report_entries``, where the run keeps a report,
    ``in_report``) and the shared cache. A judge writes no file of the report folder: what it times goes back to
    the scheduler, whose ``ReportFolder`` records it."""

    report: Path | None
    shared: Path | None
    remeasure: bool = False
    run: str = ""  # shared by every judge of one run: with ``remeasure``, what one of them timed serves all
    in_report: bool = False

    def open(self) -> BaselineCache:
        return BaselineCache(self.report, self.shared, remeasure=self.remeasure, run=self.run)


@dataclass(frozen=True)
class StationSpec:
    """Everything a judge needs to build its ``DeviceJudge``: the problems and how each is judged (its plan,
    resolved once at the run's start: ``sources.settings.JudgingPlan``), the baselines the run asked for (``kinds``),
    the build cache, the device, the run's seed, the sandboxes' limits, where baselines are kept, the GPU's driver."""

    problems: dict[str, Problem]
    plans: dict[str, JudgingPlan]
    kinds: tuple[str, ...]
    cache_dir: Path
    device: str
    seed: int
    limits: Limits
    baselines: BaselineFiles
    driver: str | None
    gpu: str | None = None  # how every process of the host names its GPU (its gate: ``evalkit.sandbox.gpu_gate``)
    gpu_judges: int = 1  # the judges of the run that share its GPU
    # The cores its answers' workers start on (its own and the builds'), each moved onto ``limits.cpus`` when taken
    # for an answer; its profiling workers stay there. None: on ``limits.cpus``.
    start_cpus: tuple[int, ...] | None = None
    # Whether the judge overlaps answers (``overlap``): one answer's checks and profile beside the next one's front,
    # its rows decided after their timing sent apart (``Decided``). A judge alone on its GPU, in a process of its own.
    overlap: bool = False


# ---- scheduler -> judge --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Start:
    spec: StationSpec
    version: int = PROTOCOL_VERSION


@dataclass(frozen=True)
class AddProblem:
    problem: Problem
    plan: JudgingPlan  # how it is judged, resolved where it was added (``Evaluator.add_problem``)


@dataclass(frozen=True)
class Prepare:
    problem_id: str
    kinds: tuple[str, ...] | None
    # The report's baselines of this problem, for a judge that cannot read the report's file (a Ray node's).
    report_entries: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class JudgeAnswer:
    submission: Submission
    triage: Triage
    outcome: BuildOutcome
    alone: bool = False  # judged with nothing beside it: a tail gave it back (``Decided`` with no row)


@dataclass(frozen=True)
class Exit:
    pass


@dataclass(frozen=True)
class Cancel:
    """The caller of the answer ``key`` (``Submission.key``) left: end it now if it is in hand. Written to a file,
    so as JSON text, never pickled: where a sandbox shares evalkit's uid without Landlock, the file is not beyond
    its reach, and a pickle read from it would run its code in the judge."""

    key: str

    def to_text(self) -> str:
        return json.dumps({"cancel": self.key, "version": PROTOCOL_VERSION})

    @classmethod
    def from_text(cls, text: str) -> "Cancel":
        """``WrongMessage`` for anything but a Cancel of this protocol version."""
        try:
            data = json.loads(text)
        except ValueError as err:
            raise WrongMessage(f"judge protocol {PROTOCOL_VERSION}: a cancel file that is not JSON ({err})") from err
        if not (isinstance(data, dict) and data.get("version") == PROTOCOL_VERSION):
            raise WrongMessage(f"judge protocol {PROTOCOL_VERSION}: not a Cancel of this version: {text[:200]!r}")
        return expect(cls(data.get("cancel")), cls)


@dataclass(frozen=True)
class Build:
    """Build (import) one answer's ``code`` on a Ray node (``ray_judge.build_task``), as ``builder.build`` does
    locally: answered with its ``BuildOutcome``, ``Refused`` when the task speaks another version, else ``Failed``.
    ``arch``: the CUDA arch of the cluster's judges (a build task holds no GPU to ask)."""

    code: str
    cache_root: Path
    device: str
    timeout_s: float
    limits: Limits
    init_inputs: list[Any] | None
    arch: str
    version: int = PROTOCOL_VERSION


@dataclass(frozen=True)
class Probe:
    """Describe a Ray node (``ray_judge.node_facts``, a task on the device the run judges on): answered with its
    ``NodeFacts``, ``Refused`` when the task speaks another version, else ``Failed``. ``marker``: a file the driver
    wrote in its cache folder, which the node sees only where it shares that folder."""

    marker: str
    version: int = PROTOCOL_VERSION


@dataclass(frozen=True)
class Sweep:
    """SIGKILL every sandbox of the run's ``group`` on one Ray node (``ray_judge.kill_sandboxes``): answered with
    ``Done`` (how many it killed), ``Refused`` or ``Failed``."""

    group: str
    version: int = PROTOCOL_VERSION


@dataclass(frozen=True)
class ActorStart:
    """A Ray judge actor's one argument at its creation (``ray_judge.JudgeActor``): each problem's files as the
    driver holds them (file name -> bytes, per problem id), and the CUDA arch the run builds for. Its version is
    checked by the Start that follows; an actor created with anything else fails, naming both types."""

    files: dict[str, dict[str, bytes]]
    arch: str


@dataclass(frozen=True)
class Held:
    pass


@dataclass(frozen=True)
class Released:
    pass


# ---- judge -> scheduler --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Started:
    """The judge took the Start: its station is built."""


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
    """A request served: Prepare's baselines (kind -> its figures), how many sandboxes a Sweep killed, or nothing."""

    value: dict[str, Any] | int | None


@dataclass(frozen=True)
class Judged:
    """A JudgeAnswer's reply: the row (None when the judge overlaps answers and this one is still judged past its
    timing: its row comes as a ``Decided``), the problem the judge now has loaded (a build that failed loads none),
    that problem's baselines known so far (a timed answer may have timed them), and every problem the judge holds
    loaded, the least recently used first."""

    row: ResultRow | None
    problem: str | None
    baselines: dict[str, Any]
    kept: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Decided:
    """The row of an answer judged past its timing beside the next answer (``overlap``), sent apart from the
    requests' replies (a judge process's second socket) whenever decided; None: send the answer again ``alone``."""

    key: str
    row: ResultRow | None
    version: int = PROTOCOL_VERSION


@dataclass(frozen=True)
class NodeFacts:
    """A Probe's answer: the node's ``environment()`` with its sandbox user and cgroups, whether it sees the
    Probe's marker, and the node's name."""

    facts: dict[str, Any]
    sees_marker: bool
    node: str


@dataclass(frozen=True)
class Refused:
    """The judge (or Ray task) speaks another protocol version (``version``) than the scheduler's Start (or the
    task's request) asked for (``asked``): two versions of evalkit."""

    version: int
    asked: int


TO_JUDGE = (Start, AddProblem, Prepare, JudgeAnswer, Exit, Held, Released, Cancel)
TO_SCHEDULER = (Started, Hold, Release, Progress, Failed, Done, Judged, Refused)
# A Ray task's request -> the answers it may give.
REPLIES: dict[type, tuple[type, ...]] = {Build: (BuildOutcome, Refused, Failed), Probe: (NodeFacts, Refused, Failed),
                                         Sweep: (Done, Refused, Failed)}
TO_NODE = (*REPLIES, ActorStart)
FROM_NODE = tuple(dict.fromkeys(kind for kinds in REPLIES.values() for kind in kinds))
DECIDED = (Decided,)  # judge -> scheduler, apart from the requests
VERSIONED = (Start, *REPLIES)  # the messages whose receiver refuses another version, naming both

M = TypeVar("M")


class WrongMessage(RuntimeError):
    """A message of a kind the protocol does not allow here, or with a field of the wrong type (a bug in evalkit,
    or two versions of it)."""


def expect(message: Any, *kinds: type[M]) -> M:
    """``message`` if it is one of ``kinds`` with every field of its declared type; ``WrongMessage`` naming both
    types otherwise. A Start or a Ray task's request of another protocol version is let through unchecked, for its
    receiver to refuse it naming both versions (its fields may be another evalkit's)."""
    if not isinstance(message, kinds):
        raise WrongMessage(f"judge protocol {PROTOCOL_VERSION}: got {type(message).__name__}, expected "
                           f"{' or '.join(kind.__name__ for kind in kinds)}")
    if isinstance(message, VERSIONED) and type(message.version) is int and message.version != PROTOCOL_VERSION:
        return message
    wrong = wrong_field(message)
    if wrong is not None:
        raise WrongMessage(f"judge protocol {PROTOCOL_VERSION}: {wrong}: a bug in the sender (evalkit), or two "
                           f"versions of evalkit")
    return message
