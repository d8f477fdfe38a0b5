"""Trusted side: builds and judges on a Ray cluster (``--backend ray``; ``pip install 'evalkit[ray]'``).

Imported only when a run asks for Ray (``machines.machines``); nothing else in evalkit imports ``ray`` (what runs
on the nodes is in ``ray_judge``, made remote here).
The scheduler (``engine.Engine``) stays on this machine, the driver: it triages, writes the rows and the
report, and hands the rest to the cluster through Ray's own facilities:

- a build is a task holding one CPU (``num_cpus=1``), its argument a ``judge_messages.Build`` and its result the
  ``BuildOutcome`` (checked with ``expect`` on arrival; a ``Refused`` or ``Failed`` is raised by the engine's
  future, that answer's ``judge_failed`` row, as a local build that raised is);
- a judge is an actor (a worker process of its own, ``ray_judge.JudgeActor``) holding one GPU (``num_gpus=1``:
  Ray sets its ``CUDA_VISIBLE_DEVICES``), or one CPU; one per judge slot. The driver speaks the judge protocol
  to it (``judge_messages``, as to every judge): each message the argument of its ``handle``, the reply its
  result, one call at a time. A ``Cancel`` goes to its ``cancel`` in the concurrency group ``CANCEL_GROUP``, so
  it is served while ``handle`` judges the answer it ends (not waited for; a ``Failed`` reply is logged). An
  actor that dies fails the request it served (that answer's ``judge_failed`` row) and a new one serves the next
  request.

What a node cannot share with this machine: the build cache must be at the same ``--cache-dir`` path on every
node (checked on connecting, and by a judge before it loads a build); a judge gets the problems' files from
the driver, which writes the report's ``baselines.json`` from what the judge returns; the sandbox user and
the CUDA arch are the cluster's. Builds are not frozen while a judge times (``BuildFreezer`` reaches this
machine's processes only): ``docs/ray.md`` says what that means for timings.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import uuid
from concurrent.futures import Future, InvalidStateError
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

import torch

from evalkit.version import __version__
from evalkit.judge.builder import BuildOutcome
from evalkit.report_folder import ReportFolder
from evalkit.sandbox.freezer import BuildFreezer
from evalkit.sandbox.launcher import Limits
from evalkit.schedule import judge_messages as m
from evalkit.schedule.backend import Machines
from evalkit.schedule.judge_client import MessageStation
from evalkit.schedule.judge_messages import StationSpec
from evalkit.schedule.options import JudgeOptions, ScoreError
from evalkit.schedule.placement import JudgeSlot, Placement
from evalkit.schedule.ray_judge import JudgeActor, build_task, kill_sandboxes, node_facts
from evalkit.sources.problems import REFERENCE_FILE, TOML_FILE

logger = logging.getLogger(__name__)

PROBE_WAIT_S = 300.0  # how long connecting waits for a GPU (or CPU) of the cluster to describe the judging node
STOP_WAIT_S = 15.0  # how long closing waits for an actor to stop cleanly, and for the sandbox sweep of the nodes
# A judge actor's second concurrency group (a thread of its own), for ``cancel`` only: ``handle`` stays in the default
# group, whose one thread serves the protocol's requests one at a time.
CANCEL_GROUP = "cancel"


class JudgeActorDied(RuntimeError):
    """A judge's Ray actor ended (it crashed, was killed, or its node was lost) while serving a request."""


class BuildTaskFailed(RuntimeError):
    """A Ray build task answered ``Failed``: the build raised on its node, or it was sent no Build (a bug)."""


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ScoreError("--backend ray needs Ray, which is not installed here: pip install 'evalkit[ray]' "
                         "(or drop --backend ray to judge on this machine)") from None
    return ray


