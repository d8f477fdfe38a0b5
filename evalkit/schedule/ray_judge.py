"""Trusted side: what runs on a Ray cluster's nodes for ``ray_backend`` (the judge actor, the build, probe and sweep
tasks), each in a Ray worker process; it imports no ``ray`` itself (``ray_backend`` makes these remote).

The judge actor speaks the judge protocol (``judge_messages``) like every judge: the driver calls its ``handle``
with each message, and it answers through a ``JudgeServer``; a ``Cancel`` comes through its ``cancel``, which
``ray_backend`` serves in a concurrency group of its own, so it reaches the device judge while ``handle`` is still
judging the answer it names (``handle`` stays one call at a time). What a node adds to it: the problems'
files copied from the driver where the node does not hold them at the same path, and a check that the node sees an
answer's build before judging it. The report's baselines reach it as they reach every judge (each Prepare brings
the report's entries, and the driver's ``ReportFolder`` records what the judge returns).

Each task takes one declared, versioned message and answers one (``judge_messages.REPLIES``), or ``Refused`` /
``Failed``: a build task a ``Build``, the probe a ``Probe``, the sweep a ``Sweep``; the actor is created with an
``ActorStart``. The same messages as every other boundary, never positional arguments read by position.
"""

from __future__ import annotations

import functools
import logging
import platform
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from evalkit.judge import builder
from evalkit.judge.builder import BuildOutcome
from evalkit.judge.environment import environment
from evalkit.sandbox.cgroup import sandbox_cgroups
from evalkit.sandbox.identity import sandbox_user, unprivileged_identity
from evalkit.sandbox.remains import kill_group
from evalkit.schedule import judge_messages as m
from evalkit.schedule.judge_messages import StationSpec
from evalkit.schedule.judge_server import JudgeServer, Reply, open_device_judge
from evalkit.schedule.options import ScoreError
from evalkit.schedule.device_judge import DeviceJudge
from evalkit.sources.problems import Problem

logger = logging.getLogger(__name__)

M = TypeVar("M")


def _task_request(request: Any, kind: type[M]) -> M | m.Refused | m.Failed:
    """``request`` when it is a ``kind`` of this protocol version with every field of its type; else the task's
    answer: ``Refused`` for another version (its fields unread: they may be another version's), else ``Failed``."""
    try:
        message = m.expect(request, kind)  # its fields checked before the task reads any of them
    except m.WrongMessage as err:
        return m.Failed(f"WrongMessage: {err}")
    version = getattr(message, "version")  # every request in ``judge_messages.REPLIES`` has one
    if version != m.PROTOCOL_VERSION:
        logger.error("%s task: refused a %s of judge protocol %s (this node speaks %s)", kind.__name__.lower(),
                     kind.__name__, version, m.PROTOCOL_VERSION)
        return m.Refused(m.PROTOCOL_VERSION, version)
    return message


def node_facts(request: Any) -> m.NodeFacts | m.Refused | m.Failed:
    """(a task) the ``Probe`` ``request``: this node's ``environment()`` and sandbox user, whether it sees the
    marker, and its name."""
    probe = _task_request(request, m.Probe)
    if not isinstance(probe, m.Probe):
        return probe
    facts = {**environment(), "sandbox_user": sandbox_user(node_identity()), "sandbox_cgroups": sandbox_cgroups()}
    return m.NodeFacts(facts, Path(probe.marker).exists(), platform.node())


@functools.lru_cache(maxsize=None)
def node_identity() -> tuple[int, int] | None:
    """Who sandboxes run as on this node (the driver's choice need not hold here); once per worker process."""
    return unprivileged_identity()


def build_task(request: Any) -> BuildOutcome | m.Refused | m.Failed:
    """(a task) the ``Build`` ``request``, frozen by nothing; for the CUDA arch of the cluster's judges (a build task
    holds no GPU: torch must not be asked for one's capability). ``Refused`` for a Build of another protocol
    version, ``Failed`` for anything but a Build (or a field of the wrong type) and for a build that raised."""
    build = _task_request(request, m.Build)
    if not isinstance(build, m.Build):
        return build
    try:
        return builder.build(build.code, build.cache_root, build.device, build.timeout_s,
                             replace(build.limits, run_as=node_identity()), build.init_inputs, None,
                             arch=build.arch if build.device == "cuda" else "")
    except Exception as err:  # noqa: BLE001 - the driver raises it for this answer (its judge_failed row)
        logger.exception("build task: the build failed")
        return m.Failed(f"{type(err).__name__}: {err}")


