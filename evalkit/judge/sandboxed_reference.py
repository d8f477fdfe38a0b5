"""Trusted side: a problem given as text (untrusted, ``Problem.trusted`` false), held by the judge through the
``ReferenceProblem`` interface while its reference runs in a sandboxed worker of its own
(``evalkit.judge.reference_worker``), never in this process.

- ``check_untrusted``: before anything is built, a sandbox like a build's (no GPU, frozen while a judge times)
  imports the reference, checks it defines ``Model``, ``get_inputs`` and ``get_init_inputs`` and returns its init
  inputs as plain values (``evalkit.sandbox.values``), once per content: what it found is kept beside the problem
  (``sources.problems.CHECKED_FILE``), its init inputs for the builds' ``ModelNew(*init_inputs)``.
- ``SandboxedReference``: the judge's reference of the problem on its device. Its worker builds the model and
  describes its tensors (``reference_protocol.Loaded``); the judge lends it buffers of its own for them (bounded by
  the sandbox's memory limit) and takes its copies from there after each request: the weights once, then fresh
  inputs, PyTorch's own outputs and the float64 oracle's as the judge asks. Between requests the worker is stopped,
  so it runs nothing beside a timing. Its eager time (time limits, a request's size) is what its own clock claims,
  bounded by the judge's clock around the request: a lie can only make it shorter, which costs its own answers.

What the reference computes decides only its own problem's verdicts, which is its sender's to write anyway; it
cannot reach the judge, another problem, or another client's answers. Whatever its worker does wrong (fails, dies,
breaks the protocol) is ``ReferenceFailed``: its answers are not judged, and nothing counts against them.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import threading
import shutil
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import torch

from evalkit.judge.reference import EAGER_CALLS, REFERENCE_TURN, ReferenceProblem, precision_dtype
from evalkit.records import EvalkitError
from evalkit.sandbox import reference_protocol as rp
from evalkit.sandbox import shared_buffers
from evalkit.sandbox.launcher import Limits, UntrustedProcess, WorkerGone
from evalkit.sandbox.programs import REFERENCE_WORKER
from evalkit.sandbox.protocol import ProtocolViolation
from evalkit.sandbox.values import decode
from evalkit.sources.problems import REFERENCE_FILE, Problem, ProblemError

logger = logging.getLogger(__name__)

CHECK_S = 120.0  # start Python and torch, import the reference, call get_init_inputs()
LOAD_S = 600.0  # and build the model on the device, one draw of inputs, its own result and the float64 oracle's
STEP_S = 600.0  # one request: a draw of inputs, a forward in the problem's dtype or in float64, the eager timing
WORKDIR_PREFIX = "evalkit-reference-"
# Beside an untrusted problem's reference: what its sandboxed check found, written by the judge, never by the sandbox:
# {"error": why it cannot be used} or {"init_inputs": values JSON (``evalkit.sandbox.values``)}.
CHECKED_FILE = "checked.json"


class ReferenceFailed(EvalkitError):
    """An untrusted reference failed, or its worker died or broke the protocol: its problem's answers cannot be
    judged against it. The reference's fault, never an answer's verdict or a failure of evalkit's."""


def check_untrusted(problem: Problem, limits: Limits, freezer: Any = None) -> None:
    """``ProblemError`` saying what is wrong with ``problem``'s reference (naming no folder of this host), found by
    a sandbox once per content; a check whose sandbox died or ran out of time is not kept, and runs again next time."""
    facts = checked_facts(problem)
    if facts is None:
        facts, keep = _check(problem, limits, freezer)
        if keep:
            record_check(problem, facts)
    if "error" in facts:
        raise ProblemError(f"the reference given as text cannot be used: {facts['error']}")


def checked_facts(problem: Problem) -> dict[str, Any] | None:
    """What the sandboxed check of ``problem`` found; None when it was not checked yet (or the file is unreadable)."""
    try:
        facts = json.loads((problem.path / CHECKED_FILE).read_text())
    except (OSError, ValueError):
        return None
    return facts if isinstance(facts, dict) and ("error" in facts or "init_inputs" in facts) else None


def checked_init_inputs(problem: Problem) -> list[Any] | None:
    """The init inputs the sandboxed check of ``problem`` found (the builds' ``ModelNew(*init_inputs)``), or None."""
    facts = checked_facts(problem)
    try:
        values = decode(facts["init_inputs"]) if facts is not None and "init_inputs" in facts else None
    except ValueError:
        return None
    return list(values) if isinstance(values, (list, tuple)) else None


def record_check(problem: Problem, facts: dict[str, Any]) -> None:
    """Keep what the sandboxed check of ``problem`` found beside it (whole or not at all)."""
    staging = problem.path / f".{CHECKED_FILE}.{os.getpid()}.{threading.get_ident()}"
    staging.write_text(json.dumps(facts))
    staging.replace(problem.path / CHECKED_FILE)


