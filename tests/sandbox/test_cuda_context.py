"""The judge's driver calls for lent GPU memory keep torch's hold on the primary context (no GPU needed)."""

from __future__ import annotations

import pytest


def test_the_driver_has_torch_hold_the_primary_context_before_its_own_retain_and_release(monkeypatch):
    """Each driver call retains the primary context and releases it after; were that the context's only hold, the
    release would destroy it with every buffer allocated in it (a judge process whose first CUDA work was a
    sandboxed reference's buffers: each later cuMemFree failed, CUDA_ERROR_INVALID_VALUE). torch's hold comes first."""
    from evalkit.sandbox import cuda_buffers

    class TorchHoldsIt(Exception):
        pass

    def synchronize(*args):
        raise TorchHoldsIt

    monkeypatch.setattr(cuda_buffers.torch.cuda, "synchronize", synchronize)
    monkeypatch.setattr(cuda_buffers.ctypes, "CDLL", lambda name: pytest.fail("the driver was loaded before torch's context"))
    with pytest.raises(TorchHoldsIt):
        cuda_buffers._Driver()
