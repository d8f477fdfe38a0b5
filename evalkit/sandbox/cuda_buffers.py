"""Both sides: GPU memory shared between the judge and one worker by CUDA IPC handles, through the CUDA
driver API (``libcuda``), not torch's CUDA tensor sharing. The judge lends a worker its input buffers
(``LentMemory``, ``open_lent``); a worker names the allocations its outputs lie in (``SegmentExporter``), which the
judge maps to read them (``MappedSegment``).

torch's sharing (``torch.multiprocessing``) counts a shared block's users across processes and keeps it
allocated in the sender until every receiver has released it. A worker that exits with ``os._exit``, crashes
or is killed never releases anything, so the judge kept every worker's buffers for the rest of its life: on a
problem with an 8.6 GB output, 9.6 GB more after each answer, until the judge itself ran out of memory
(docs/gpu-runs/2026-11-24-judge-work-h200/). Here the judge allocates the memory itself, sends only the
64-byte handle, and frees the memory once no process of the worker is left (``LentMemory.free``). The
worker maps the handle (``open_lent``) and never unmaps it: the mapping ends with its process.
"""

from __future__ import annotations

import ctypes
from typing import Any

import torch

IPC_HANDLE_BYTES = 64
LAZY_ENABLE_PEER_ACCESS = 1  # CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS, the one flag cuIpcOpenMemHandle takes


class CudaDriverError(RuntimeError):
    """A CUDA driver call failed; ``name`` is the driver's name for its result (e.g. ``CUDA_ERROR_OUT_OF_MEMORY``)."""

    def __init__(self, message: str, name: str = "") -> None:
        super().__init__(message)
        self.name = name


class _IpcHandle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * IPC_HANDLE_BYTES)]


class _Driver:
    """The few driver calls needed, each made with the primary context of torch's current device current
    (the context torch itself uses), whichever thread calls."""

    def __init__(self) -> None:
        # torch's own hold on the primary context, made now: a call's retain and release below would otherwise be
        # its only one, and the release that brings it to zero destroys the context with every buffer allocated in
        # it (a judge process whose first CUDA work was a sandboxed reference's buffers: every later cuMemFree failed
        # with CUDA_ERROR_INVALID_VALUE, docs/gpu-runs/2026-11-29-rl-throughput-h200).
        torch.cuda.synchronize()
        self.lib = ctypes.CDLL("libcuda.so.1")
        self.device = ctypes.c_int()
        self._check(self.lib.cuDeviceGet(ctypes.byref(self.device), torch.cuda.current_device()), "cuDeviceGet")

    def call(self, name: str, *args: Any) -> None:
        context = ctypes.c_void_p()
        self._check(self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(context), self.device), "cuDevicePrimaryCtxRetain")
        try:
            self._check(self.lib.cuCtxPushCurrent_v2(context), "cuCtxPushCurrent")
            try:
                self._check(getattr(self.lib, name)(*args), name)
            finally:
                self.lib.cuCtxPopCurrent_v2(ctypes.byref(ctypes.c_void_p()))
        finally:
            self.lib.cuDevicePrimaryCtxRelease_v2(self.device)

    def _check(self, result: int, what: str) -> None:
        if result != 0:
            name = ctypes.c_char_p()
            self.lib.cuGetErrorName(result, ctypes.byref(name))
            known = (name.value or b"").decode()
            raise CudaDriverError(f"{what} failed: {known or result}", known)


# CUpointer_attribute values (cuda.h): where an allocation starts, its size, and an ID no other allocation of the
# process ever has.
_RANGE_START_ADDR, _RANGE_SIZE, _BUFFER_ID = 11, 12, 7


class SegmentExporter:
    """The worker's side: the allocation holding a device address: (its start, its size in bytes, its CUDA IPC
    handle). The handle is asked for once per allocation: each later request only asks the driver which allocation
    an address lies in (one attribute query) and finds it by its ID, which no other allocation of the process ever
    has, so an allocation freed and made again at the same address is asked for anew. Asking for every output's
    handle in every request cost the harness 0.1-0.8 ms a request inside the judge's clock, more for answers whose
    outputs lie in more allocations (docs/gpu-runs/2026-12-01-one-judge-spread-h200). Raises ``CudaDriverError``
    for memory no handle can name (torch's expandable segments, or memory the worker itself mapped from another
    process)."""

    def __init__(self) -> None:
        self._driver: _Driver | None = None  # made at the first export: after torch's own context
        self._by_id: dict[int, tuple[int, int, bytes] | None] = {}  # None: an allocation no handle can name

    def segment(self, address: int) -> tuple[int, int, bytes]:
        self._driver = self._driver or _Driver()
        start, size, buffer_id = self._allocation(address)
        if buffer_id not in self._by_id:
            self._by_id = {key: known for key, known in self._by_id.items()  # freed: another now lies there
                           if known is None or known[0] + known[1] <= start or known[0] >= start + size}
            handle = _IpcHandle()
            try:
                self._driver.call("cuIpcGetMemHandle", ctypes.byref(handle), ctypes.c_uint64(start))
                self._by_id[buffer_id] = (start, size, bytes(handle))
            except CudaDriverError:
                self._by_id[buffer_id] = None
                raise
        known = self._by_id[buffer_id]
        if known is None:
            raise CudaDriverError("cuIpcGetMemHandle failed before for this allocation")
        return known

    def _allocation(self, address: int) -> tuple[int, int, int]:
        assert self._driver is not None
        start, size, buffer_id = ctypes.c_uint64(), ctypes.c_size_t(), ctypes.c_ulonglong()
        attributes = (ctypes.c_int * 3)(_RANGE_START_ADDR, _RANGE_SIZE, _BUFFER_ID)
        data = (ctypes.c_void_p * 3)(ctypes.addressof(start), ctypes.addressof(size), ctypes.addressof(buffer_id))
        self._driver.call("cuPointerGetAttributes", ctypes.c_uint(3), attributes, data, ctypes.c_uint64(address))
        return start.value, size.value, buffer_id.value


