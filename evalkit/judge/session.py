"""Trusted side: one worker's session, as the judge conducts it.

The session speaks to the worker only through ``evalkit.sandbox.protocol``. Every reply it accepts is a
claim, and what a claim says about the outputs is checked against what the judge reads itself: each call's
outputs where the worker keeps them, read while it is frozen (``sandbox.worker_memory``), its own input buffers
and its own copies of the inputs. An observation that ends the session early is raised as ``verdicts.Stop``; a
reply that breaks the protocol is one such observation.
"""

from __future__ import annotations

import logging
import os
import secrets
import time
from dataclasses import dataclass
from typing import Any, Callable, Protocol

import torch

from evalkit.judge.reference import OutputSpec, ReferenceProblem
from evalkit.judge.tensor_check import tensors_equal
from evalkit.judge.time_limits import TimeLimits
from evalkit.judge.timing import GpuIdle
from evalkit.judge.verdicts import Finding, Stop, finding_of_claimed_error
from evalkit.sandbox import protocol, shared_buffers
from evalkit.sandbox.protocol import Claim, Op
from evalkit.row_parts import ErrorRecord, FrameRecord
from evalkit.sandbox.worker_memory import WorkerMemory

logger = logging.getLogger(__name__)

PLAIN_TENSOR_TYPES = ("torch.Tensor", "torch.nn.parameter.Parameter")


class WorkerChannel(Protocol):
    """The judge's end of a worker: ``evalkit.sandbox.launcher.UntrustedProcess``, or a fake in tests."""

    def send(self, message: Any) -> None: ...

    def send_fds(self, fds: list[int]) -> None: ...

    def receive_fds(self, count: int, timeout_s: float) -> list[int]: ...

    def receive(self, timeout_s: float, stage: str, spin: bool = False,
                arrived: Callable[[], None] | None = None) -> Claim: ...

    def freeze(self) -> None: ...

    def thaw(self) -> None: ...

    def watch(self) -> None: ...

    def close(self) -> tuple[str, str]: ...

    def ended(self) -> bool: ...


def output_entries(specs: list[OutputSpec]) -> list[dict[str, Any]]:
    """The setup's description of one call's outputs: their shapes and dtypes, as the worker checks them."""
    return [{"shape": list(s.shape), "dtype": str(s.dtype).removeprefix("torch.")} for s in specs]


@dataclass(frozen=True)
class RequestParts:
    """Where one request went on the judge's clock: until its reply was in, the freeze, the idle probe (ms)."""

    reply_ms: float
    freeze_ms: float
    idle_ms: float


