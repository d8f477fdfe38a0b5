"""Both sides of the trust boundary: every message between the judge and a worker, declared once.

Judge -> worker: ``SetupRequest`` then ``Request``s, pickled (the judge is trusted; tensors travel as CUDA IPC
handles or shared memory), each carrying ``REQUEST_VERSION``; the worker reads them only through
``read_request``, which refuses any other type or version, or a field of another type than declared
(``typed_fields``), before any submission code has run. Worker -> judge: one JSON object per message, at most
``MAX_REPLY_BYTES``, each one of the ``*Claim`` classes below. The judge reads a reply only through
``reply_reading.decode_reply``, which checks every field's type, range and size before anything else sees it, and
returns a claim: what the worker *says*. A worker runs the submission's code in its own interpreter, so
any claim may be a lie; the judge decides nothing from a claim that it can observe itself.

Only requests carry the version. A worker of another evalkit refuses the judge's first request, naming both
versions, and exits: that error is the one reply the judge reads from it. A version in every reply would be one
more field the submission's code could forge, checking nothing.

Standard library only (and ``typed_fields``, itself so): the worker imports this before any submission code runs.
"""

from __future__ import annotations

import dataclasses
import json
import re
import os
import pickle
from dataclasses import dataclass, field
from typing import Any, ClassVar

from evalkit.sandbox.typed_fields import wrong_field

MAX_REPLY_BYTES = 4 * 1024 * 1024
MAX_TEXT = 64 * 1024
MAX_NAME = 400
MAX_ITEMS = 200
MAX_FRAMES = 12
MAX_CALLS = 1024  # calls one request may make (``timing.MAX_BATCH`` is lower)
MAX_SEGMENTS = 64  # GPU allocations one reply may name
IPC_HANDLE_HEX = 128  # a CUDA IPC handle (64 bytes) as hex
# Created in the worker's folder once it has armed its parent-death signal, before it reads any request: from
# then on the judge may stop it (SIGSTOP) without risking a stopped orphan should the judge die.
ARMED_FILE = ".evalkit-armed"
PRELOAD_CUDA_VARIABLE = "EVALKIT_PRELOAD_CUDA"  # "1": a judge's worker starts CUDA while it waits for its answer
PRELOAD_PROFILER_VARIABLE = "EVALKIT_PRELOAD_PROFILER"  # "1": and the profiler too (a worker only profiles)
MAX_DIMS = 16


class Op:
    """The judge's requests."""

    SETUP = "setup"      # mode "build": import the submission, reply, end. Mode "judge": take the judge-owned
                         # input and output buffers, then answer pings until "load"
    LOAD = "load"        # import the submission and construct ModelNew
    CALL = "call"        # run forward on the first "calls" sets of bound inputs, one call after another, each
                         # timed by the worker's own events; keep every result where it is and say where
    PROFILE = "profile"  # run forward once under the profiler, name the kernels that ran
    PING = "ping"        # a call of the harness's own stand-in model (on a GPU, one tiny kernel a call) along the
                         # same path: sent before "load", so the judge measures its own and the harness's part of a
                         # request while nothing but the harness runs in the worker
    EXIT = "exit"        # stop


class ProtocolViolation(Exception):
    """The worker sent something the protocol does not allow: the submission's fault."""


# ---- judge -> worker -------------------------------------------------------------------------------

REQUEST_VERSION = 3  # bump when a request's fields change: a worker refuses any other version (2: ``dtype``; 3: the
# outputs stay in the worker's memory, ``outputs`` describes them, and a CPU worker hands the judge its memory)
MODES = ("build", "judge")
DTYPES = ("float32", "float16", "bfloat16")  # what a setup's ``dtype`` may name
NONCE_OPS = (Op.CALL, Op.PING)
PLAIN_OPS = (Op.LOAD, Op.PROFILE, Op.EXIT)


class RequestRefused(Exception):
    """Worker side: a request of another type or version than this worker's (two versions of evalkit)."""


@dataclass(frozen=True)
class SetupRequest:
    """The first request. ``init_inputs`` and ``state_dict`` travel pickled by value, never as shared memory;
    ``inputs`` are the judge's buffers (``shared_buffers``), one per input, each holding the ``batch`` calls' values
    stacked along a first dimension (an input that is no tensor comes by value), whose ``fd_count`` file descriptors
    follow the request on the socket; ``outputs`` the form of one call's outputs, one
    ``{"shape": [...], "dtype": "float32"}`` each. Each ``call`` runs forward once on each of its first ``calls``
    sets, in order, and keeps each result in the worker's own memory, where the judge reads it once the worker is
    frozen (``CalledClaim.places``). With ``memory`` (a judged worker on a CPU), the worker answers this request with
    a descriptor of its own memory (``/proc/self/mem``, opened before any submission code runs).
    ``extensions_dir`` and ``limits["run_as"]`` are the launcher's to fill (``completed``)."""

    op: ClassVar[str] = Op.SETUP
    mode: str
    code_path: str
    device: str
    limits: dict[str, Any]
    init_inputs: bytes
    init_seed: int
    n_inputs: int
    state_dict: bytes
    inputs: list[Any]
    outputs: list[Any]
    fd_count: int
    batch: int
    judge_pid: int
    dtype: str = "float32"  # the problem's precision as torch names its dtype: ModelNew is cast to it (not float32)
    memory: bool = False  # hand the judge a descriptor of the worker's own memory (``shared_buffers.send_own_memory``)
    extensions_dir: str = ""
    version: int = REQUEST_VERSION

    def completed(self, extensions_dir: str, run_as: Any) -> "SetupRequest":
        return dataclasses.replace(self, extensions_dir=extensions_dir, limits={**self.limits, "run_as": run_as})