class MappedSegment:
    """The judge's side: one allocation of a worker's, mapped into the judge's own address space from its IPC
    handle; ``nbytes`` is the size the driver gives the mapping, whatever the worker said."""

    def __init__(self, handle: bytes) -> None:
        self._driver = _Driver()
        self.address = ctypes.c_uint64()
        raw = _IpcHandle.from_buffer_copy(handle)
        self._driver.call("cuIpcOpenMemHandle_v2", ctypes.byref(self.address), raw,
                          ctypes.c_uint(LAZY_ENABLE_PEER_ACCESS))
        base, size = ctypes.c_uint64(), ctypes.c_size_t()
        self._driver.call("cuMemGetAddressRange_v2", ctypes.byref(base), ctypes.byref(size), self.address)
        self.nbytes = size.value - (self.address.value - base.value)

    def tensor(self, offset: int, nbytes: int) -> torch.Tensor:
        """``nbytes`` bytes from ``offset``, as a flat uint8 tensor (the caller checked the range)."""
        return _flat(self.address.value + offset, nbytes)

    def close(self) -> None:
        if self.address.value:
            torch.cuda.synchronize()  # no read of it is still running
            self._driver.call("cuIpcCloseMemHandle", self.address)
            self.address = ctypes.c_uint64()


class _ArrayInterface:
    """Lets ``torch.as_tensor`` view device memory it does not own (``__cuda_array_interface__``)."""

    def __init__(self, address: int, nbytes: int) -> None:
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (address, False),
                                         "version": 2}


def _flat(address: int, nbytes: int) -> torch.Tensor:
    return torch.as_tensor(_ArrayInterface(address, nbytes), device="cuda")


def _tensor_over(address: int, nbytes: int, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    flat = _flat(address, nbytes)
    used = torch.Size(shape).numel() * torch.empty((), dtype=dtype).element_size()
    return flat[:used].view(dtype).reshape(shape)


class LentMemory:
    """The judge's side: one buffer in memory of its own, its tensor, and the handle a worker maps it by."""

    def __init__(self, shape: tuple[int, ...], dtype: torch.dtype) -> None:
        self._driver = _Driver()
        nbytes = max(torch.Size(shape).numel() * torch.empty((), dtype=dtype).element_size(), 1)
        self._address = ctypes.c_uint64()
        self._driver.call("cuMemAlloc_v2", ctypes.byref(self._address), ctypes.c_size_t(nbytes))
        handle = _IpcHandle()
        try:
            self._driver.call("cuIpcGetMemHandle", ctypes.byref(handle), self._address)
        except CudaDriverError:
            self.free()
            raise
        self.tensor = _tensor_over(self._address.value, nbytes, shape, dtype)
        self.entry = {"cuda_ipc": bytes(handle), "nbytes": nbytes,
                      "shape": list(shape), "dtype": str(dtype).replace("torch.", "")}

    def free(self) -> None:
        """Give the memory back to the device. Only once no process that mapped it is left: until then a
        worker could still write into whatever the judge allocated there next."""
        if self._address.value:
            torch.cuda.synchronize()  # no copy into or out of it is still running
            self._driver.call("cuMemFree_v2", self._address)
            self._address = ctypes.c_uint64()


def open_lent(entry: dict[str, Any]) -> torch.Tensor:
    """The worker's side: a tensor over the judge's buffer that ``entry`` (``LentMemory.entry``) names."""
    driver = _Driver()
    handle = _IpcHandle.from_buffer_copy(bytes(entry["cuda_ipc"]))
    address = ctypes.c_uint64()
    driver.call("cuIpcOpenMemHandle_v2", ctypes.byref(address), handle, ctypes.c_uint(LAZY_ENABLE_PEER_ACCESS))
    return _tensor_over(address.value, int(entry["nbytes"]), tuple(entry["shape"]), getattr(torch, entry["dtype"]))