class Session:
    """One submission's worker, with the judge-owned input buffers bound to it, timed by the judge's own clock.

    Every call takes the same path, ``observe``: the judge copies the calls' inputs into the shared input buffers
    while the worker is frozen, the clock starts, the judge wakes the worker and sends the call with a fresh nonce; the
    moment the reply is in, the judge freezes the worker, waits until the GPU has no work of the worker's left
    (``timing.GpuIdle``), and the clock stops. Only then does it read the reply, and, while the worker stays
    frozen, the outputs where the worker keeps them (``outputs``). Nothing before the clock starts can depend on
    the inputs (the worker has not seen them), nothing the worker does after it stops can change what the judge
    reads, and no work the worker queued runs into the next request, its own or another worker's.
    """

    def __init__(self, worker: WorkerChannel, ref: ReferenceProblem, limits: TimeLimits, batch: int = 1,
                 idle: GpuIdle | None = None) -> None:
        self.worker, self.ref, self.limits, self.batch = worker, ref, limits, batch
        self.calls = 0
        # One set of input buffers per forward call of a request (``batch`` of them): a request times ``batch``
        # calls at once, so the judge's per-request overhead weighs 1/batch on each call.
        self.inputs: list[list[Any]] = []
        self._shared: list[Any] = []  # per input: the buffer lent to the worker, every call's values stacked
        self._staging: list[Any] = []  # per input: the judge's own of the same form, filled before the clock starts
        self.specs: list[OutputSpec] = []
        self.memory = WorkerMemory(ref.device)
        self.claim: protocol.CalledClaim | None = None  # the last request's reply: where its outputs lie
        self._views: dict[int, list[torch.Tensor]] = {}  # what was read of the last request's outputs, by call
        self.originals: list[list[Any]] = []
        self.idle = idle or GpuIdle(ref.device)
        self._lent: list[Any] = []  # what backs the buffers lent to the worker (``shared_buffers.describe``)
        self._perf_counter = time.perf_counter
        self.last_parts = RequestParts(0.0, 0.0, 0.0)  # the last request's (``observe``)

    def start(self, fields: dict[str, Any], specs: list[OutputSpec], sample_inputs: list[Any]) -> None:
        """Send the setup request (``fields`` plus the judge-owned input buffers and the outputs' form); a CPU
        worker answers with a descriptor of its own memory. The worker then waits for pings or load."""
        fds: list[int] = []
        device = self.ref.device
        self.specs = specs
        stacked = [torch.empty((self.batch, *v.shape), dtype=v.dtype, device="meta") if isinstance(v, torch.Tensor)
                   else v for v in sample_inputs]
        described = [shared_buffers.describe(v, device, fds, self._lent) for v in stacked]
        self._shared = [b for b, _ in described]
        self._staging = [torch.empty_like(b) if isinstance(b, torch.Tensor) else b for b in self._shared]
        self.inputs = [[b[k] if isinstance(b, torch.Tensor) else b for b in self._shared] for k in range(self.batch)]
        entries = [e for _, e in described]
        self.worker.send(protocol.setup_request(**fields, inputs=entries, outputs=output_entries(specs),
                                                fd_count=len(fds), batch=self.batch, memory=device == "cpu"))
        try:
            if fds:
                self.worker.send_fds(fds)
        finally:
            for fd in fds:
                os.close(fd)
        if device == "cpu":
            self.memory = WorkerMemory(device, self.worker.receive_fds(1, self.limits.load_s)[0])

    def release(self) -> None:
        """Free the buffers lent to the worker and unmap what was mapped of its memory, once the worker is closed
        and no process of it is left. While one is (it escaped the sandbox's kill), the lent buffers are kept, a
        leak, rather than let it write into memory the judge allocates next."""
        self.inputs, self._shared, self._staging, self._views, self.claim = [], [], [], {}, None
        self.memory.close()
        if self.worker.ended():
            shared_buffers.release(self._lent)
        elif self._lent:
            logger.warning("a process of a closed worker is still alive: its %d buffer(s) stay allocated",
                           len(self._lent))

    def calibrate(self, originals: list[list[Any]], enough: Callable[[list[float]], bool]) -> list[float]:
        """Pings along a timed call's exact path, before any submission code has run, until ``enough`` of them:
        each the judge's milliseconds for the request beyond the worker's own events around its stand-in's calls
        (the judge's and the harness's part of a request; ``timing.Overhead``). The stand-in returns outputs of the
        problem's form and runs one tiny kernel a call on a GPU, so no answer can skip a cost subtracted for it."""
        beyond: list[float] = []
        while not enough(beyond):
            wall_ms, pong = self.observe(originals, Op.PING)
            beyond.append(wall_ms - sum(pong.call_ms))
        return beyond

    def load(self, meanwhile: Callable[[], None] | None = None) -> protocol.ReadyClaim:
        """Have the worker import the submission and construct ModelNew; ``meanwhile``: the judge's own work, done
        while the worker loads, before its reply is read."""
        return self._exchange(Op.LOAD, protocol.ReadyClaim, "load", self.limits.load_s, meanwhile)

    def _exchange(self, op: str, claim_type: type[Any], stage: str, limit_s: float,
                  meanwhile: Callable[[], None] | None = None) -> Any:
        """One untimed request: wake the worker, ask, (do ``meanwhile``,) take its ``claim_type`` reply, freeze it
        again."""
        self.worker.thaw()
        self.worker.send(protocol.simple_request(op))
        if meanwhile is not None:
            meanwhile()
        claim = self.expect(claim_type, stage, limit_s)
        self.worker.freeze()
        return claim

    def observe(self, originals: list[list[Any]], op: str = Op.CALL) -> tuple[float, Any]:
        """One request (or calibration ping) on ``originals``, one set of inputs per call: the whole batch, or
        fewer (forward runs on the first ``len(originals)`` sets). (The judge's milliseconds for the whole request,
        the worker's reply.) Once it returns, the worker is frozen and ``outputs`` reads what its calls left."""
        self._views, self.claim = {}, None
        self._stage(originals)
        nonce = secrets.randbits(63)
        first = op == Op.CALL and self.calls == 0
        limit = self.limits.request_s(len(originals), first=first) if op == Op.CALL else self.limits.load_s
        stopped: list[float] = []  # the reply in, the worker frozen, the GPU idle: the clock stops at the last

        def arrived() -> None:
            stopped.append(self._perf_counter())
            self.worker.freeze()  # returns once every process of it is stopped: nothing it does now reaches the judge
            stopped.append(self._perf_counter())
            self._wait_until_idle(limit)
            stopped.append(self._perf_counter())

        self._load_inputs(originals)  # while it is frozen: it can first look at them once the clock runs
        start = self._perf_counter()
        self.worker.thaw()
        self.worker.send(protocol.nonce_request(op, nonce, calls=len(originals)))
        if op == Op.CALL:
            self.calls += 1
            claim = self.expect(protocol.CalledClaim, "forward", limit, spin=True, arrived=arrived)
        else:
            claim = self.expect(protocol.PongClaim, "ping", limit, spin=True, arrived=arrived)
        elapsed_ms = (stopped[-1] - start) * 1e3
        self.last_parts = RequestParts(*((end - begin) * 1e3 for begin, end in zip([start, *stopped], stopped)))
        if claim.nonce != nonce:
            raise Stop(Finding.PROTOCOL_VIOLATION, f"protocol violation: a reply to a call it was not sent "
                                                   f"(nonce {claim.nonce}, expected {nonce})")
        self.worker.watch()
        if op == Op.CALL:
            self.claim = claim
        return elapsed_ms, claim

    def outputs(self, call: int) -> list[torch.Tensor]:
        """Call ``call``'s outputs in the last request, read where the worker keeps them, while it is frozen: on a
        GPU over its memory, on a CPU the judge's copy. ``Stop`` when the worker's memory cannot back the place it
        claimed (a protocol violation)."""
        if call not in self._views:
            assert self.claim is not None, "no request to read the outputs of"
            try:
                self._views[call] = [self.memory.view(place, self.claim.segments, tuple(spec.shape), spec.dtype)
                                     for place, spec in zip(self.claim.places[call], self.specs)]
            except protocol.ProtocolViolation as violation:
                raise Stop(Finding.PROTOCOL_VIOLATION, f"protocol violation {violation}") from None
        return self._views[call]

    def _wait_until_idle(self, limit_s: float) -> None:
        """Wait until no work the worker queued on the GPU is left; work still queued past ``limit_s`` ends it."""
        if not self.idle.wait(limit_s):
            raise Stop(Finding.WORKER_TIMED_OUT, f"work it left queued on the GPU after its reply was still running "
                                                 f"{limit_s:g} s later")

    def _stage(self, originals: list[list[Any]]) -> None:
        """The request's inputs into the judge's own staging buffers, before the clock starts (nothing lent)."""
        self.originals = originals
        for k, original_set in enumerate(originals):
            for staging, original in zip(self._staging, original_set):
                if isinstance(staging, torch.Tensor):
                    staging[k].copy_(original)
        self._synchronize()

    def _load_inputs(self, originals: list[list[Any]]) -> None:
        """The staged inputs into the buffers lent to the worker: one copy per input for all the request's calls."""
        calls = len(originals)
        for shared, staging in zip(self._shared, self._staging):
            if isinstance(shared, torch.Tensor):
                shared[:calls].copy_(staging[:calls])
        self._synchronize()

    def _synchronize(self) -> None:
        if self.ref.device == "cuda":
            torch.cuda.synchronize()

    def profile(self) -> protocol.ProfiledClaim:
        return self._exchange(Op.PROFILE, protocol.ProfiledClaim, "profile", self.limits.first_call_s)

    def expect(self, claim_type: type[Any], stage: str, limit_s: float, spin: bool = False,
               arrived: Callable[[], None] | None = None) -> Any:
        """The next reply within ``limit_s``, if it is a ``claim_type``; else ``Stop`` with what it was. ``spin``
        (a timed request on a GPU): the judge waits for it without sleeping. ``arrived`` runs the moment the reply
        is in, before it is read."""
        try:
            claim = self.worker.receive(limit_s, stage, spin=spin and self.ref.device == "cuda", arrived=arrived)
        except protocol.ProtocolViolation as violation:
            raise Stop(Finding.PROTOCOL_VIOLATION, f"protocol violation {violation}") from None
        if isinstance(claim, protocol.ErrorClaim):
            raise Stop(finding_of_claimed_error(claim.kind), _error_reason(claim), {"error": error_record(claim)})
        if not isinstance(claim, claim_type):
            raise Stop(Finding.PROTOCOL_VIOLATION,
                       f"protocol violation during stage '{stage}': expected '{claim_type.OP}', got '{claim.OP}'")
        return claim

    def check_delivery(self, claim: protocol.CalledClaim, specs: list[OutputSpec]) -> None:
        """Reject outputs of the wrong form, places that do not name every output of every call, and mutated
        inputs."""
        if not claim.formed:
            expected = [[list(s.shape), str(s.dtype)] for s in specs]
            got = list(zip(claim.shapes, claim.dtypes, claim.types))
            raise Stop(Finding.WRONG_FORM, f"output has the wrong form: got (shape, dtype, type) {got}, "
                                           f"expected (shape, dtype) {expected}")
        subclass = [t for t in claim.types if t not in PLAIN_TENSOR_TYPES]
        if subclass:
            raise Stop(Finding.WRONG_FORM, f"output is a tensor subclass {subclass}; a plain torch.Tensor is required")
        if len(claim.places) != len(self.originals) or any(len(p) != len(specs) for p in claim.places):
            raise Stop(Finding.PROTOCOL_VIOLATION, f"protocol violation: places for {len(claim.places)} call(s) of a "
                                                   f"request of {len(self.originals)}")
        mutated = sorted({i for shared_set, original_set in zip(self.inputs, self.originals)
                          for i, (s, o) in enumerate(zip(shared_set, original_set))
                          if isinstance(s, torch.Tensor) and not tensors_equal(s, o)})
        if mutated:
            raise Stop(Finding.MUTATED_INPUTS, f"forward modified its input(s) {mutated} in place")


