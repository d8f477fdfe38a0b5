"""Both sides of the trust boundary: every message between the judge and a worker, declared once.

Judge -> worker: ``SetupRequest`` then ``Request``s, pickled (the judge is trusted; tensors travel as CUDA IPC
handles or shared memory), each carrying ``REQUEST_VERSION``; the worker reads them only through
``read_request``, which refuses any other type or version, or a field of another type than declared
(``typed_fields``), before any submission code has run. Worker -> judge: one JSON object per message, at most
``MAX_REPLY_BYTES``, each one of the ``*Claim`` classes below. The judge reads a reply only through
``decode_reply``, which checks every field's type, range and size before anything else sees it, and
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
import math
import os
import pickle
import re
from dataclasses import dataclass, field
from typing import Any, ClassVar

from evalkit.sandbox.typed_fields import wrong_field

MAX_REPLY_BYTES = 4 * 1024 * 1024
MAX_TEXT = 64 * 1024
MAX_NAME = 400
MAX_ITEMS = 200
MAX_FRAMES = 12
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
    CALL = "call"        # run forward on the first "calls" sets of bound inputs, copy each result into its
                         # output buffers
    PROFILE = "profile"  # run forward once under the profiler, name the kernels that ran
    PING = "ping"        # an echo (on a GPU, after one tiny kernel): sent before "load", so the judge calibrates
                         # its own part of a request while nothing but the harness runs in the worker; and to a
                         # baseline's worker within a timing window, never to an answer's once loaded
    EXIT = "exit"        # stop


class ProtocolViolation(Exception):
    """The worker sent something the protocol does not allow: the submission's fault."""


# ---- judge -> worker -------------------------------------------------------------------------------

REQUEST_VERSION = 2  # bump when a request's fields change: a worker refuses any other version (2: ``dtype``)
MODES = ("build", "judge")
DTYPES = ("float32", "float16", "bfloat16")  # what a setup's ``dtype`` may name
NONCE_OPS = (Op.CALL, Op.PING)
PLAIN_OPS = (Op.LOAD, Op.PROFILE, Op.EXIT)


class RequestRefused(Exception):
    """Worker side: a request of another type or version than this worker's (two versions of evalkit)."""