def _check(problem: Problem, limits: Limits, freezer: Any) -> tuple[dict[str, Any], bool]:
    """What the sandbox found, and whether it is the reference's own say (kept) rather than its sandbox's end."""
    workdir = Path(tempfile.mkdtemp(prefix=WORKDIR_PREFIX))
    code_path = _place(problem, workdir)
    with freezer.launching() if freezer else nullcontext():  # not while a judge times, as a build
        worker = UntrustedProcess(workdir, limits, {"CUDA_VISIBLE_DEVICES": ""}, freezer=freezer,
                                  program=REFERENCE_WORKER)
        if freezer:
            freezer.register(worker.pid, worker.marker, worker.cgroup)
    try:
        worker.send(rp.setup("check", code_path, "cpu", "fp32", 0, 0, limits.to_dict()))
        claim = worker.receive(CHECK_S, "check")
    except WorkerGone as gone:  # not kept: a time limit on a loaded machine, or the run's end, may have cut it
        return {"error": f"its check in a sandbox failed: {gone}"}, False
    except ProtocolViolation as violation:
        return {"error": f"its check in a sandbox broke the protocol: {violation}"}, True
    finally:
        worker.close()
        if freezer:
            freezer.unregister(worker.pid)
        shutil.rmtree(workdir, ignore_errors=True)
    if isinstance(claim, rp.Failed):
        return {"error": f"{claim.message} ({claim.stage})"}, True
    if not isinstance(claim, rp.Checked):
        return {"error": f"its check in a sandbox replied {claim.OP!r}"}, True
    try:
        init_inputs = decode(claim.init_inputs)
    except ValueError as err:
        return {"error": f"get_init_inputs() returned what cannot be carried out of its sandbox: {err}"}, True
    if not isinstance(init_inputs, list):
        return {"error": "get_init_inputs() must return a list"}, True
    return {"init_inputs": claim.init_inputs}, True


def _place(problem: Problem, workdir: Path) -> str:
    """Copy ``problem``'s reference.py into ``workdir``; its path as the worker, whose folder it is, names it."""
    folder = workdir / problem.id
    folder.mkdir()
    shutil.copyfile(problem.reference_path, folder / REFERENCE_FILE)
    return f"{problem.id}/{REFERENCE_FILE}"


