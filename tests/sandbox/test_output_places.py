"""The harness names each output's GPU allocation by an IPC handle asked of the driver once per allocation, not once
per request: asking in every request cost 0.1-0.8 ms of the judge's clock, more for answers whose outputs lie in
more allocations. An allocation freed and made again is asked for anew. (With a driver stand-in: no GPU here.)"""

from __future__ import annotations

import ctypes

import pytest
import torch

from evalkit.sandbox.cuda_buffers import CudaDriverError, SegmentExporter
from evalkit.sandbox.untrusted.outputs import OutputPlacer


class FakeDriver:
    """Answers ``cuPointerGetAttributes`` from ``allocations`` ((start, size, buffer id) each) and hands out a
    handle per ``cuIpcGetMemHandle``, counting them; starts in ``unnamable`` cannot be exported."""

    def __init__(self, allocations: list[tuple[int, int, int]], unnamable: tuple[int, ...] = ()) -> None:
        self.allocations, self.unnamable, self.exports = allocations, unnamable, 0

    def call(self, name: str, *args: object) -> None:
        if name == "cuPointerGetAttributes":
            _, _, data, address = args
            start, size, buffer_id = next(a for a in self.allocations if a[0] <= address.value < a[0] + a[1])
            for slot, value, kind in zip(data, (start, size, buffer_id),
                                         (ctypes.c_uint64, ctypes.c_size_t, ctypes.c_ulonglong)):
                kind.from_address(slot).value = value
        elif name == "cuIpcGetMemHandle":
            handle, start = args
            self.exports += 1
            if start.value in self.unnamable:
                raise CudaDriverError("cuIpcGetMemHandle failed: CUDA_ERROR_INVALID_VALUE")
            handle._obj.reserved = f"handle{self.exports}".encode()


def _exporter(driver: FakeDriver) -> SegmentExporter:
    exporter = SegmentExporter()
    exporter._driver = driver  # type: ignore[assignment]
    return exporter


def test_an_allocation_is_exported_once_however_many_requests_and_outputs_lie_in_it():
    driver = FakeDriver([(1000, 500, 1), (4000, 100, 2)])
    exporter = _exporter(driver)
    first = [exporter.segment(address) for address in (1000, 1200, 4050)]
    again = [exporter.segment(address) for address in (1100, 4000)]
    assert driver.exports == 2
    assert first[0][:2] == (1000, 500) and first[0] == first[1] == again[0]
    assert first[2] == again[1] and first[2][2] != first[0][2]


def test_an_allocation_made_again_at_the_same_address_is_exported_anew():
    driver = FakeDriver([(1000, 500, 1)])
    exporter = _exporter(driver)
    old = exporter.segment(1000)
    driver.allocations = [(1000, 500, 7)]  # freed, and another allocation now lies there
    new = exporter.segment(1000)
    assert driver.exports == 2 and new[2] != old[2]
    assert list(exporter._by_id) == [7]  # the freed one is forgotten


def test_an_allocation_no_handle_names_fails_each_time_without_asking_again():
    driver = FakeDriver([(1000, 500, 1)], unnamable=(1000,))
    exporter = _exporter(driver)
    for _ in range(2):
        with pytest.raises(CudaDriverError):
            exporter.segment(1000)
    assert driver.exports == 1


class FakeExporter:
    """Names CPU tensors as if they were GPU allocations: the one of ``known`` an address lies in, else one of its
    own starting there; ``refused`` ones cannot be named."""

    def __init__(self, known: list[torch.Tensor], refused: set[int]) -> None:
        self.known, self.refused = [(t.data_ptr(), t.numel() * t.element_size()) for t in known], refused

    def segment(self, address: int) -> tuple[int, int, bytes]:
        if address in self.refused:
            raise CudaDriverError("no handle")
        start, size = next(((s, n) for s, n in self.known if s <= address < s + n), (address, 1 << 20))
        return start, size, start.to_bytes(8, "little")


def _placer(known: list[torch.Tensor], refused: set[int]) -> OutputPlacer:
    placer = OutputPlacer("cuda", [{"shape": [2, 3], "dtype": "float32"}], exporter=FakeExporter(known, refused))
    placer._formed = lambda outputs: True  # type: ignore[method-assign]  # CPU tensors stand in for GPU ones
    return placer


def test_a_reply_names_each_allocation_once_with_each_calls_offset_in_it():
    storage = torch.zeros(4, 2, 3)
    placer = _placer([storage], set())
    formed, _, places, segments, kept = placer.place([storage[0], storage[1], storage[3]])
    base = storage.data_ptr()
    assert formed and len(segments) == 1 and segments[0].handle == base.to_bytes(8, "little").hex()
    assert [place[0][:2] for place in places] == [[0, 0], [0, 24], [0, 72]]
    assert all(k.data_ptr() == o.data_ptr() for k, o in zip(kept, (storage[0], storage[1], storage[3])))


def test_an_output_no_handle_names_is_copied_into_one_that_has_one():
    output = torch.ones(2, 3)
    placer = _placer([], {output.data_ptr()})
    _, _, places, segments, kept = placer.place([output])
    assert kept[0].data_ptr() != output.data_ptr() and torch.equal(kept[0], output)
    assert segments[0].handle == kept[0].data_ptr().to_bytes(8, "little").hex() and places[0][0][1] == 0
