"""Trusted side: a problem as the judge holds it: reference models, fresh inputs, high-precision outputs.

Lives only in the judge process; never sees submission code.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import logging
import math
import threading
import time
from dataclasses import dataclass
from typing import Any, Iterator

import torch

from evalkit.judge.timing import L2Flusher, measure, timing_stats
from evalkit.sandbox.clock import Clock
from evalkit.sources.problems import Problem
from evalkit.sources.settings import PRECISION_DTYPES

logger = logging.getLogger(__name__)

EAGER_CALLS = 3  # calls of the eager reference timed for its time limits (after one warm-up)
# Held around each use of a reference and the reading of what it returned: a judge that overlaps answers
# (``schedule.overlap``) runs one answer's checks beside the next one's correctness trials, in two threads. Process-wide,
# as what it guards is: torch's default generators, which every reference's ``make_inputs`` seeds, and the buffers a
# sandboxed reference rewrites at its next request (``expected_read_at_once``). Re-entrant: a holder may use it again.
REFERENCE_TURN = threading.RLock()


def input_seed(secret: int, call: int) -> int:
    """The input seed of call ``call`` under ``secret``: a keyed hash (BLAKE2b), 63 bits. Seeds of different calls
    are independent: torch's CPU generator keeps only a seed's low 32 bits, and those can be recovered from one
    call's inputs, but no call's seed, even whole, tells anything of another call's without ``secret``; the
    judge writes ``secret`` into the row once the worker is gone, so a run's inputs can be drawn again."""
    digest = hashlib.blake2b(call.to_bytes(8, "little", signed=True), digest_size=8,
                             key=(secret % 2**64).to_bytes(8, "little")).digest()
    return int.from_bytes(digest, "little") >> 1


def flatten_output(output: Any) -> list[torch.Tensor]:
    outputs = list(output) if isinstance(output, (tuple, list)) else [output]
    if not all(isinstance(o, torch.Tensor) for o in outputs):
        raise TypeError(f"reference output must be a tensor or a tuple of tensors, got {type(output).__name__}")
    return outputs


@contextlib.contextmanager
def tf32_disabled() -> Iterator[None]:
    saved = (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32)
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


@contextlib.contextmanager
def cudnn_enabled(enabled: bool) -> Iterator[None]:
    saved = torch.backends.cudnn.enabled
    torch.backends.cudnn.enabled = enabled
    try:
        yield
    finally:
        torch.backends.cudnn.enabled = saved


def to_double(values: list[Any]) -> list[Any]:
    return [v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v for v in values]


@dataclass
class OutputSpec:
    shape: tuple[int, ...]
    dtype: torch.dtype


def precision_dtype(precision: str) -> torch.dtype:
    """The dtype of precision ``precision`` (``"bf16"``: ``torch.bfloat16``; ``sources.settings.PRECISIONS``)."""
    return getattr(torch, PRECISION_DTYPES[precision])


def in_precision(values: list[Any], dtype: torch.dtype) -> list[Any]:
    """``values`` with every floating tensor cast to ``dtype`` (an fp32 problem's are left as they are)."""
    if dtype == torch.float32:
        return values
    return [v.to(dtype) if isinstance(v, torch.Tensor) and v.is_floating_point() else v for v in values]


