"""Trusted side: one worker's session, as the judge conducts it.

The session speaks to the worker only through ``evalkit.sandbox.protocol``. Every reply it accepts is a
claim, and what a claim says about the outputs is checked against what the judge holds itself: its own
input and output buffers and its own copies of the inputs. An observation that ends the session early
is raised as ``verdicts.Stop``; a reply that breaks the protocol is one such observation.
"""

from __future__ import annotations

import logging
import math
import os
import secrets
import time
from typing import Any, Callable, Protocol

import torch

from evalkit.judge.reference import OutputSpec, ReferenceProblem
from evalkit.judge import tensor_check
from evalkit.judge.tensor_check import tensors_equal
from evalkit.judge.time_limits import TimeLimits
from evalkit.judge.timing import GpuIdle
from evalkit.judge.verdicts import Finding, Stop, finding_of_claimed_error
from evalkit.sandbox import protocol, shared_buffers
from evalkit.sandbox.protocol import Claim, Op

logger = logging.getLogger(__name__)

PLAIN_TENSOR_TYPES = ("torch.Tensor", "torch.nn.parameter.Parameter")


class WorkerChannel(Protocol):
    """The judge's end of a worker: ``evalkit.sandbox.launcher.UntrustedProcess``, or a fake in tests."""

    def send(self, message: dict[str, Any]) -> None: ...

    def send_fds(self, fds: list[int]) -> None: ...

    def receive(self, timeout_s: float, stage: str, spin: bool = False) -> Claim: ...

    def freeze(self) -> None: ...

    def thaw(self) -> None: ...

    def watch(self) -> None: ...

    def close(self) -> tuple[str, str]: ...

    def ended(self) -> bool: ...


def poison(buffers: list[torch.Tensor]) -> None:
    for buf in buffers:
        buf.fill_(float("nan") if buf.is_floating_point() else -1)


def unwritten(taken: list["Taken"]) -> bool:
    """True when a floating output of one call still holds poison (NaN) where the judge took it: not written before
    the reply, or a legitimate NaN, which the caller settles by checking the call against the reference."""
    return any(bool(torch.isnan(t.values).any()) for t in taken if t.values.is_floating_point())


class Taken:
    """What the judge took of one output of one call, into its private memory: the whole output (``positions``
    None), or its elements at ``positions`` (flat indices it drew in secret before the request)."""

    def __init__(self, values: torch.Tensor, positions: torch.Tensor | None = None) -> None:
        self.values, self.positions = values, positions


class TakenCopies:
    """One session's private memory for what the judge takes of a timed request's outputs: per call and output,
    room for the whole output when it has at most ``tensor_check.SAMPLED_ELEMENTS`` elements, else for a sample of that many
    at positions drawn in secret for each request (``draw_positions``). A few MB a worker: the full copies a
    correctness trial needs (``Session.held``) are the judge's, one set for all its sessions."""

    def __init__(self, specs: list[OutputSpec], batch: int, device: str) -> None:
        self.specs, self.device = specs, device
        self.sample_size = tensor_check.SAMPLED_ELEMENTS
        self.room = [[torch.empty(min(math.prod(s.shape), self.sample_size), dtype=s.dtype, device=device)
                      for s in specs] for _ in range(batch)]

    def draw_positions(self) -> list[torch.Tensor | None]:
        """Fresh positions for each output larger than a sample, from the judge's secret (None for one taken whole)."""
        return [tensor_check.sample_positions(math.prod(s.shape), secrets.randbits(63), self.device) for s in self.specs]


def held_copies(specs: list[OutputSpec], batch: int, device: str) -> list[list[torch.Tensor]]:
    """Room for every output of ``batch`` calls, whole: where the judge copies a correctness trial's outputs."""
    return [[torch.empty(s.shape, dtype=s.dtype, device=device) for s in specs] for _ in range(batch)]