def connect(options: JudgeOptions) -> Machines:
    """Join the cluster at ``options.ray_address`` (None: $RAY_ADDRESS, else a new local one) unless this process
    is connected already (the caller's ``ray.init``); the device and judges follow the cluster's resources."""
    ray = _ray()
    owned = not ray.is_initialized()
    if owned:
        _init(ray, options)
    try:
        return _connected(ray, options, owned)
    except BaseException:
        if owned:
            ray.shutdown()
        raise


def _init(ray: Any, options: JudgeOptions) -> None:
    """``ray.init``, quietly, keeping this process's SIGTERM handling (Ray's would exit without clean-up).
    A local cluster gets a CPU more than the judges, so builds run beside them as they do locally."""
    address = options.ray_address or os.environ.get("RAY_ADDRESS") or "local"
    local = {"num_cpus": max(os.cpu_count() or 1, options.judges + 1)} if address == "local" else {}
    main = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGTERM) if main else None
    try:
        ray.init(address=address, include_dashboard=False, logging_level=logging.WARNING,
                 log_to_driver=logging.getLogger("evalkit").isEnabledFor(logging.INFO), **local)
    except (ConnectionError, ValueError, RuntimeError) as err:
        raise ScoreError(f"could not join the Ray cluster at {address}: {err}") from None
    finally:
        if main and previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _connected(ray: Any, options: JudgeOptions, owned: bool) -> Machines:
    resources = ray.cluster_resources()
    gpus, cpus = int(resources.get("GPU", 0)), int(resources.get("CPU", 0))
    if options.device == "cuda" and gpus < 1:
        raise ScoreError(f"--device cuda was asked for, but the Ray cluster has no GPU ({cpus} CPUs); start its "
                         f"GPU nodes with `ray start ... --num-gpus=N`, or use --device cpu")
    device = "cuda" if gpus and options.device in ("auto", "cuda") else "cpu"
    if device == "cuda":
        slots = [JudgeSlot(f"ray-gpu:{i}", "cuda", None, ()) for i in range(_gpu_count(options, gpus))]
    elif options.judges >= cpus:
        raise ScoreError(f"--judges {options.judges}: the Ray cluster has {cpus} CPU(s); each CPU judge holds one "
                         f"and the builds need at least one more: give fewer --judges, or the cluster more CPUs")
    else:
        slots = [JudgeSlot(f"ray-cpu:{i}", "cpu", None, ()) for i in range(options.judges)]
    if cpus < 1:
        raise ScoreError("the Ray cluster has no CPU to build on: start a node with `ray start --num-cpus=N`")
    facts = _probe(ray, options, device)
    return Machines(device, Placement(tuple(slots), ()), RayBackend(facts.get("gpu_capability") or "", owned),
                    environment=facts)


def _gpu_count(options: JudgeOptions, gpus: int) -> int:
    """``--gpus`` on a cluster: all, or a count; Ray picks which GPUs."""
    text = options.gpus.strip().lower()
    if options.judges != 1:
        raise ScoreError(f"--judges {options.judges}: a Ray cluster's GPUs have one judge each; choose how many with "
                         f"--gpus (all, or a count)")
    if text != "all" and not text.isdigit():
        raise ScoreError(f"--gpus {options.gpus}: on a Ray cluster Ray assigns the GPUs, so indices mean nothing "
                         f"there; give all, or a count of GPUs to claim (one judge each)")
    if text != "all" and not 1 <= int(text) <= gpus:
        raise ScoreError(f"--gpus {options.gpus}: the Ray cluster has {gpus} GPU(s); give a count from 1 to {gpus}")
    return gpus if text == "all" else int(text)