def error_record(claim: protocol.ErrorClaim) -> ErrorRecord:
    """The worker's claimed error as the row's ``error`` record (every field of it the worker's claim)."""
    return ErrorRecord(op=claim.OP, kind=claim.kind, stage=claim.stage, type=claim.type, message=claim.message,
                       traceback=[FrameRecord(file=frame.file, line=frame.line, function=frame.function,
                                              in_submission=frame.in_submission, text=frame.text)
                                  for frame in claim.traceback])


NO_NETWORK = " [the sandbox has no network: no socket reaches any host]"
_NETWORK_FAILURES = ("Network is unreachable", "Permission denied", "Name or service not known",
                     "Temporary failure in name resolution")


def _error_reason(claim: protocol.ErrorClaim) -> str:
    first_line = claim.message.strip().splitlines()[:1]
    reason = f"{claim.stage or '?'}: {first_line[0] if first_line else 'error'}"[:300]
    return reason + (NO_NETWORK if needed_network(claim) else "")


def needed_network(claim: protocol.ErrorClaim) -> bool:
    """Whether the error looks like a socket the sandbox refused (a claim: it only ever adds an explanation)."""
    in_socket = any(frame.file in ("socket.py", "connection.py", "client.py") for frame in claim.traceback)
    return in_socket and any(text in claim.message for text in _NETWORK_FAILURES)
