"""Trusted side: the comparison of a whole output that passes, in one pass over the GPU's memory.

``tensor_check`` compares an output against its float64 reference chunk by chunk with PyTorch's operations: about
ten passes over each chunk's memory, 103 ms for conv2d_square's 8.6 GB output on the H200, more than the float64
forward itself (39 ms: ``docs/gpu-runs/2026-12-02-float64-requests-h200/``). On CUDA, where Triton is installed (it
comes with PyTorch's CUDA wheels), one kernel reads each element once and gives a block's figures; a tensor whose
figures show any element outside the tolerance or not finite is compared the long way (``tensor_check``), which
finds and describes the wrong elements. The figures are those ``tensor_check._passing_chunk`` gives, summed in
another order (the square sums differ in their last bits).
"""

from __future__ import annotations

import importlib.util
import logging
import math
import sys
from functools import cache
from typing import Any

import torch

logger = logging.getLogger(__name__)

FUSED_MIN_ELEMENTS = 1 << 22  # below it, the few launches of PyTorch's operations cost as little
BLOCK_ELEMENTS = 4096
FIGURES = 6  # per block: max |a - e|, max(|a - e| - rtol |e|), max relative error, sum of squared errors,
#              sum of the reference's squares, count of elements not finite in either
FUSED_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def passing_figures(actual: torch.Tensor, expected: torch.Tensor, atol: float,
                    rtol: float) -> list[float] | None:
    """``[0, 0, max_abs, max_rel, sum_sq_err, sum_sq_ref]`` of two flat tensors whose elements are all finite and
    within ``|a - e| <= atol + rtol * |e|`` (``tensor_check._passing_chunk``'s figures, for the whole tensor); None
    when one is not, or where this pass does not apply (off CUDA, no Triton, small or unusual tensors): then the
    caller compares the long way."""
    if not (_applies(actual, expected) and _usable(actual.dtype, expected.dtype, expected.device)):
        return None
    figures = _block_figures(actual.contiguous(), expected.contiguous(), atol, rtol)
    max_abs, excess, max_rel = figures[:, :3].max(dim=0).values.tolist()
    sq_err, sq_ref, nonfinite = figures[:, 3:].sum(dim=0).tolist()
    if nonfinite or not (math.isfinite(max_abs) and math.isfinite(sq_ref) and excess <= atol):
        return None
    return [0.0, 0.0, max_abs, max_rel, sq_err, sq_ref]


def _block_figures(actual: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float) -> torch.Tensor:
    """Each block's ``FIGURES``, one row a block."""
    n = expected.numel()
    blocks = math.ceil(n / BLOCK_ELEMENTS)
    figures = torch.empty((blocks, FIGURES), dtype=torch.float64, device=expected.device)
    # float64 on the device: Triton would pass Python floats as float32
    bounds = torch.tensor([atol, rtol, sys.float_info.max], dtype=torch.float64, device=expected.device)
    _kernel()[(blocks,)](actual, expected, bounds, figures, n, BLOCK=BLOCK_ELEMENTS)
    return figures


@cache
def _usable(actual_dtype: torch.dtype, expected_dtype: torch.dtype, device: torch.device) -> bool:
    """Whether the kernel is there and compiles and runs right for these dtypes, tried once a process on a small
    pair: a Triton that fails here costs the comparison its speed, never an answer its verdict."""
    try:
        if _kernel() is None:
            return False
        expected = torch.tensor([0.0, 1.0, 3.0], dtype=expected_dtype, device=device)
        figures = _block_figures(torch.tensor([0.0, 1.0, 2.0], dtype=actual_dtype, device=device), expected, 0.0, 0.0)
        read = figures[0].tolist()
    except Exception as err:  # noqa: BLE001 - Triton's compiler or the driver: the long way, as without Triton
        logger.warning("the one-pass comparison does not run here (%s, %s): %s: %s", actual_dtype, expected_dtype,
                       type(err).__name__, err)
        return False
    if read != [1.0, 1.0, 1.0 / 3.0, 1.0, 10.0, 0.0]:
        logger.warning("the one-pass comparison read %s where [1, 1, 1/3, 1, 10, 0] is right (%s, %s): not used",
                       read, actual_dtype, expected_dtype)
        return False
    return True


def _applies(actual: torch.Tensor, expected: torch.Tensor) -> bool:
    return (expected.is_cuda and actual.device == expected.device and expected.numel() >= FUSED_MIN_ELEMENTS
            and actual.numel() == expected.numel() and actual.dtype in FUSED_DTYPES
            and expected.dtype in FUSED_DTYPES)


@cache
def _kernel() -> Any:
    """The Triton kernel, defined on first use (no import of Triton before); None without Triton."""
    if importlib.util.find_spec("triton") is None:
        logger.info("Triton is not installed: outputs are compared with PyTorch's operations")
        return None
    import triton  # type: ignore[import-not-found, unused-ignore]
    import triton.language as tl  # type: ignore[import-not-found, unused-ignore]

    @triton.jit
    def passing_block(a_ptr, e_ptr, bounds_ptr, out_ptr, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
        atol, rtol, largest = tl.load(bounds_ptr), tl.load(bounds_ptr + 1), tl.load(bounds_ptr + 2)
        block = tl.program_id(0)
        offsets = block.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        inside = offsets < n
        a = tl.load(a_ptr + offsets, mask=inside, other=0.0).to(tl.float64)
        e = tl.load(e_ptr + offsets, mask=inside, other=0.0).to(tl.float64)
        finite = (tl.abs(a) <= largest) & (tl.abs(e) <= largest)  # false for NaN and for infinities
        diff = tl.where(finite, tl.abs(a - e), 0.0)
        magnitude = tl.where(finite, tl.abs(e), 0.0)
        relative = tl.where(magnitude > atol, diff / tl.where(magnitude > atol, magnitude, 1.0), 0.0)
        row = out_ptr + block.to(tl.int64) * 6
        tl.store(row, tl.max(diff, axis=0))
        tl.store(row + 1, tl.max(diff - rtol * magnitude, axis=0))
        tl.store(row + 2, tl.max(relative, axis=0))
        tl.store(row + 3, tl.sum(diff * diff, axis=0))
        tl.store(row + 4, tl.sum(magnitude * magnitude, axis=0))
        tl.store(row + 5, tl.sum(tl.where(finite | ~inside, 0.0, 1.0), axis=0))

    return passing_block