def _probe(ray: Any, options: JudgeOptions, device: str) -> dict[str, Any]:
    """The judging node's facts (``environment()``, from a task on a GPU, or a CPU), once it is known to run
    this machine's evalkit and torch and to see its ``--cache-dir``."""
    options.cache_dir.mkdir(parents=True, exist_ok=True)
    marker = options.cache_dir / f".ray-check-{uuid.uuid4().hex}"
    marker.write_text("evalkit: do the Ray nodes share this cache?\n")
    claim = {"num_gpus": 1, "num_cpus": 0} if device == "cuda" else {"num_cpus": 1}
    ref = ray.remote(**claim, max_calls=1, max_retries=0)(node_facts).remote(m.Probe(str(marker)))
    try:
        facts, seen, node = probed(ray.get(ref, timeout=PROBE_WAIT_S))
    except ray.exceptions.GetTimeoutError:
        ray.cancel(ref, force=True)
        raise ScoreError(f"no {device.upper()} of the Ray cluster became free within {PROBE_WAIT_S:g} s "
                         f"(`ray status` shows what holds them)") from None
    finally:
        marker.unlink(missing_ok=True)
    if not seen:
        raise ScoreError(f"--cache-dir {options.cache_dir} is not shared with the Ray node {node}: builds and "
                         f"judges run on any node and find the build cache there, so give a --cache-dir on a "
                         f"filesystem every node mounts at the same path (docs/ray.md)")
    ours = {"evalkit_version": __version__, "torch": torch.__version__}
    wrong = {key: (facts.get(key), value) for key, value in ours.items() if facts.get(key) != value}
    if wrong:
        raise ScoreError(f"the Ray node {node} runs other versions than this machine ({wrong}, the node's "
                         f"first): install the same evalkit and torch on every node")
    return facts


class RayStation(MessageStation):
    """The scheduler's handle on one judge actor (the messages are the arguments and results of its ``handle``);
    requests block until answered."""

    def __init__(self, backend: "RayBackend", slot: JudgeSlot, spec: StationSpec,
                 report: ReportFolder | None = None) -> None:
        super().__init__(slot.name, spec, report)
        self.backend, self.slot = backend, slot
        self._actor: Any = None
        self._busy = False  # a request in flight (an idle actor is stopped cleanly, even when abandoning)

    def abandon(self) -> None:
        """Kill the actor now, mid-answer or not, and start no other: the run is stopping."""
        self._abandoned = True
        self.close(hard=True)

    def close(self, hard: bool = False) -> None:
        actor, self._actor = self._actor, None
        if actor is None:
            return
        with contextlib.suppress(Exception):  # it is killed below either way
            if not (hard and self._busy):
                _ray().get(actor.handle.remote(m.Exit()), timeout=STOP_WAIT_S)
        with contextlib.suppress(Exception):  # already gone, or the cluster is
            _ray().kill(actor)

    def _running(self) -> bool:
        return self._actor is not None

    def _open(self) -> None:
        self._actor = self.backend.start_judge(self.slot, self.spec)

    def _cancel_in_judge(self, key: str) -> None:
        """The Cancel to the actor's ``cancel``, in its own concurrency group (``handle`` is busy with the answer);
        not waited for: its reply is only logged."""
        actor = self._actor
        if actor is None:
            return
        try:
            ref = actor.cancel.options(concurrency_group=CANCEL_GROUP).remote(m.Cancel(key))
            ref.future().add_done_callback(lambda done: self._cancel_answered(key, done))
        except Exception:  # noqa: BLE001 - the actor or the cluster is gone: its answer fails without a cancel
            logger.debug("judge %s: could not send the cancel of %s", self.slot.name, key, exc_info=True)

    def _cancel_answered(self, key: str, done: Future[Any]) -> None:
        try:
            answered = done.result()
        except Exception as err:  # noqa: BLE001 - the actor died meanwhile (its request fails on its own)
            logger.debug("judge %s: the cancel of %s was not served: %s", self.slot.name, key, err)
            return
        reply = m.expect(answered, m.Done, m.Failed)  # a WrongMessage here: logged by concurrent.futures
        if isinstance(reply, m.Failed):
            logger.warning("judge %s: its actor could not cancel %s: %s", self.slot.name, key, reply.message)

    def _exchange(self, message: Any) -> Any:
        ray = _ray()
        self._busy = True
        try:
            return ray.get(self._actor.handle.remote(message))
        except ray.exceptions.RayActorError as err:
            raise self._lost(str(err)) from None
        except ray.exceptions.RayTaskError as err:  # the actor's own exception, without Ray's wrapping
            raise (err.cause if isinstance(err.cause, Exception) else RuntimeError(str(err))) from None
        finally:
            self._busy = False

    def _lost(self, why: str) -> JudgeActorDied:
        actor, self._actor, self.current_problem, self.kept_problems = self._actor, None, None, []
        if actor is not None:
            with contextlib.suppress(Exception):  # already gone, or the cluster is
                _ray().kill(actor)
        return JudgeActorDied(f"judge {self.slot.name} (a Ray actor) ended: {why}")


