"""Both sides of the trust boundary: every message between the judge and a reference worker, declared once.

A problem given as text (``Problem.from_source``, ``reference_code`` over HTTP) is untrusted, its reference as
much as any answer: it runs in a sandboxed worker of its own (``evalkit.judge.reference_worker``),
never in the judge, which holds it as a ``evalkit.judge.sandboxed_reference.SandboxedReference``. The judge speaks
to that worker as to an answer's (``protocol``): requests go pickled (the judge is trusted), each carrying
``REFERENCE_VERSION``, and the worker reads them only through ``read_request``; replies are one JSON object each,
read only through ``decode_reply``, which refuses an unknown type, a field missing or of another type than
declared (``typed_fields``), an over-long text, or a shape or size out of range, before anything else sees it.

    judge -> worker   ReferenceSetup   (first) mode "check": import it, check it defines Model, get_inputs and
                                       get_init_inputs, and return its init inputs; mode "serve": also build the
                                       model (seeded, in the precision's dtype) on the device and describe its
                                       tensors: weights, inputs, PyTorch's own outputs and the float64 oracle's
                                       ReferenceBind    the judge's buffers for those tensors (file descriptors follow)
                      ReferenceRequest inputs (draw ``seed``'s into the input buffers) | own | expected (on the input
                                       buffers' contents, into the output buffers) | time (the eager forward) | exit
    worker -> judge   Failed | Checked | Loaded | Bound | Done

Values that are no tensors (init inputs, an input that is a number) travel as ``evalkit.sandbox.values`` JSON.
Standard library only (and ``typed_fields``, ``values``, ``protocol``'s text helpers): the worker imports this
before any reference code runs.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field
from typing import Any, ClassVar

from evalkit.sandbox.protocol import (MAX_DIMS, MAX_NAME, Claim, ProtocolViolation, RequestRefused, reply_object,
                                      safe_text)
from evalkit.sandbox.typed_fields import wrong_field
from evalkit.sandbox.values import TENSOR_DTYPES

REFERENCE_VERSION = 1  # bump when a message's fields change: a worker refuses any other version
WORKER_MODULE = "evalkit.judge.reference_worker"
MODES = ("check", "serve")
OPS = ("inputs", "own", "expected", "time", "exit")
PRECISION_NAMES = ("fp32", "fp16", "bf16")  # ``sources.settings.PRECISIONS``, which a worker does not import
ORACLE_PRECISIONS = ("float64", "float32_no_tf32")  # what the oracle computed in (``ReferenceProblem.precision``)
MAX_TENSORS = 4096  # weights of one model, or inputs, or outputs
MAX_MESSAGE = 16 * 1024  # a reference's error: its type, message and line
ALIGN_BYTES = 64  # every tensor of a buffer starts on such a boundary (any dtype may view it)


@dataclass(frozen=True)
class TensorSpec:
    """One tensor's form (``name``: its state_dict key, for weights)."""

    shape: list[int]
    dtype: str
    name: str = ""


# ---- judge -> worker --------------------------------------------------------------------------------

@dataclass(frozen=True)
class ReferenceSetup:
    """The first request: where the reference's file is (in the worker's folder), on which device and in which
    precision (``sources.settings.PRECISIONS``) to build it, the seed of its weights and of the inputs it
    describes itself by. ``limits["run_as"]`` is the launcher's to fill (``completed``)."""

    mode: str
    code_path: str
    device: str
    precision: str
    init_seed: int
    probe_seed: int
    limits: dict[str, Any]
    judge_pid: int
    version: int = REFERENCE_VERSION

    def completed(self, extensions_dir: str, run_as: Any) -> "ReferenceSetup":
        del extensions_dir  # a reference builds no extension
        return dataclasses.replace(self, limits={**self.limits, "run_as": run_as})


@dataclass(frozen=True)
class ReferenceBind:
    """The judge's buffers (``shared_buffers`` entries of flat byte buffers, tensors at ``layout`` offsets): the
    weights' (always in host memory), and on the device one set of inputs, PyTorch's own outputs and the
    oracle's; ``fd_count`` descriptors follow on the socket."""

    state: Any
    inputs: Any
    own: Any
    expected: Any
    fd_count: int
    version: int = REFERENCE_VERSION