class SandboxedReference(ReferenceProblem):
    """``ReferenceProblem`` of an untrusted problem: the same interface, answered by ``worker`` (a fresh reference
    worker, ``REFERENCE_WORKER``), which this object ends on ``close``. ``memory_bytes`` bounds the buffers it lends.
    Raises ``ReferenceFailed`` (the worker ended) when the reference cannot be loaded."""

    def __init__(self, problem: Problem, device: str, init_seed: int, precision: str, worker: UntrustedProcess,
                 memory_bytes: int) -> None:
        # Nothing of the reference is loaded here: ``ReferenceProblem.__init__`` would import it.
        self.problem, self.device, self.init_seed = problem, device, init_seed
        self.dtype = precision_dtype(precision)
        self.precision = "float64"
        self.float64_cudnn = True  # the worker picks its own backend
        self._worker, self._lent = worker, []
        self._views: dict[str, list[Any]] = {}
        try:
            self._loaded = self._load(precision, memory_bytes)
            self._bind()
        except BaseException:
            self.close()
            raise
        self.init_inputs = self._decoded(self._loaded.init_inputs, "its init inputs")
        self.state_dict = {spec.name: view.clone() for spec, view in zip(self._loaded.state, self._views["state"])}
        self.n_inputs = len(self._loaded.inputs)

    def _load(self, precision: str, memory_bytes: int) -> rp.Loaded:
        code_path = _place(self.problem, self._worker.workdir)
        self._send(rp.setup("serve", code_path, self.device, precision, self.init_seed, secrets.randbits(62),
                            self._worker.limits.to_dict()))
        loaded = self._reply(LOAD_S, "load", rp.Loaded)
        sizes = {role: rp.layout(getattr(loaded, role))[1] for role in ("state", "inputs", "own", "expected")}
        if sum(sizes.values()) > memory_bytes:
            raise ReferenceFailed(f"the reference's tensors take {sum(sizes.values()) / 2**30:.1f} GiB (weights, one "
                                  f"set of inputs, its outputs in its dtype and in float64), more than the "
                                  f"{memory_bytes / 2**30:.1f} GiB a sandbox may hold")
        if not all(spec.name for spec in loaded.state) or len({s.name for s in loaded.state}) != len(loaded.state):
            raise ReferenceFailed("the reference's worker named its weights with empty or repeated names")
        return loaded

    def _bind(self) -> None:
        """Lend the worker a flat buffer per role (the weights in host memory, the rest on the device), each
        tensor a view at its ``layout`` offset; the worker fills the weights' at once."""
        fds: list[int] = []
        entries = {}
        for role in ("state", "inputs", "own", "expected"):
            specs = getattr(self._loaded, role)
            device = "cpu" if role == "state" else self.device
            flat, entries[role] = shared_buffers.describe(
                torch.empty(rp.layout(specs)[1], dtype=torch.uint8, device="meta"), device, fds, self._lent)
            self._views[role] = rp.views(flat, specs)
        self._send(rp.ReferenceBind(**entries, fd_count=len(fds)), fds)
        for fd in fds:
            os.close(fd)
        self._reply(STEP_S, "bind", rp.Bound)
        self._freeze()  # from now on it runs only while asked (``_ask``)

    def _send(self, message: Any, fds: list[int] | None = None) -> None:
        try:
            self._worker.send(message)
            if fds:
                self._worker.send_fds(fds)
        except WorkerGone as gone:
            raise ReferenceFailed(f"the reference's sandbox ended: {gone}") from None

    def _freeze(self) -> None:
        try:
            self._worker.freeze()
        except WorkerGone as gone:  # it could not be stopped, so it was killed
            raise ReferenceFailed(f"the reference's sandbox ended: {gone}") from None

    def _reply(self, limit_s: float, stage: str, kind: type) -> Any:
        """The worker's next reply, of ``kind``; ``ReferenceFailed`` for anything else (its failure, its death)."""
        try:
            claim = self._worker.receive(limit_s, stage)
        except (WorkerGone, ProtocolViolation) as gone:
            raise ReferenceFailed(f"the reference's sandbox ended ({stage}): {gone}") from None
        if isinstance(claim, rp.Failed):
            raise ReferenceFailed(f"the reference failed ({claim.stage}): {claim.message}")
        if not isinstance(claim, kind):
            raise ReferenceFailed(f"the reference's worker replied {claim.OP!r} to {stage}")
        return claim

    def _ask(self, request: rp.ReferenceRequest) -> rp.Done:
        """One request, the worker running only for its duration: woken, asked, then stopped again. On a GPU, the
        judge's queued work finishes first: the request may rewrite buffers that the judge's copies of a former
        reply (``make_inputs`` clones its inputs without waiting) still read, and the worker reads what the judge
        copied into them (``_computed``)."""
        with REFERENCE_TURN:
            if self.device == "cuda":
                torch.cuda.synchronize()
            self._worker.thaw()
            try:
                self._send(request)
                done = self._reply(STEP_S, request.op, rp.Done)
            finally:
                self._freeze()
        if done.request != request.op:
            raise ReferenceFailed(f"the reference's worker answered {done.request!r} to {request.op!r}")
        return done

    def _decoded(self, data: Any, what: str) -> Any:
        try:
            return decode(data)
        except ValueError as err:
            raise ReferenceFailed(f"the reference's worker sent {what} that cannot be read: {err}") from None

    def make_inputs(self, seed: int) -> list[Any]:
        with REFERENCE_TURN:  # cloned before another thread's request rewrites them
            done = self._ask(rp.ReferenceRequest("inputs", seed=seed))
            if len(done.values) != self.n_inputs:
                raise ReferenceFailed(f"the reference's worker sent {len(done.values)} values for {self.n_inputs} "
                                      f"inputs")
            return [view.clone() if view is not None else self._decoded(value, "an input")
                    for view, value in zip(self._views["inputs"], done.values)]

    def expected(self, inputs: list[Any]) -> list[torch.Tensor]:
        with REFERENCE_TURN:
            return [view.clone() for view in self.expected_read_at_once(inputs)]

    def expected_read_at_once(self, inputs: list[Any]) -> list[torch.Tensor]:
        done = self._computed("expected", inputs)
        self.precision = done.precision
        return list(self._views["expected"])  # the worker is frozen until the next request rewrites them

    def pytorch_own(self, inputs: list[Any]) -> list[torch.Tensor]:
        with REFERENCE_TURN:
            self._computed("own", inputs)
            return [view.clone() for view in self._views["own"]]

    def _computed(self, op: str, inputs: list[Any]) -> rp.Done:
        from evalkit.sandbox.values import encode

        values = []
        with REFERENCE_TURN:  # its input buffers are written here, then read by the request
            for view, value in zip(self._views["inputs"], inputs):
                if view is not None:
                    view.copy_(value)
                values.append(None if view is not None else encode(value))
            return self._ask(rp.ReferenceRequest(op, values=values))

    def pick_float64_backend(self, inputs: list[Any]) -> None:
        """The worker picked its own when it loaded."""

    def eager_ms(self, seed: int, calls: int = EAGER_CALLS) -> float:
        """The worker's claim, bounded by the judge's own clock around the request (one draw, a warm-up and
        ``calls`` timed calls): a lie can only make it shorter."""
        start = time.perf_counter()
        done = self._ask(rp.ReferenceRequest("time", seed=seed, calls=calls))
        return min(done.ms, (time.perf_counter() - start) * 1e3 / calls)

    def lent_device_bytes(self) -> int:
        """The device buffers lent to the worker (its inputs, outputs and float64 outputs), allocated through the
        driver: no allocator of torch's counts them."""
        return shared_buffers.device_bytes(self._lent)

    def close(self) -> None:
        """End the worker, then free what was lent to it (no process of it left to write there)."""
        self._worker.close()
        if self._worker.ended():
            shared_buffers.release(self._lent)
        else:
            logger.warning("%s: the reference's worker did not end; its buffers stay allocated", self.problem.id)
        shutil.rmtree(self._worker.workdir, ignore_errors=True)