class Session:
    """One submission's worker, with the judge-owned buffers bound to it, timed by the judge's own clock.

    Every call takes the same path, ``observe``: the judge wakes the (frozen) worker, the clock starts, the
    judge copies the call's inputs into the shared input buffers and sends the call with a fresh nonce; once
    the reply echoing that nonce has arrived, the judge takes its own copy of the outputs (``taken``: whole, or
    at secret positions) into memory the worker cannot reach, freezes the worker, waits until the GPU has no
    work of the worker's left (``timing.GpuIdle``), and the clock stops. Nothing before the clock starts can
    depend on the inputs (the worker has not seen them), nothing after it stops can change what the judge
    holds, and no work the worker queued runs into the next request, its own or another worker's.
    """

    def __init__(self, worker: WorkerChannel, ref: ReferenceProblem, limits: TimeLimits, batch: int = 1,
                 held: list[list[torch.Tensor]] | None = None, idle: GpuIdle | None = None) -> None:
        self.worker, self.ref, self.limits, self.batch = worker, ref, limits, batch
        self.calls = 0
        # One set of buffers per forward call of a request (``batch`` of them): a request times ``batch``
        # calls at once, so the judge's per-request overhead weighs 1/batch on each call.
        self.inputs: list[list[Any]] = []
        self.outputs: list[list[torch.Tensor]] = []
        self.held = held or []  # the judge's: each output of each call whole (``held_copies``)
        self.copies: TakenCopies | None = None
        self.taken: list[list[Taken]] = []  # what the judge took of each call's outputs in the last request
        self.originals: list[list[Any]] = []
        self.idle = idle or GpuIdle(ref.device)
        self._lent: list[Any] = []  # what backs the buffers lent to the worker (``shared_buffers.describe``)
        self._perf_counter = time.perf_counter

    def start(self, fields: dict[str, Any], specs: list[OutputSpec], sample_inputs: list[Any]) -> None:
        """Send the setup request (``fields`` plus the judge-owned buffers); the worker then waits for pings or load."""
        fds: list[int] = []
        device = self.ref.device
        if len(self.held) < self.batch:
            self.held = held_copies(specs, self.batch, device)
        self.copies = TakenCopies(specs, self.batch, device)
        entries: tuple[list[Any], list[Any]] = ([], [])
        for _ in range(self.batch):
            inputs = [shared_buffers.describe(v, device, fds, self._lent) for v in sample_inputs]
            outputs = [shared_buffers.describe(torch.empty(s.shape, dtype=s.dtype, device="meta"), device, fds,
                                               self._lent) for s in specs]
            self.inputs.append([b for b, _ in inputs])
            self.outputs.append([b for b, _ in outputs])
            entries[0].extend(e for _, e in inputs)
            entries[1].extend(e for _, e in outputs)
        self.worker.send(protocol.setup_request(**fields, inputs=entries[0], outputs=entries[1], fd_count=len(fds),
                                                batch=self.batch))
        try:
            if fds:
                self.worker.send_fds(fds)
        finally:
            for fd in fds:
                os.close(fd)

    def release(self) -> None:
        """Free the buffers lent to the worker, once the worker is closed and no process of it is left. While
        one is (it escaped the sandbox's kill), they are kept, a leak, rather than let it write into memory
        the judge allocates next."""
        self.inputs, self.outputs = [], []
        if self.worker.ended():
            shared_buffers.release(self._lent)
        elif self._lent:
            logger.warning("a process of a closed worker is still alive: its %d buffer(s) stay allocated",
                           len(self._lent))

    def calibrate(self, originals: list[list[Any]], enough: Callable[[list[float]], bool]) -> list[float]:
        """Pings along a timed call's exact path on the judge's side (its copies in and out, the round trip, the
        freeze and the wait for an idle GPU), before any submission code has run, until ``enough`` of their times
        (the judge's milliseconds): the judge's own overhead. The worker echoes a ping after one tiny kernel (the
        GPU's hand-over, which every call pays): it delivers nothing, so no answer can skip a cost subtracted for
        it."""
        pings: list[float] = []
        while not enough(pings):
            pings.append(self.observe(originals, Op.PING, sampled=True)[0])
        return pings

    def load(self) -> protocol.ReadyClaim:
        """Have the worker import the submission and construct ModelNew."""
        return self._exchange(Op.LOAD, protocol.ReadyClaim, "load", self.limits.load_s)

    def _exchange(self, op: str, claim_type: type[Any], stage: str, limit_s: float) -> Any:
        """One untimed request: wake the worker, ask, take its ``claim_type`` reply, freeze it again."""
        self.worker.thaw()
        self.worker.send(protocol.simple_request(op))
        claim = self.expect(claim_type, stage, limit_s)
        self.worker.freeze()
        return claim

    def observe(self, originals: list[list[Any]], op: str = Op.CALL, sampled: bool = False) -> tuple[float, Any]:
        """One request (or calibration ping) on ``originals``, one set of inputs per call: the whole batch, or
        fewer (forward runs on the first ``len(originals)`` sets, and the judge takes only their outputs). The
        outputs are taken whole into ``held``, or, ``sampled`` (a timed request), into this session's own
        ``TakenCopies``: at fresh secret positions when large. (The judge's milliseconds for the whole request,
        the worker's reply.)"""
        for outputs in self.outputs:
            poison(outputs)
        positions = self.copies.draw_positions() if sampled else None
        self._synchronize()
        nonce = secrets.randbits(63)
        self.worker.thaw()  # before the clock: it cannot see this call's inputs until they are copied in
        start = self._perf_counter()
        self._load_inputs(originals)
        self.worker.send(protocol.nonce_request(op, nonce, calls=len(originals) if op == Op.CALL else None))
        if op == Op.CALL:
            self.calls += 1
            limit = self.limits.request_s(len(originals), first=self.calls == 1)
            claim = self.expect(protocol.CalledClaim, "forward", limit, spin=True)
        else:
            limit = self.limits.load_s
            claim = self.expect(protocol.PongClaim, "ping", limit, spin=True)
        self._take_outputs(len(originals), positions)
        self._synchronize()
        self.worker.freeze()  # what it writes from now on never reaches the judge's copy
        self._wait_until_idle(limit)
        elapsed_ms = (self._perf_counter() - start) * 1e3
        if claim.nonce != nonce:
            raise Stop(Finding.PROTOCOL_VIOLATION, f"protocol violation: a reply to a call it was not sent "
                                                   f"(nonce {claim.nonce}, expected {nonce})")
        self.worker.watch()
        return elapsed_ms, claim

    def _take_outputs(self, calls: int, positions: list[torch.Tensor | None] | None) -> None:
        """Copy each output of the first ``calls`` sets into the judge's memory: into ``held`` whole (no
        ``positions``), else into this session's room, whole when small, else its elements at ``positions`` (a
        gather of a few MB in place of a copy of gigabytes)."""
        self.taken = []
        for k in range(calls):
            taken = []
            for i, shared in enumerate(self.outputs[k]):
                where = positions[i] if positions is not None else None
                if positions is None:
                    taken.append(Taken(self.held[k][i].copy_(shared)))
                elif where is None:
                    taken.append(Taken(self.copies.room[k][i].view(shared.shape).copy_(shared)))
                else:
                    torch.index_select(shared.reshape(-1), 0, where, out=self.copies.room[k][i])
                    taken.append(Taken(self.copies.room[k][i], where))
            self.taken.append(taken)

    def _wait_until_idle(self, limit_s: float) -> None:
        """Wait until no work the worker queued on the GPU is left; work still queued past ``limit_s`` ends it."""
        if not self.idle.wait(limit_s):
            raise Stop(Finding.WORKER_TIMED_OUT, f"work it left queued on the GPU after its reply was still running "
                                                 f"{limit_s:g} s later")

    def _load_inputs(self, originals: list[list[Any]]) -> None:
        self.originals = originals
        for shared_set, original_set in zip(self.inputs, originals):
            for shared, original in zip(shared_set, original_set):
                if isinstance(shared, torch.Tensor):
                    shared.copy_(original)
        self._synchronize()

    def _synchronize(self) -> None:
        if self.ref.device == "cuda":
            torch.cuda.synchronize()

    def profile(self) -> protocol.ProfiledClaim:
        return self._exchange(Op.PROFILE, protocol.ProfiledClaim, "profile", self.limits.first_call_s)

    def expect(self, claim_type: type[Any], stage: str, limit_s: float, spin: bool = False) -> Any:
        """The next reply within ``limit_s``, if it is a ``claim_type``; else ``Stop`` with what it was. ``spin``
        (a timed request on a GPU): the judge waits for it without sleeping."""
        try:
            claim = self.worker.receive(limit_s, stage, spin=spin and self.ref.device == "cuda")
        except protocol.ProtocolViolation as violation:
            raise Stop(Finding.PROTOCOL_VIOLATION, f"protocol violation {violation}") from None
        if isinstance(claim, protocol.ErrorClaim):
            raise Stop(finding_of_claimed_error(claim.kind), _error_reason(claim), {"error": error_record(claim)})
        if not isinstance(claim, claim_type):
            raise Stop(Finding.PROTOCOL_VIOLATION,
                       f"protocol violation during stage '{stage}': expected '{claim_type.OP}', got '{claim.OP}'")
        return claim

    def check_delivery(self, claim: protocol.CalledClaim, specs: list[OutputSpec]) -> None:
        """Reject outputs of the wrong form, mutated inputs and unwritten buffers."""
        if not claim.delivered:
            expected = [[list(s.shape), str(s.dtype)] for s in specs]
            got = list(zip(claim.shapes, claim.dtypes, claim.types))
            raise Stop(Finding.WRONG_FORM, f"output has the wrong form: got (shape, dtype, type) {got}, "
                                           f"expected (shape, dtype) {expected}", {"output_form": got})
        subclass = [t for t in claim.types if t not in PLAIN_TENSOR_TYPES]
        if subclass:
            raise Stop(Finding.WRONG_FORM, f"output is a tensor subclass {subclass}; a plain torch.Tensor is required")
        mutated = sorted({i for shared_set, original_set in zip(self.inputs, self.originals)
                          for i, (s, o) in enumerate(zip(shared_set, original_set))
                          if isinstance(s, torch.Tensor) and not tensors_equal(s, o)})
        if mutated:
            raise Stop(Finding.MUTATED_INPUTS, f"forward modified its input(s) {mutated} in place")


def error_record(claim: protocol.ErrorClaim) -> dict[str, Any]:
    """The worker's claimed error as the row's ``error`` record (every field of it the worker's claim)."""
    return {"op": claim.OP, "kind": claim.kind, "stage": claim.stage, "type": claim.type, "message": claim.message,
            "traceback": [vars(frame).copy() for frame in claim.traceback]}


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