@dataclass(frozen=True)
class Request:
    """Every request after the setup: ``load``, ``profile`` and ``exit`` carry nothing; ``call`` and ``ping`` a
    fresh secret ``nonce`` the reply must echo, so a reply sent before its request cannot match it; a ``call``
    also says on how many sets (the first ``calls``) forward runs. Nothing else: a call never says whether it is
    a warm-up, a check or timed."""

    op: str
    nonce: int | None = None
    calls: int | None = None
    version: int = REQUEST_VERSION


def setup_request(mode: str, code_path: str, device: str, limits: dict[str, Any], *, init_inputs: Any = None,
                  init_seed: int = 0, n_inputs: int = 0, state_dict: Any = None, inputs: list[Any] | None = None,
                  outputs: list[Any] | None = None, fd_count: int = 0, batch: int = 1,
                  dtype: str = "float32", memory: bool = False) -> SetupRequest:
    return SetupRequest(mode=mode, code_path=code_path, device=device, limits=limits,
                        init_inputs=pickle.dumps(init_inputs), init_seed=init_seed, n_inputs=n_inputs,
                        state_dict=pickle.dumps(state_dict), inputs=inputs or [], outputs=outputs or [],
                        fd_count=fd_count, batch=batch, judge_pid=os.getpid(), dtype=dtype, memory=memory)


def simple_request(op: str) -> Request:
    """``load``, ``profile`` or ``exit``."""
    return Request(op)


def nonce_request(op: str, nonce: int, calls: int | None = None) -> Request:
    """``call`` or ``ping`` (``Request``)."""
    return Request(op, nonce=nonce, calls=calls)


def read_request(message: object, setup: bool = False) -> SetupRequest | Request:
    """Worker side: ``message`` if it is a request this worker speaks (the setup when ``setup``, else a later
    one), with every field of the right kind; else ``RequestRefused`` saying what it got."""
    wanted = SetupRequest if setup else Request
    version = getattr(message, "version", None)
    if not isinstance(message, wanted):
        raise RequestRefused(f"expected a {wanted.__name__}, got {type(message).__name__}")
    if version != REQUEST_VERSION:
        raise RequestRefused(f"request version {version!r}, this worker speaks {REQUEST_VERSION}: the judge and "
                             f"its worker come from two versions of evalkit")
    wrong = wrong_field(message)
    if wrong is not None:
        raise RequestRefused(f"{wrong}: the judge sent a request its own declaration does not allow (a bug in "
                             f"evalkit)")
    if isinstance(message, SetupRequest):
        if message.mode not in MODES or message.batch < 1 or message.fd_count < 0 or message.dtype not in DTYPES:
            raise RequestRefused(f"setup with mode {message.mode!r}, batch {message.batch}, fds {message.fd_count}, "
                                 f"dtype {message.dtype!r}")
    elif message.op in NONCE_OPS:
        if not isinstance(message.nonce, int) or not (message.calls is None or message.calls >= 1):
            raise RequestRefused(f"{message.op} with nonce {message.nonce!r} and calls {message.calls!r}")
    elif message.op not in PLAIN_OPS:
        raise RequestRefused(f"unknown request {message.op!r}")
    return message


# ---- worker -> judge: the claims -------------------------------------------------------------------

@dataclass(frozen=True)
class Claim:
    """A reply from the worker: nothing in it is verified."""

    OP: ClassVar[str] = ""

    def encode(self) -> bytes:
        """The reply as the worker sends it."""
        return json.dumps({"op": self.OP, **dataclasses.asdict(self)}, default=str).encode()


@dataclass(frozen=True)
class FrameClaim:
    file: str
    line: int
    function: str
    in_submission: bool
    text: str


@dataclass(frozen=True)
class ErrorClaim(Claim):
    """The worker says the submission failed; ``kind`` is its own guess of which kind of failure."""

    OP: ClassVar[str] = "error"
    KINDS: ClassVar[tuple[str, ...]] = ("compile_error", "interface_error", "runtime_error")
    kind: str
    stage: str
    message: str
    type: str = ""
    traceback: list[FrameClaim] = field(default_factory=list)


