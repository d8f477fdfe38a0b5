"""Trusted side: what the judge reads of a worker's own memory, while the worker is frozen.

A worker keeps each call's outputs where its forward left them and says where (``protocol.PlaceClaim``): on a
GPU, an offset into one of its allocations, named by its CUDA IPC handle (``protocol.SegmentClaim``), which the
judge maps into its own address space (``cuda_buffers.MappedSegment``); on a CPU, an address, which the judge reads
through a descriptor of ``/proc/<worker>/mem`` that the worker opened on itself before any submission code ran and
handed over with its setup. The judge reads only while the worker is frozen and, on a GPU, holds no work on it
(``session.Session.observe``): what it reads was complete when its clock stopped, and nothing of the worker's can
change it meanwhile. A place the worker's memory cannot back (outside the allocation, misaligned, unmapped, spread
over far more memory than the output holds) is a protocol violation: the worker's fault.

A place is a claim like any other; reading it is the judge's own act. Pointing at memory holding something else
(an input, another call's output) gains nothing: the judge compares what it finds there with the reference.
"""

from __future__ import annotations

import math
import os

import torch

from evalkit.sandbox.cuda_buffers import CudaDriverError, MappedSegment
from evalkit.sandbox.protocol import PlaceClaim, ProtocolViolation, SegmentClaim

# On a CPU the judge copies what a place spans: at most this many times the output's own bytes (a transposed or
# sliced output spans about its size; a stride of 2^40 would ask the judge to read a terabyte).
MOST_SPAN_FACTOR = 64
READ_CHUNK = 1 << 30


def span_elements(shape: tuple[int, ...], strides: list[int]) -> int:
    """How many elements, from the first, a tensor of ``shape`` with ``strides`` reaches (0 when it is empty)."""
    if len(strides) != len(shape):
        raise ProtocolViolation(f"an output with {len(strides)} strides for its {len(shape)} dimensions")
    if math.prod(shape) == 0:
        return 0
    return 1 + sum((size - 1) * stride for size, stride in zip(shape, strides))


class WorkerMemory:
    """One worker's memory as the judge reads it: ``view`` gives an output of one call at the place it claims."""

    def __init__(self, device: str, mem_fd: int | None = None) -> None:
        self.device, self.mem_fd = device, mem_fd
        self._mapped: dict[str, MappedSegment] = {}  # the worker's allocations mapped so far, by IPC handle

    def view(self, place: PlaceClaim, segments: list[SegmentClaim], shape: tuple[int, ...],
             dtype: torch.dtype) -> torch.Tensor:
        """The output of ``shape`` and ``dtype`` at ``place``: on a GPU a tensor over the worker's own memory, on a
        CPU the judge's copy of it. ``ProtocolViolation`` when the worker's memory cannot back it."""
        itemsize = torch.empty((), dtype=dtype).element_size()
        span = span_elements(shape, place.strides) * itemsize
        if place.offset % itemsize:
            raise ProtocolViolation(f"an output at offset {place.offset}, not a multiple of its {itemsize}-byte items")
        if span == 0:
            return torch.empty(shape, dtype=dtype, device=self.device)
        flat = self._gpu_bytes(place, segments, span) if self.device == "cuda" else self._cpu_bytes(place, span,
                                                                                                    shape, itemsize)
        return flat.view(dtype).as_strided(shape, place.strides)

    def _gpu_bytes(self, place: PlaceClaim, segments: list[SegmentClaim], span: int) -> torch.Tensor:
        if not 0 <= place.segment < len(segments):
            raise ProtocolViolation(f"an output in segment {place.segment} of the {len(segments)} the reply names")
        handle = segments[place.segment].handle
        mapped = self._mapped.get(handle)
        if mapped is None:
            try:
                mapped = MappedSegment(bytes.fromhex(handle))
            except CudaDriverError as err:
                raise ProtocolViolation(f"an output in an allocation the judge cannot map ({err})") from None
            self._mapped[handle] = mapped
        if place.offset + span > mapped.nbytes:
            raise ProtocolViolation(f"an output of {span} bytes at offset {place.offset} of an allocation of "
                                    f"{mapped.nbytes} bytes")
        return mapped.tensor(place.offset, span)

    def _cpu_bytes(self, place: PlaceClaim, span: int, shape: tuple[int, ...], itemsize: int) -> torch.Tensor:
        if self.mem_fd is None or place.segment != -1:
            raise ProtocolViolation("an output placed in a GPU allocation on a CPU judge")
        if span > max(MOST_SPAN_FACTOR * math.prod(shape) * itemsize, 1 << 20):
            raise ProtocolViolation(f"an output of {math.prod(shape)} elements spread over {span} bytes")
        data = bytearray(span)
        done = 0
        while done < span:
            try:
                chunk = os.pread(self.mem_fd, min(span - done, READ_CHUNK), place.offset + done)
            except OSError as err:
                raise ProtocolViolation(f"an output at address {place.offset:#x} the worker's memory does not hold "
                                        f"({err.strerror})") from None
            if not chunk:
                raise ProtocolViolation(f"an output at address {place.offset:#x} past the worker's memory")
            data[done:done + len(chunk)] = chunk
            done += len(chunk)
        return torch.frombuffer(data, dtype=torch.uint8)

    def close(self) -> None:
        """Unmap what was mapped of the worker's GPU memory and close the descriptor of its CPU memory."""
        for mapped in self._mapped.values():
            try:
                mapped.close()
            except CudaDriverError:
                pass  # the worker's allocation is gone already: nothing of it is left to unmap
        self._mapped.clear()
        if self.mem_fd is not None:
            os.close(self.mem_fd)
            self.mem_fd = None