@dataclass(frozen=True)
class ReferenceRequest:
    """``inputs``: draw the inputs of ``seed`` into the input buffers. ``own`` / ``expected``: run the model (in the
    problem's dtype / the float64 oracle) on the input buffers' contents, with ``values`` (``evalkit.sandbox.values``)
    at the inputs that are no tensors, into the output buffers. ``time``: the eager forward ``calls`` times on the
    inputs of ``seed``. ``exit``: stop."""

    op: str
    seed: int = 0
    calls: int = 0
    values: list[Any] = field(default_factory=list)
    version: int = REFERENCE_VERSION


def setup(mode: str, code_path: str, device: str, precision: str, init_seed: int, probe_seed: int,
          limits: dict[str, Any]) -> ReferenceSetup:
    return ReferenceSetup(mode=mode, code_path=code_path, device=device, precision=precision, init_seed=init_seed,
                          probe_seed=probe_seed, limits=limits, judge_pid=os.getpid())


def read_request(message: object, first: bool = False) -> ReferenceSetup | ReferenceBind | ReferenceRequest:
    """Worker side: ``message`` if it is a request this worker speaks (the setup when ``first``), every field of
    its declared type; else ``RequestRefused`` saying what it got."""
    wanted: tuple[type, ...] = (ReferenceSetup,) if first else (ReferenceBind, ReferenceRequest)
    if not isinstance(message, wanted):
        raise RequestRefused(f"expected {' or '.join(w.__name__ for w in wanted)}, got {type(message).__name__}")
    if message.version != REFERENCE_VERSION:
        raise RequestRefused(f"request version {message.version!r}, this worker speaks {REFERENCE_VERSION}: the "
                             f"judge and its reference worker come from two versions of evalkit")
    wrong = wrong_field(message)
    if wrong is not None or (isinstance(message, ReferenceSetup) and (
            message.mode not in MODES or message.precision not in PRECISION_NAMES)) or (
            isinstance(message, ReferenceRequest) and message.op not in OPS):
        raise RequestRefused(f"{wrong or message}: not a request this worker speaks (a bug in evalkit)")
    return message


# ---- worker -> judge: claims -------------------------------------------------------------------------

@dataclass(frozen=True)
class ReferenceClaim(Claim):
    """A reply from a reference worker (``encode``: as an answer's worker's): nothing in it is verified beyond its
    form."""


@dataclass(frozen=True)
class Failed(ReferenceClaim):
    """The reference failed at ``stage`` (import, interface, init_inputs, construct, inputs, forward, ...)."""

    OP: ClassVar[str] = "failed"
    stage: str
    message: str


@dataclass(frozen=True)
class Checked(ReferenceClaim):
    """It imports and defines what a reference must; ``init_inputs`` is its ``get_init_inputs()`` (values JSON)."""

    OP: ClassVar[str] = "checked"
    init_inputs: Any


@dataclass(frozen=True)
class Loaded(ReferenceClaim):
    """Built on the device: its weights (``state``, in state_dict order), one draw of its inputs (``inputs``: a spec
    for a tensor, else ``values`` holds the value at that position), PyTorch's own outputs and the oracle's."""

    OP: ClassVar[str] = "loaded"
    init_inputs: Any
    state: list[TensorSpec]
    inputs: list[TensorSpec | None]
    values: list[Any]
    own: list[TensorSpec]
    expected: list[TensorSpec]
    precision: str


@dataclass(frozen=True)
class Bound(ReferenceClaim):
    OP: ClassVar[str] = "bound"


@dataclass(frozen=True)
class Done(ReferenceClaim):
    """A request done: ``values`` at the inputs that are no tensors (``inputs``), the oracle's ``precision``
    (``expected``), the median eager ``ms`` by the worker's own clock (``time``: a claim, the judge bounds it)."""

    OP: ClassVar[str] = "done"
    request: str
    values: list[Any] = field(default_factory=list)
    precision: str = "float64"
    ms: float = 0.0


CLAIMS: dict[str, type[ReferenceClaim]] = {c.OP: c for c in (Failed, Checked, Loaded, Bound, Done)}


def decode_reply(raw: bytes) -> ReferenceClaim:
    """The claim in one reply, or ``ProtocolViolation`` saying what is wrong with it."""
    message = reply_object(raw)
    if message.get("op") not in CLAIMS:
        raise ProtocolViolation(f"a reply that is no reference claim ({repr(message)[:60]})")
    kind = CLAIMS[message.pop("op")]
    names = {f.name for f in dataclasses.fields(kind)}
    if set(message) - names:
        raise ProtocolViolation(f"a '{kind.OP}' reply with unknown fields {sorted(set(message) - names)[:5]}")
    try:
        claim = kind(**{key: _specs(key, value) for key, value in message.items()})
    except TypeError as err:
        raise ProtocolViolation(f"a '{kind.OP}' reply: {err}") from None
    wrong = wrong_field(claim)
    if wrong is not None:
        raise ProtocolViolation(f"a '{kind.OP}' reply: {wrong}")
    return _checked(claim)


