"""Trusted side: a device judge's GPU memory: what its kept problems may hold, what the GPU has free, and handing
cached memory back, so that the answers' workers (other processes) find it."""

from __future__ import annotations

import gc

import torch

# Kept problems hold GPU memory the answers' workers may need: a share of the device's memory (split among the
# judges of one GPU), which a problem larger than it never shares with another.
KEPT_PROBLEMS_MEMORY_SHARE = 0.25
# A problem given as text keeps more than the judge's tensors: the buffers lent to its reference's worker and that
# worker's own memory, neither of them the judge's allocations. So a new problem is also made room for while the
# GPU has less than this share free, whoever holds it: five kept problems of the shipped set (their references
# sandboxed) ran the H200 out of memory (docs/gpu-runs/2026-11-29-rl-throughput-h200).
FREE_MEMORY_FLOOR_SHARE = 0.35


def kept_memory_share(gpu_judges: int) -> float:
    """The share of its GPU's memory a judge's kept problems may hold, with ``gpu_judges`` judges on that GPU."""
    return KEPT_PROBLEMS_MEMORY_SHARE / max(1, gpu_judges)


def held_share(device: str, lent_bytes: int) -> float:
    """The share of the GPU's memory this process's tensors hold, plus ``lent_bytes`` it allocated outside torch's
    allocator (0 on CPU)."""
    if device != "cuda" or not torch.cuda.is_initialized():
        return 0.0
    total = torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory
    return (torch.cuda.memory_allocated() + lent_bytes) / total


def free_share(device: str) -> float:
    """The share of the GPU's memory free, whoever holds the rest (1 on CPU)."""
    if device != "cuda" or not torch.cuda.is_initialized():
        return 1.0
    free, total = torch.cuda.mem_get_info()
    return free / total


def out_of_memory(err: BaseException) -> bool:
    """The GPU ran out of memory, in the judge's process or in its sandboxed reference's."""
    return isinstance(err, torch.OutOfMemoryError) or "OutOfMemoryError" in str(err)


def release_cached_memory(device: str) -> None:
    """Hand the GPU memory torch's allocator keeps cached back to the device: the judge's workers are other
    processes, and a large problem's float64 reference leaves tens of GiB cached that they could not use."""
    if device == "cuda" and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def free_garbage(device: str) -> None:
    """Tensors held in reference cycles (a traceback's frames) go now, not at some later GC, and their memory
    back to the device."""
    gc.collect()
    release_cached_memory(device)