def kill_sandboxes(request: Any) -> m.Done | m.Refused | m.Failed:
    """(a task) the ``Sweep`` ``request``: SIGKILL every sandbox of the run's group on this node; ``Done`` says how
    many."""
    sweep = _task_request(request, m.Sweep)
    if not isinstance(sweep, m.Sweep):
        return sweep
    return m.Done(kill_group(sweep.group))


class JudgeActor:
    """(an actor: a worker process per judge) a judge on this node's GPU, or a CPU, answering ``handle`` one call at
    a time, and ``cancel`` beside it (another concurrency group: another thread). ``files``: each problem's files
    as the driver holds them; ``arch``: the CUDA arch the run builds for (its ``ActorStart``)."""

    def __init__(self, start: Any) -> None:
        start = m.expect(start, m.ActorStart)  # anything else: the actor fails at once, naming both types
        self.files, self.arch = start.files, start.arch
        self.workdir = Path(tempfile.mkdtemp(prefix="evalkit-ray-judge-"))
        self.server = JudgeServer(self._open)

    def cancel(self, message: Any) -> m.Done | m.Failed:
        """End the answer a ``Cancel`` names now if the device judge holds it, else once its JudgeAnswer comes
        (``DeviceJudge.cancel``, safe from this thread while ``handle`` judges in another). ``Failed`` for anything
        but a Cancel; never raises."""
        try:
            key = m.expect(message, m.Cancel).key
        except m.WrongMessage as err:
            return m.Failed(f"WrongMessage: {err}")
        judge = self.server.device_judge
        if judge is not None:
            judge.cancel(key)
        return m.Done(None)

    def handle(self, message: Any) -> Reply:
        """The reply to one message of the judge protocol (``judge_server.JudgeServer.handle``)."""
        try:
            m.expect(message, *m.TO_JUDGE)  # its fields checked before this actor reads any of them
        except m.WrongMessage as err:
            return m.Failed(f"WrongMessage: {err}")
        if isinstance(message, m.JudgeAnswer):
            missing = _missing_build(message.outcome)
            if missing:
                return m.Failed(missing)
        reply = self.server.handle(message)
        if isinstance(message, m.Exit):
            shutil.rmtree(self.workdir, ignore_errors=True)
        return reply

    def _open(self, spec: StationSpec) -> DeviceJudge:
        if spec.device == "cuda" and builder.arch_list("cuda") != self.arch:
            raise ScoreError(f"this judge's GPU has compute capability {builder.arch_list('cuda')}, the run builds "
                             f"for {self.arch}: a Ray run needs GPUs of one kind")
        problems = {pid: _local_problem(problem, self.files.get(pid, {}), self.workdir / str(n))
                    for n, (pid, problem) in enumerate(spec.problems.items())}
        return open_device_judge(replace(spec, problems=problems, limits=replace(spec.limits, run_as=node_identity())))


def _missing_build(outcome: BuildOutcome) -> str:
    """Why this node cannot load the answer's build (its folder is not here), or ''."""
    built = Path(outcome.extension_dir).parent
    if outcome.status in ("ok", "import_failed") and not built.is_dir():
        return (f"FileNotFoundError: the build of this answer ({built}) is not on the Ray node {platform.node()} "
                f"that judges it: --cache-dir must be on a filesystem every node mounts at the same path")
    return ""


def _local_problem(problem: Problem, files: dict[str, bytes], folder: Path) -> Problem:
    """``problem`` where this node holds the driver's files at the same path, else a copy of them in ``folder``."""
    try:
        if all((problem.path / name).read_bytes() == data for name, data in files.items()):
            return problem
    except OSError:
        pass
    folder.mkdir(parents=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return replace(problem, path=folder)