class ReferenceProblem:
    """A problem loaded for judging on one device, with its weights fixed by ``init_seed``, in ``precision``:
    its weights and inputs cast to that dtype, what answers get and PyTorch's own result is computed in, while the
    float64 oracle computes on those same cast values.

    This one runs the reference in this process: a problem from a folder, trusted problem code. A problem given as
    text is untrusted, and the judge holds it as ``sandboxed_reference.SandboxedReference``, the same interface
    (``problem``, ``device``, ``init_seed``, ``dtype``, ``precision``, ``init_inputs``, ``state_dict``, ``n_inputs``,
    ``make_inputs``, ``expected``, ``pytorch_own``, ``output_specs``, ``pick_float64_backend``, ``eager_ms``,
    ``close``) answered by a sandboxed worker."""

    def __init__(self, problem: Problem, device: str, init_seed: int, precision: str = "fp32") -> None:
        self.problem, self.device, self.init_seed = problem, device, init_seed
        self.dtype = precision_dtype(precision)
        self.module = problem.load_module()
        self.init_inputs = list(self.module.get_init_inputs())
        torch.manual_seed(init_seed)
        model = self.module.Model(*self.init_inputs)
        if self.dtype != torch.float32:
            model = model.to(self.dtype)
        self.state_dict = {k: v.detach().clone() for k, v in model.state_dict().items()}
        self.model = model.to(device).eval()
        self.precision = "float64"  # the oracle's (``expected``)
        self._model64: torch.nn.Module | None = copy.deepcopy(self.model).double()
        self.float64_cudnn = True  # whether the float64 reference uses cuDNN (``pick_float64_backend``)
        self.n_inputs = len(self.make_inputs(0))

    def make_inputs(self, seed: int) -> list[Any]:
        """Fresh inputs from the problem's ``get_inputs()``, drawn on the judge's device under ``seed``. Only the
        generators a draw can use are seeded: ``torch.manual_seed`` also queues a call, with its stack formatted,
        for every backend not started (MTIA, XPU), 1.5 ms and a little memory per call for the life of the judge."""
        with REFERENCE_TURN, torch.device(self.device):
            torch.random.default_generator.manual_seed(seed)
            if self.device == "cuda":
                torch.cuda.default_generators[torch.cuda.current_device()].manual_seed(seed)
            values = list(self.module.get_inputs())
        return in_precision([v.to(self.device) if isinstance(v, torch.Tensor) else v for v in values], self.dtype)

    def expected(self, inputs: list[Any]) -> list[torch.Tensor]:
        """The reference in float64 (float32 with TF32 off where an op has no float64 kernel)."""
        with torch.no_grad():
            if self._model64 is not None:
                try:
                    with cudnn_enabled(self.float64_cudnn):
                        return flatten_output(self._model64(*to_double(inputs)))
                except (RuntimeError, NotImplementedError) as err:
                    logger.warning("%s: no float64 reference (%s); using float32 with TF32 off",
                                   self.problem.id, err)
                    self._model64, self.precision = None, "float32_no_tf32"
            with tf32_disabled():
                return flatten_output(self.model(*inputs))

    def expected_read_at_once(self, inputs: list[Any]) -> list[torch.Tensor]:
        """``expected(inputs)`` for a caller that reads it before its next request to this reference: a reference in
        a sandbox returns the buffers its worker wrote (frozen until then) rather than a copy of each. On the H200
        that copy was a second 16 GiB float64 output per trial of conv2d_square, in the judge's process."""
        return self.expected(inputs)

    def pick_float64_backend(self, inputs: list[Any]) -> None:
        """On CUDA, time the float64 reference on ``inputs`` with cuDNN and with PyTorch's own kernels (im2col and
        cuBLAS), and keep the faster. Neither has tensor-core float64 convolutions everywhere: on the H200 a
        float64 ConvTranspose2d took 404 ms in cuDNN and 75 ms without, AlexNet's first conv 5.6 ms and 12 ms."""
        if self.device != "cuda":
            return
        seconds = {}
        for use_cudnn in (True, False):
            self.float64_cudnn = use_cudnn
            self.expected(inputs)  # a first call pays for picking algorithms and loading kernels
            torch.cuda.synchronize()
            start = time.perf_counter()
            self.expected(inputs)
            torch.cuda.synchronize()
            seconds[use_cudnn] = time.perf_counter() - start
        self.float64_cudnn = min(seconds, key=seconds.__getitem__)

    def pytorch_own(self, inputs: list[Any]) -> list[torch.Tensor]:
        """PyTorch's own result in the problem's precision with default settings (TF32 convolutions on CUDA)."""
        with torch.no_grad():
            return flatten_output(self.model(*inputs))

    def output_specs(self, outputs: list[torch.Tensor]) -> list[OutputSpec]:
        return [OutputSpec(tuple(o.shape), o.dtype) for o in outputs]

    def eager_ms(self, seed: int, calls: int = EAGER_CALLS) -> float:
        """The eager forward's median time per call on the device (``calls`` of them after a warm-up, each on fresh
        inputs after an L2 flush): it only sets time limits and sizes a request (``time_limits.reference_ms``)."""
        clock, flusher = Clock(self.device), L2Flusher(self.device)
        inputs: list[Any] = []

        def prepare(i: int) -> None:
            inputs[:] = self.make_inputs(input_seed(seed, i))
            flusher.flush()
            clock.synchronize()

        def timed_call(_: int) -> float:
            with torch.no_grad():
                return clock.time_ms(lambda: self.model(*inputs))[0]

        return timing_stats(measure(timed_call, prepare, warmup=1, trials=calls))["median_ms"]

    def lent_device_bytes(self) -> int:
        """Device memory this reference holds outside torch's allocator of the judge's process (none: its tensors
        are the judge's own)."""
        return 0

    def close(self) -> None:
        """Nothing to end here (a ``SandboxedReference`` ends its worker)."""


def values_bytes(values: list[Any]) -> int:
    """Bytes of the tensors (or meta tensors, or output specs) in ``values``."""
    total = 0
    for value in values:
        if isinstance(value, torch.Tensor):
            total += value.numel() * value.element_size()
        elif isinstance(value, OutputSpec):
            total += math.prod(value.shape) * torch.empty((), dtype=value.dtype).element_size()
    return total