def task_answer(reply: Any, request: type) -> Any:
    """A Ray task's ``reply`` to its ``request`` (a message type), checked with ``expect`` against the answers that
    request may have (``judge_messages.REPLIES``); ``ScoreError`` for a task of another protocol version, naming
    both. A ``Failed`` is returned: what it means is the caller's."""
    answer = m.expect(reply, *m.REPLIES[request])
    if isinstance(answer, m.Refused):
        raise ScoreError(f"a Ray {request.__name__.lower()} task speaks judge protocol {answer.version} and refused a "
                         f"{request.__name__} of judge protocol {answer.asked}: two versions of evalkit; install the "
                         f"driver's evalkit on every node")
    return answer


def probed(reply: Any) -> tuple[dict[str, Any], bool, str]:
    """The probe task's ``reply``: the node's facts, whether it sees the driver's marker, and its name;
    ``ScoreError`` where the probe was refused or failed (the run cannot start on that cluster)."""
    answer = task_answer(reply, m.Probe)
    if isinstance(answer, m.Failed):
        raise ScoreError(f"the Ray probe task failed on its node: {answer.message}")
    return answer.facts, answer.sees_marker, answer.node


def build_outcome(reply: Future[Any]) -> Future[BuildOutcome]:
    """The engine's future of a build task whose reply ``reply`` will hold: its ``BuildOutcome``, checked with
    ``expect``; else raised (``ScoreError`` for a task of another protocol version, ``BuildTaskFailed``), so that
    answer gets a ``judge_failed`` row, as a local build that raised does. Cancelling it leaves the task alone."""
    outcome: Future[BuildOutcome] = Future()

    def arrived(done: Future[Any]) -> None:
        try:
            answer = task_answer(done.result(), m.Build)
            if isinstance(answer, m.Failed):
                raise BuildTaskFailed(f"a Ray build task failed: {answer.message}")
        except BaseException as err:  # noqa: BLE001 - the task's own failure, or Ray's (its worker died)
            with contextlib.suppress(InvalidStateError):  # cancelled by the engine meanwhile
                outcome.set_exception(err)
        else:
            with contextlib.suppress(InvalidStateError):
                outcome.set_result(answer)
    reply.add_done_callback(arrived)
    return outcome