@dataclass(frozen=True)
class SetupRequest:
    """The first request. ``init_inputs`` and ``state_dict`` travel pickled by value, never as shared memory;
    ``inputs``/``outputs`` are the judge's buffers (``shared_buffers``), ``batch`` sets of each one after the
    other, whose ``fd_count`` file descriptors follow the request on the socket. Each ``call`` runs forward once
    on each of its first ``calls`` sets, in order, and copies each result into its set's output buffers.
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
                  dtype: str = "float32") -> SetupRequest:
    return SetupRequest(mode=mode, code_path=code_path, device=device, limits=limits,
                        init_inputs=pickle.dumps(init_inputs), init_seed=init_seed, n_inputs=n_inputs,
                        state_dict=pickle.dumps(state_dict), inputs=inputs or [], outputs=outputs or [],
                        fd_count=fd_count, batch=batch, judge_pid=os.getpid(), dtype=dtype)


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
class CalledClaim(Claim):
    """One forward call: the form of what it returned, whether it was copied, and the worker's own time
    (recorded as a claim, never used for a time: the judge times calls with its own clock)."""

    OP: ClassVar[str] = "called"
    nonce: int
    delivered: bool
    types: list[str]
    shapes: list[list[int] | None]
    dtypes: list[str | None]
    ms: float | None = None


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
    OP: ClassVar[str] = "pong"
    nonce: int


CLAIMS: dict[str, type[Claim]] = {c.OP: c for c in (ErrorClaim, ReadyClaim, BuiltClaim, CalledClaim,
                                                     ProfiledClaim, PongClaim)}


def decode_reply(raw: bytes) -> Claim:
    """The claim in one reply, or ``ProtocolViolation`` saying what is wrong with it."""
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
    op = message.get("op")
    if not isinstance(op, str) or op not in CLAIMS:
        raise ProtocolViolation(f"a reply with an unknown op {_show(op)}")
    return _READERS[op](message)


def _show(value: Any) -> str:
    return repr(value)[:60]


def _get(message: dict[str, Any], key: str, kind: type | tuple[type, ...], default: Any = dataclasses.MISSING) -> Any:
    if key not in message:
        if default is dataclasses.MISSING:
            raise ProtocolViolation(f"'{message['op']}' reply without '{key}'")
        return default
    value = message[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ProtocolViolation(f"'{message['op']}' reply with '{key}' = {_show(value)}")
    return value


_UNSAFE = re.compile("[\ud800-\udfff\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def safe_text(text: str, limit: int = MAX_TEXT) -> str:
    """``text`` as the judge may store and print it: at most ``limit`` characters, lone surrogates (which no UTF-8
    file can hold: one in a reply stopped the results writer) and control characters other than tab and newline
    each replaced by U+FFFD."""
    return _UNSAFE.sub("\ufffd", text[:limit])


def _text(message: dict[str, Any], key: str, limit: int = MAX_TEXT, default: Any = dataclasses.MISSING) -> str:
    return safe_text(str(_get(message, key, str, default)), limit)


def _choice(message: dict[str, Any], key: str, choices: tuple[str, ...]) -> str:
    value = _get(message, key, str)
    if value not in choices:
        raise ProtocolViolation(f"'{message['op']}' reply with '{key}' = {_show(value)}, not one of {choices}")
    return value


def _small_int(value: Any, what: str, low: int = 0, high: int = 2**62) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ProtocolViolation(f"{what} = {_show(value)}")
    return value


def _items(message: dict[str, Any], key: str) -> list[Any]:
    value = _get(message, key, list)
    if len(value) > MAX_ITEMS:
        raise ProtocolViolation(f"'{message['op']}' reply with {len(value)} '{key}' (at most {MAX_ITEMS})")
    return value


def _names(message: dict[str, Any], key: str, nullable: bool = False) -> list[Any]:
    names = _items(message, key)
    for name in names:
        if not (isinstance(name, str) or (nullable and name is None)):
            raise ProtocolViolation(f"'{message['op']}' reply with a '{key}' entry {_show(name)}")
    return [safe_text(n, MAX_NAME) if isinstance(n, str) else None for n in names]


def _shape(value: Any) -> list[int] | None:
    if value is None:
        return None
    if not isinstance(value, list) or len(value) > MAX_DIMS:
        raise ProtocolViolation(f"a shape {_show(value)}")
    return [_small_int(n, "a shape dimension") for n in value]


def _frame(value: Any) -> FrameClaim:
    if not isinstance(value, dict):
        raise ProtocolViolation(f"a traceback frame {_show(value)}")
    line = value.get("line")
    return FrameClaim(file=safe_text(str(value.get("file", "")), MAX_NAME),
                      line=_small_int(line, "a traceback line", high=10**7) if line is not None else 0,
                      function=safe_text(str(value.get("function", "")), MAX_NAME),
                      in_submission=value.get("in_submission") is True,
                      text=safe_text(str(value.get("text", "")), MAX_NAME))


def _error(m: dict[str, Any]) -> ErrorClaim:
    kind = m.get("kind")
    return ErrorClaim(kind=kind if kind in ErrorClaim.KINDS else "runtime_error", stage=_text(m, "stage", MAX_NAME),
                      message=_text(m, "message"), type=_text(m, "type", MAX_NAME, ""),
                      traceback=[_frame(f) for f in _items(m, "traceback")[-MAX_FRAMES:]] if "traceback" in m else [])


def _called(m: dict[str, Any]) -> CalledClaim:
    ms = _get(m, "ms", (int, float, type(None)), None)
    if ms is not None and (isinstance(ms, bool) or not math.isfinite(ms) or ms < 0):
        raise ProtocolViolation(f"'called' reply with a time of {_show(ms)} ms")
    shapes = [_shape(s) for s in _items(m, "shapes")]
    return CalledClaim(nonce=_nonce(m), delivered=_get(m, "delivered", bool), types=_names(m, "types"), shapes=shapes,
                       dtypes=_names(m, "dtypes", nullable=True), ms=None if ms is None else float(ms))


def _nonce(m: dict[str, Any]) -> int:
    return _small_int(m.get("nonce"), f"'{m['op']}' reply's nonce", high=2**64)


def _profiled(m: dict[str, Any]) -> ProfiledClaim:
    kernels = _names(m, "kernels")
    times = _items(m, "kernel_us") if "kernel_us" in m else []
    if times and (len(times) != len(kernels) or not all(
            isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t) and t >= 0 for t in times)):
        raise ProtocolViolation(f"'profiled' reply with kernel times {_show(times)}")
    return ProfiledClaim(kernels=kernels, aten_ops=_names(m, "aten_ops"), kernel_us=[float(t) for t in times])


_READERS: dict[str, Any] = {
    "error": _error,
    "ready": lambda m: ReadyClaim(weights=_choice(m, "weights", ReadyClaim.WEIGHTS),
                                  landlock=_small_int(m.get("landlock"), "the Landlock ABI", high=1000),
                                  privileges=_text(m, "privileges", MAX_NAME, "")),
    "built": lambda m: BuiltClaim(landlock=_small_int(m.get("landlock"), "the Landlock ABI", high=1000),
                                  privileges=_text(m, "privileges", MAX_NAME, "")),
    "called": _called,
    "profiled": _profiled,
    "pong": lambda m: PongClaim(nonce=_nonce(m)),
}