def _specs(key: str, value: Any) -> Any:
    """The tensor specs of a ``Loaded`` reply as ``TensorSpec``s (their fields checked by ``wrong_field``)."""
    if key not in ("state", "inputs", "own", "expected") or not isinstance(value, list):
        return value
    if len(value) > MAX_TENSORS:
        raise ProtocolViolation(f"a reply describing {len(value)} tensors as {key} (at most {MAX_TENSORS})")
    specs = []
    for entry in value:
        if entry is None:
            specs.append(None)
        elif isinstance(entry, dict) and set(entry) <= {"shape", "dtype", "name"}:
            specs.append(TensorSpec(**entry))
        else:
            raise ProtocolViolation(f"a {key} entry {repr(entry)[:60]}")
    return specs


def _checked(claim: ReferenceClaim) -> ReferenceClaim:
    """Ranges the declaration cannot say: texts bounded and made safe, shapes and dtypes valid, times finite."""
    if isinstance(claim, Failed):
        return Failed(stage=safe_text(claim.stage, MAX_NAME), message=safe_text(claim.message, MAX_MESSAGE))
    if isinstance(claim, Loaded):
        if claim.precision not in ORACLE_PRECISIONS or len(claim.values) != len(claim.inputs):
            raise ProtocolViolation(f"a 'loaded' reply with precision {claim.precision!r} and {len(claim.values)} "
                                    f"values for {len(claim.inputs)} inputs")
        for spec in [*claim.state, *claim.inputs, *claim.own, *claim.expected]:
            if spec is not None:
                _check_spec(spec)
        if not claim.own or len(claim.own) != len(claim.expected):
            raise ProtocolViolation(f"a 'loaded' reply with {len(claim.own)} outputs and {len(claim.expected)} "
                                    f"oracle outputs")
    if isinstance(claim, Done) and (claim.precision not in ORACLE_PRECISIONS or not math.isfinite(claim.ms)
                                    or claim.ms < 0 or claim.request not in OPS):
        raise ProtocolViolation(f"a 'done' reply for {claim.request!r} with precision {claim.precision!r}, "
                                f"{claim.ms!r} ms")
    return claim


def _check_spec(spec: TensorSpec) -> None:
    if spec.dtype not in TENSOR_DTYPES or len(spec.shape) > MAX_DIMS or len(spec.name) > MAX_NAME \
            or any(n < 0 or n > 2**40 for n in spec.shape):
        raise ProtocolViolation(f"a tensor of shape {spec.shape[:MAX_DIMS + 1]} and dtype {spec.dtype[:40]!r}")


# ---- the buffers' layout, the same on both sides -----------------------------------------------------

def layout(specs: list[TensorSpec | None]) -> tuple[list[int], int]:
    """Each tensor's offset in one flat buffer (``ALIGN_BYTES`` apart at least), and the buffer's size in bytes;
    -1 for a position that holds no tensor."""
    offsets, end = [], 0
    for spec in specs:
        if spec is None:
            offsets.append(-1)
            continue
        offsets.append(end)
        end += math.ceil(spec_bytes(spec) / ALIGN_BYTES) * ALIGN_BYTES
    return offsets, end


def spec_bytes(spec: TensorSpec) -> int:
    return math.prod(spec.shape) * ELEMENT_BYTES[spec.dtype]


ELEMENT_BYTES = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4, "int16": 2,
                 "int8": 1, "uint8": 1, "bool": 1}


def views(flat: Any, specs: list[TensorSpec | None]) -> list[Any]:
    """Tensors over the flat byte buffer ``flat`` at ``layout``'s offsets (None where a position holds no tensor)."""
    import torch

    offsets, _ = layout(specs)
    tensors = []
    for spec, offset in zip(specs, offsets):
        if spec is None:
            tensors.append(None)
            continue
        size = spec_bytes(spec)
        tensors.append(flat[offset:offset + size].view(getattr(torch, spec.dtype)).reshape(spec.shape))
    return tensors