@dataclass(frozen=True)
class ReadyClaim(Claim):
    """ModelNew was constructed; ``weights`` says how its parameters were set."""

    OP: ClassVar[str] = "ready"
    WEIGHTS: ClassVar[tuple[str, ...]] = ("state_dict", "seeded")
    weights: str
    landlock: int
    privileges: str = ""


@dataclass(frozen=True)
class BuiltClaim(Claim):
    OP: ClassVar[str] = "built"
    landlock: int
    privileges: str = ""


@dataclass(frozen=True)
class PlaceClaim:
    """Where one output of one call lies in the worker's memory: on a GPU, ``offset`` bytes into the allocation
    ``segment`` (an index into the reply's ``segments``); on a CPU (``segment`` -1), at the address ``offset``.
    ``strides`` in elements, as torch gives them. On the wire, ``[segment, offset, strides]``: a reply names one a
    call, hundreds of them, and encoding each as an object cost the worker 44 us a call."""

    segment: int
    offset: int
    strides: list[int]

    def wire(self) -> list[Any]:
        return [self.segment, self.offset, self.strides]


@dataclass(frozen=True)
class SegmentClaim:
    """One GPU allocation of the worker's that outputs lie in: its CUDA IPC handle (hex) and its size in bytes."""

    handle: str
    nbytes: int


@dataclass(frozen=True)
class CalledClaim(Claim):
    """A request's calls: whether every output had the setup's form (``formed``; ``types``, ``shapes`` and
    ``dtypes`` describe the first call's that did not, else the last's), where each call's outputs lie
    (``places``, one list per call; the worker keeps them there until its next request), and the worker's own
    time of each forward alone (``call_ms``: recorded as a claim; only a worker that runs no submission code, a
    baseline's, is believed, for the judge's own part of a request: ``window``)."""

    OP: ClassVar[str] = "called"
    nonce: int
    formed: bool
    types: list[str]
    shapes: list[list[int] | None]
    dtypes: list[str | None]
    call_ms: list[float] = field(default_factory=list)
    places: list[list[PlaceClaim]] = field(default_factory=list)
    segments: list[SegmentClaim] = field(default_factory=list)

    def encode(self) -> bytes:
        return encode_called(self.nonce, self.formed, {"types": self.types, "shapes": self.shapes,
                                                       "dtypes": self.dtypes}, self.call_ms,
                             [[p.wire() for p in call] for call in self.places], self.segments)


def encode_called(nonce: int, formed: bool, form: dict[str, Any], call_ms: list[float], places: list[list[Any]],
                  segments: list[SegmentClaim]) -> bytes:
    """A ``called`` reply as the worker sends it, its places already in their wire form (``PlaceClaim.wire``)."""
    return json.dumps({"op": CalledClaim.OP, "nonce": nonce, "formed": formed, **form, "call_ms": call_ms,
                       "places": places, "segments": [vars(s) for s in segments]}).encode()


@dataclass(frozen=True)
class ProfiledClaim(Claim):
    """The device kernels one call launched, each with its device time, and the operators it called; on a CPU, in
    ``kernels``, the functions of native code the answer built that the call ran (``module.function``, no times)."""

    OP: ClassVar[str] = "profiled"
    kernels: list[str]
    aten_ops: list[str]
    kernel_us: list[float] = field(default_factory=list)  # device microseconds, one per entry of ``kernels``


@dataclass(frozen=True)
class PongClaim(Claim):
    """A ping's calls of the harness's stand-in model, each timed by the worker's own clock (``call_ms``)."""

    OP: ClassVar[str] = "pong"
    nonce: int
    call_ms: list[float] = field(default_factory=list)


CLAIMS: dict[str, type[Claim]] = {c.OP: c for c in (ErrorClaim, ReadyClaim, BuiltClaim, CalledClaim,
                                                     ProfiledClaim, PongClaim)}


def reply_object(raw: bytes) -> dict[str, Any]:
    """The JSON object of one reply (of any worker's protocol), or ``ProtocolViolation`` saying what is wrong."""
    if len(raw) > MAX_REPLY_BYTES:
        raise ProtocolViolation(f"a reply of {len(raw)} bytes is over the {MAX_REPLY_BYTES}-byte limit")
    try:
        message = json.loads(raw)
    except RecursionError:
        raise ProtocolViolation("a reply nested too deeply to read") from None
    except ValueError as err:
        raise ProtocolViolation(f"a reply that is not JSON ({str(err)[:100]})") from None
    if not isinstance(message, dict):
        raise ProtocolViolation(f"a reply that is a JSON {type(message).__name__}, not an object")
    return message


_UNSAFE = re.compile("[\ud800-\udfff\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def safe_text(text: str, limit: int = MAX_TEXT) -> str:
    """``text`` as the judge may store and print it: at most ``limit`` characters, lone surrogates (which no UTF-8
    file can hold: one in a reply stopped the results writer) and control characters other than tab and newline
    each replaced by U+FFFD."""
    return _UNSAFE.sub("\ufffd", text[:limit])