class RayBackend:
    """The engine's ``Backend`` on a Ray cluster: builds as CPU tasks, one judge actor per slot."""

    adds_problems = False  # an actor copies the problem files it is started with

    def __init__(self, arch: str, owns_ray: bool) -> None:
        self.arch, self.owns_ray = arch, owns_ray  # owns_ray: this process started (or joined) Ray for the run
        self._builds: list[tuple[Any, Future[BuildOutcome]]] = []
        self._stations: list[RayStation] = []
        self._groups: set[str] = set()
        self._abandoned = self._closed = False
        self._build_fn: Any = None
        self._judge_cls: Any = None

    def start_build(self, code: str, cache_root: Path, device: str, timeout_s: float, limits: Limits,
                    init_inputs: Any, freezer: BuildFreezer) -> Future[BuildOutcome]:
        """A build task on any node with a free CPU (``freezer`` is this machine's: the task has none)."""
        if self._build_fn is None:
            self._build_fn = _ray().remote(num_cpus=1, max_retries=1)(build_task)
        self._groups.add(limits.group)
        ref = self._build_fn.remote(m.Build(code, cache_root, device, timeout_s, limits, init_inputs, self.arch))
        self._builds = [(r, f) for r, f in self._builds if not f.done()] + [(ref, build_outcome(ref.future()))]
        return self._builds[-1][1]

    @property
    def sizes(self) -> dict[str, int]:
        return {"builds": len(self._builds)}

    def station(self, slot: JudgeSlot, spec: StationSpec, judges: int, freezer: BuildFreezer,
                progress: Callable[[str], None], report: ReportFolder | None = None) -> RayStation:
        self._groups.add(spec.limits.group)
        # A judge actor answers one request at a time and sends no row apart from its reply: no overlap there.
        self._stations.append(RayStation(self, slot, replace(spec, overlap=False), report))
        return self._stations[-1]

    def start_judge(self, slot: JudgeSlot, spec: StationSpec) -> Any:
        """A new judge actor: one GPU (Ray sets its CUDA_VISIBLE_DEVICES), or one CPU."""
        if self._closed:
            raise RuntimeError(f"judge {slot.name}: these judges are closed")
        if self._judge_cls is None:
            self._judge_cls = _ray().remote(concurrency_groups={CANCEL_GROUP: 1})(JudgeActor)
        claim = {"num_gpus": 1, "num_cpus": 0} if slot.device == "cuda" else {"num_cpus": 1}
        files = {pid: {name: (p.path / name).read_bytes() for name in (REFERENCE_FILE, TOML_FILE)
                       if (p.path / name).is_file()} for pid, p in spec.problems.items()}
        return self._judge_cls.options(**claim, max_restarts=0).remote(m.ActorStart(files, self.arch))

    def abandon_builds(self, kill: Callable[[], object]) -> None:
        """Cancel every unfinished build (a running one's worker is killed) and kill the run's sandboxes."""
        self._abandoned = True
        for ref, _ in self._builds:
            with contextlib.suppress(Exception):  # finished meanwhile, or the cluster is gone
                _ray().cancel(ref, force=True)
        kill()
        self._sweep()

    def close(self) -> None:
        """Stop every judge actor (a busy one is killed after ``abandon_builds``); shut Ray down only where this
        process started it for the run (a cluster it joined keeps running)."""
        self._closed, gone = True, self._cluster_gone()
        for handle in self._stations:
            handle.close(hard=self._abandoned or gone)
        if self._abandoned and not gone:
            self._sweep()  # the sandboxes of the judges just killed
        if self.owns_ray and _ray().is_initialized():
            _ray().shutdown()

    def _cluster_gone(self) -> bool:
        """Whether the local cluster this process started has died (a SIGTERM to the whole process group reaches
        it): then nothing may wait on it, since Ray ends this process a minute after its GCS is gone."""
        try:
            node = _ray()._private.worker._global_node  # no public API tells whether our own cluster lives
            return self.owns_ray and node is not None and not node.remaining_processes_alive()
        except Exception:  # noqa: BLE001 - Ray's internals moved: take it as alive
            return False

    def _sweep(self) -> None:
        """Kill the run's sandboxes on every live node (a killed Ray worker leaves its sandbox running)."""
        ray = _ray()
        if not ray.is_initialized() or not self._groups or self._cluster_gone():
            return
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        try:
            sweep = ray.remote(num_cpus=0, max_retries=0)(kill_sandboxes)
            refs = [sweep.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False))
                    .remote(m.Sweep(group)) for node in ray.nodes() if node.get("Alive") for group in self._groups]
            failed = [a for a in (task_answer(reply, m.Sweep) for reply in ray.get(refs, timeout=STOP_WAIT_S))
                      if isinstance(a, m.Failed)]
        except Exception:  # noqa: BLE001 - a node gone meanwhile; the others were swept
            logger.warning("could not kill the run's sandboxes on every Ray node", exc_info=True)
        else:
            for answer in failed:
                logger.warning("a Ray sweep task failed: %s", answer.message)
