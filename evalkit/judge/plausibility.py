"""Trusted side: is a result physically possible, and is the work really the submission's own? Pure functions.

Floors: a problem's ``flops`` and ``min_bytes`` (problem.toml) over the device's peak rate and memory
bandwidth. Peaks are deliberately generous (dense fp16/bf16 tensor-core rate), so only results faster
than any kernel could be are flagged.
"""

from __future__ import annotations

import re
from typing import Any

# (peak FLOP/s, memory bandwidth B/s); matched against torch.cuda.get_device_name() in order.
DEVICE_PEAKS: tuple[tuple[str, float, float], ...] = (
    ("H200", 989e12, 4.8e12),
    ("H100", 989e12, 3.35e12),
    ("A100", 312e12, 2.0e12),
    ("L40S", 362e12, 0.864e12),
    ("RTX 4090", 330e12, 1.0e12),
)

# Kernels PyTorch, cuDNN, cuBLAS, CUTLASS or Triton launch; anything else came from the submission.
_LIBRARY_KERNEL = re.compile(
    r"at::native|at::cuda|cudnn|cublas|cutlass|xmma|gemm|gemv|implicit_convolve|convolve_|winograd|fft|"
    r"nchwToNhwc|nhwcToNchw|^Memcpy|^Memset|triton_|elementwise_kernel|reduce_kernel|cub::|"
    r"^sm\d+_|^ampere_|^volta_|^turing_|^hopper_|flash_fwd|kernel_?transform|CatArrayBatched|GroupNorm|"
    r"\bcunn_|im2col|col2im",
    re.IGNORECASE,
)
# Precision classes by relative L2 error against the float64 reference: float32 arithmetic lands far
# below FLOAT32_LEVEL; TF32 and fp16/bf16 operands with float32 accumulation below HALF_LEVEL.
FLOAT32_LEVEL_REL_L2 = 1e-5
HALF_LEVEL_REL_L2 = 3e-3
TIMES_PYTORCH_ERROR = 10  # reduced_precision: this many times PyTorch's own float32 error, or more


def device_peaks(device_name: str) -> tuple[float, float] | None:
    for pattern, flops, bandwidth in DEVICE_PEAKS:
        if pattern.lower() in device_name.lower():
            return flops, bandwidth
    return None


def floor_ms(flops: float | None, min_bytes: float | None, device_name: str) -> float | None:
    """The least time the problem can take on this device, or None when unknown."""
    peaks = device_peaks(device_name)
    if peaks is None or (not flops and not min_bytes):
        return None
    return max((flops or 0.0) / peaks[0], (min_bytes or 0.0) / peaks[1]) * 1e3


def custom_kernels(kernel_names: list[str]) -> list[str]:
    return [name for name in kernel_names if not _LIBRARY_KERNEL.search(name)]


def kernel_flags(kernel_names: list[str], uses_load_inline: bool) -> list[str]:
    """``no_custom_kernel`` when every launched kernel is a library's; ``fallback`` when the code builds
    kernels of its own but none of them ran."""
    if not kernel_names or custom_kernels(kernel_names):
        return []
    return ["fallback", "no_custom_kernel"] if uses_load_inline else ["no_custom_kernel"]


def precision_class(rel_l2_err: float) -> str:
    """``float32``, ``tf32_or_half`` (TF32, or fp16/bf16 operands) or ``lower``, from the error vs float64."""
    if rel_l2_err <= FLOAT32_LEVEL_REL_L2:
        return "float32"
    return "tf32_or_half" if rel_l2_err <= HALF_LEVEL_REL_L2 else "lower"


def reduced_precision(correctness: dict[str, Any]) -> bool:
    """True when the error is far above PyTorch's own float32 error on the same inputs (and above float32's
    level): fp16 where PyTorch computes in float32 is flagged; TF32 where PyTorch itself uses TF32 is not."""
    own = correctness.get("rel_l2_err") or 0.0
    pytorch = (correctness.get("pytorch_float32") or {}).get("rel_l2_err") or 0.0
    return own > max(TIMES_PYTORCH_ERROR * pytorch, FLOAT32_LEVEL_REL_L2)
