"""Trusted side: is a result physically possible, is it as precise as PyTorch's, and is the work really the
submission's own? Pure functions.

Floors: a problem's ``flops`` and ``min_bytes`` (problem.toml) over the device's peak rate and memory
bandwidth. Peaks are deliberately generous (dense fp16/bf16 tensor-core rate), so only results faster
than any kernel could be are flagged.
"""

from __future__ import annotations

import re

import torch

from evalkit.judge.kernel_origin import OwnKernels
from evalkit.row_parts import CorrectnessRecord

# (peak FLOP/s, memory bandwidth B/s); matched against torch.cuda.get_device_name() in order.
DEVICE_PEAKS: tuple[tuple[str, float, float], ...] = (
    ("H200", 989e12, 4.8e12),
    ("H100", 989e12, 3.35e12),
    ("A100", 312e12, 2.0e12),
    ("L40S", 362e12, 0.864e12),
    ("RTX 4090", 330e12, 1.0e12),
)

# Kernels PyTorch, cuDNN, cuBLAS, CUTLASS or Inductor (``triton_``) launch, by name: for kernels the answer's sources
# do not define (``kernel_origin``); one they define is the answer's whatever its name.
_LIBRARY_KERNEL = re.compile(
    r"at::native|at::cuda|cudnn|cublas|cutlass|xmma|gemm|gemv|implicit_convolve|convolve_|winograd|fft|"
    r"nchwToNhwc|nhwcToNchw|^Memcpy|^Memset|triton_|elementwise_kernel|reduce_kernel|cub::|"
    r"^sm\d+_|^ampere_|^volta_|^turing_|^hopper_|flash_fwd|kernel_?transform|CatArrayBatched|GroupNorm|"
    r"\bcunn_|im2col|col2im|^nvjet_",
    re.IGNORECASE,
)
# Precision classes by relative L2 error against the float64 reference: float32 arithmetic lands far
# below FLOAT32_LEVEL; TF32 and fp16/bf16 operands with float32 accumulation below HALF_LEVEL.
FLOAT32_LEVEL_REL_L2 = 1e-5
HALF_LEVEL_REL_L2 = 3e-3
LIBRARY_SHARE = 0.5  # library_dominated: library kernels took more than this share of the device time
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


def custom_kernels(kernel_names: list[str], own: OwnKernels | None = None) -> list[str]:
    """The kernels that are the answer's own: those its sources define (``own``: by origin, whatever their name),
    and, of the rest, those whose name is no library's (a language ``kernel_origin`` cannot read yet)."""
    defined = own.defines if own is not None else (lambda name: False)
    return [name for name in kernel_names if defined(name) or not _LIBRARY_KERNEL.search(name)]


def kernel_shares(kernel_names: list[str], kernel_us: list[float], own_kernels: OwnKernels | None = None
                  ) -> CorrectnessRecord:
    """The submission's own kernels and the share of the call's device time they took (None when unknown)."""
    own = custom_kernels(kernel_names, own_kernels)
    shares = CorrectnessRecord(custom_kernels=own[:50], custom_time_share=None)
    if kernel_us and len(kernel_us) == len(kernel_names) and sum(kernel_us) > 0:
        mine = sum(us for name, us in zip(kernel_names, kernel_us) if name in set(own))
        shares["custom_time_share"] = mine / sum(kernel_us)
        shares["kernel_us"] = dict(list(zip(kernel_names, kernel_us))[:50])
    return shares


def kernel_flags(kernel_names: list[str], uses_load_inline: bool, custom_time_share: float | None = None,
                 own: OwnKernels | None = None) -> list[str]:
    """``no_custom_kernel`` when every launched kernel is a library's; ``fallback`` when the code builds
    kernels of its own but none of them ran; ``library_dominated`` when its own kernels ran but library
    kernels took most of the device time (over ``LIBRARY_SHARE``). ``own``: the kernels the answer's sources
    define (``kernel_origin.own_kernels``)."""
    if not kernel_names:
        return []
    if not custom_kernels(kernel_names, own):
        return no_custom_kernel(uses_load_inline)
    if custom_time_share is not None and 1.0 - custom_time_share > LIBRARY_SHARE:
        return ["library_dominated"]
    return []


def no_custom_kernel(uses_load_inline: bool) -> list[str]:
    """The flags of an answer none of whose own kernels ran: ``fallback`` too when its code builds some."""
    return ["fallback", "no_custom_kernel"] if uses_load_inline else ["no_custom_kernel"]


def precision_class(rel_l2_err: float) -> str:
    """``float32``, ``tf32_or_half`` (TF32, or fp16/bf16 operands) or ``lower``, from the error vs float64."""
    if rel_l2_err <= FLOAT32_LEVEL_REL_L2:
        return "float32"
    return "tf32_or_half" if rel_l2_err <= HALF_LEVEL_REL_L2 else "lower"


def reduced_precision(correctness: CorrectnessRecord) -> bool:
    """True when the error is far above PyTorch's own error on the same inputs in the problem's precision (and above
    float32's level), or when float32 outputs were stored in a 16-bit format (``half_storage``): fp16 is flagged
    even where PyTorch itself computes in TF32, whose 10-bit operands give a similar error; TF32 is not. In a bf16
    problem, PyTorch's own error is bf16's, so only an answer far less precise than bf16 arithmetic is flagged."""
    own = correctness.get("rel_l2_err") or 0.0
    pytorch_own = correctness.get("pytorch_own")
    pytorch = (pytorch_own.get("rel_l2_err") if pytorch_own else None) or 0.0
    return own > max(TIMES_PYTORCH_ERROR * pytorch, FLOAT32_LEVEL_REL_L2) or bool(correctness.get("stored_as"))


HALF_STORAGE_SHARE = 0.99  # of an output's nonzero elements exactly representable in the 16-bit format
HALF_STORAGE_MIN_ELEMENTS = 256
HALF_STORAGE_SAMPLE = 1 << 22  # elements looked at, evenly strided: a share needs no more, and a full boolean
# index of a 2e9-element output would need an index tensor of 64 GiB


def half_storage(outputs: list[torch.Tensor], expected: list[torch.Tensor]) -> str | None:
    """``"float16"`` or ``"bfloat16"`` when float32 outputs carry no more bits than that format (a value of
    float32 arithmetic lands on a 16-bit value once in 2**13 or more), unless the true outputs do too (an
    integer-valued output, say). None otherwise."""
    for dtype in (torch.bfloat16, torch.float16):  # narrowest first: a bfloat16 value is often a float16 one
        if all(_representable_share(out, dtype) >= HALF_STORAGE_SHARE and
               _representable_share(exp, dtype) < HALF_STORAGE_SHARE
               for out, exp in zip(outputs, expected) if out.dtype == torch.float32):
            if any(out.dtype == torch.float32 for out in outputs):
                return str(dtype).replace("torch.", "")
    return None


def _representable_share(values: torch.Tensor, dtype: torch.dtype) -> float:
    """The share of a strided sample of ``values``' nonzero finite elements, as float32, that ``dtype`` holds
    exactly."""
    flat = values.reshape(-1)
    sample = flat[::max(1, flat.numel() // HALF_STORAGE_SAMPLE)].float()
    nonzero = sample[(sample != 0) & torch.isfinite(sample)]
    if nonzero.numel() < HALF_STORAGE_MIN_ELEMENTS:
        return 0.0
    return (nonzero.to(dtype).float() == nonzero).float().mean().item()
