"""Both sides: the judge-owned tensors a worker reads its inputs from and writes its outputs into.

On CPU they are anonymous memory (``memfd``), handed to exactly one worker as file descriptors over its
own socket: no file name exists that another sandbox could open, and nothing is left in ``/dev/shm``.
On CUDA they are memory the judge allocates itself and sends as CUDA IPC handles inside the (pickled) setup
request (``cuda_buffers``), freed by the judge once the worker is gone. Either way the worker receives them
before any submission code runs, and before it confines its own writes.
"""

from __future__ import annotations

import mmap
import os
import socket
from typing import Any

import torch

from evalkit.sandbox.cuda_buffers import LentMemory, open_lent

FDS_MESSAGE = b"F"


def describe(value: Any, device: str, fds: list[int], keep: list[Any]) -> Any:
    """A judge-owned buffer shaped like ``value`` (a tensor) and what the setup request carries for it.

    Returns (buffer, message entry). On CPU the entry names a file descriptor appended to ``fds``. What
    backs the buffer is appended to ``keep``: its mapping, or on CUDA its ``cuda_buffers.LentMemory``, which
    the owner frees (``release``) once the worker is gone.
    """
    if not isinstance(value, torch.Tensor):
        return value, value
    if device != "cpu":
        lent = LentMemory(tuple(value.shape), value.dtype)
        keep.append(lent)
        return lent.tensor, lent.entry
    buf, fd, mapped = anonymous_tensor(tuple(value.shape), value.dtype)
    fds.append(fd)
    keep.append(mapped)
    return buf, {"fd_index": len(fds) - 1, "shape": list(value.shape), "dtype": str(value.dtype).replace("torch.", "")}


def device_bytes(kept: list[Any]) -> int:
    """The device memory of what ``describe`` kept (its ``LentMemory``): the owner's, though no allocator of
    torch's counts it."""
    return sum(item.tensor.nbytes for item in kept if isinstance(item, LentMemory))


def release(kept: list[Any]) -> None:
    """Free what ``describe`` kept, once no worker can reach it any more (GPU memory at once; a mapping
    when its last tensor goes)."""
    for item in kept:
        if hasattr(item, "free"):
            item.free()
    kept.clear()


def anonymous_tensor(shape: tuple[int, ...], dtype: torch.dtype) -> tuple[torch.Tensor, int, mmap.mmap]:
    """A tensor in fresh anonymous shared memory: (tensor, memfd, its mapping)."""
    nbytes = _mapped_bytes(shape, dtype)
    fd = os.memfd_create("evalkit-buffer", os.MFD_CLOEXEC)
    os.ftruncate(fd, nbytes)
    mapped = mmap.mmap(fd, nbytes)
    return _view(mapped, shape, dtype), fd, mapped


def map_entries(entries: list[Any], fds: list[int], keep: list[mmap.mmap]) -> list[Any]:
    """The worker's side of ``describe``: tensors over the received descriptors (mappings kept in ``keep``)
    and over the judge's GPU buffers."""
    tensors = []
    for entry in entries:
        if isinstance(entry, dict) and "cuda_ipc" in entry:
            tensors.append(open_lent(entry))
        elif isinstance(entry, dict) and "fd_index" in entry:
            dtype = getattr(torch, entry["dtype"])
            mapped = mmap.mmap(fds[entry["fd_index"]], _mapped_bytes(tuple(entry["shape"]), dtype))
            keep.append(mapped)
            tensors.append(_view(mapped, tuple(entry["shape"]), dtype))
        else:
            tensors.append(entry)
    return tensors


def _tensor_bytes(shape: tuple[int, ...], dtype: torch.dtype) -> int:
    return torch.Size(shape).numel() * torch.empty((), dtype=dtype).element_size()


def _mapped_bytes(shape: tuple[int, ...], dtype: torch.dtype) -> int:
    return max(_tensor_bytes(shape, dtype), 1)  # a mapping cannot be empty


def _view(mapped: mmap.mmap, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    flat = torch.frombuffer(mapped, dtype=torch.uint8)
    return flat[:_tensor_bytes(shape, dtype)].view(dtype).reshape(shape)


def send_fds(sock_fd: int, fds: list[int]) -> None:
    with socket.socket(fileno=os.dup(sock_fd)) as sock:
        socket.send_fds(sock, [FDS_MESSAGE], fds)


def receive_fds(sock_fd: int, count: int) -> list[int]:
    with socket.socket(fileno=os.dup(sock_fd)) as sock:
        _, fds, _, _ = socket.recv_fds(sock, len(FDS_MESSAGE), count)
    return list(fds)


def send_own_memory(sock_fd: int) -> None:
    """The worker's side: hand the judge a descriptor of this process's memory, opened by the process itself (which
    may always read its own) before it confines itself and before any submission code runs. The judge reads a CPU
    call's outputs through it while the worker is frozen (``worker_memory``), whatever uid or namespace the worker
    moves to afterwards."""
    memory = os.open("/proc/self/mem", os.O_RDONLY | os.O_CLOEXEC)
    try:
        send_fds(sock_fd, [memory])
    finally:
        os.close(memory)
