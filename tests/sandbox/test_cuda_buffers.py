"""On a CUDA GPU: the judge's lent buffers reach the worker, and their memory comes back to the device once
the worker is gone, however it ended (torch's own sharing kept it for the judge's whole life)."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys

import pytest
import torch

from evalkit.sandbox import shared_buffers

pytestmark = pytest.mark.cuda

GIB = 2**30
# The worker's side, as a separate process: map the judge's buffer, write into it, then end as told.
CONSUMER = """
import os, pickle, signal, sys, time
import torch
from evalkit.sandbox import shared_buffers
torch.zeros(1, device="cuda")
entry = pickle.loads(bytes.fromhex(sys.stdin.readline()))
mapped = shared_buffers.map_entries([entry], [], [])[0]
mapped.fill_(7.0)
torch.cuda.synchronize()
print("written", flush=True)
how = sys.argv[1]
if how == "hang":
    time.sleep(3600)
os._exit(0)
"""


def _lend_and_end(how: str) -> tuple[float, torch.Tensor]:
    """Lend 1 GiB to a consumer that ends ``how``; return the device's free memory after the judge released
    it, and what the judge read from the buffer before."""
    kept: list = []
    buf, entry = shared_buffers.describe(torch.empty(GIB // 4, device="meta"), "cuda", [], kept)
    consumer = subprocess.Popen([sys.executable, "-c", CONSUMER, how], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": os.getcwd()})
    consumer.stdin.write(pickle.dumps(entry).hex() + "\n")
    consumer.stdin.flush()
    assert consumer.stdout.readline().strip() == "written"
    seen = buf[:4].cpu()
    if how == "hang":
        consumer.send_signal(signal.SIGKILL)
    consumer.wait(timeout=60)
    del buf
    shared_buffers.release(kept)
    return torch.cuda.mem_get_info()[0], seen


@pytest.mark.parametrize("how", ["exit", "hang"])
def test_lent_memory_reaches_the_worker_and_comes_back(how):
    torch.zeros(1, device="cuda")
    free_before = torch.cuda.mem_get_info()[0]
    for _ in range(3):
        free_after, seen = _lend_and_end(how)
        assert seen.tolist() == [7.0] * 4
        assert free_after > free_before - GIB // 2, "a lent GiB stayed allocated after its worker ended"


def test_released_memory_is_not_freed_twice():
    kept: list = []
    shared_buffers.describe(torch.empty(1024, device="meta"), "cuda", [], kept)
    lent = kept[0]
    shared_buffers.release(kept)
    lent.free()  # a second free is a no-op, not a driver error
    assert kept == []


READER = """
import sys, torch
from evalkit.sandbox.cuda_buffers import MappedSegment
torch.zeros(1, device="cuda")
segment = MappedSegment(bytes.fromhex(sys.argv[1]))
print(float(segment.tensor(int(sys.argv[2]), 4).view(torch.float32)[0]))
"""


def test_an_outputs_allocation_keeps_its_handle_and_another_allocation_is_named_by_its_own():
    from evalkit.sandbox.cuda_buffers import SegmentExporter

    exporter = SegmentExporter()
    torch.cuda.empty_cache()  # no block cached by earlier tests of this process for the 64 MiB one to land in
    first = torch.full((1 << 20,), 3.0, device="cuda")
    start, size, handle = exporter.segment(first.data_ptr())
    assert start <= first.data_ptr() < start + size
    assert exporter.segment(first.data_ptr() + 4) == (start, size, handle)
    second = torch.full((1 << 24,), 5.0, device="cuda")  # 64 MiB: an allocation of its own
    assert exporter.segment(second.data_ptr())[2] != handle
    torch.cuda.synchronize()
    read = subprocess.run([sys.executable, "-c", READER, handle.hex(), str(first.data_ptr() - start)],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert read.stdout.strip() == "3.0", read.stderr[-2000:]
