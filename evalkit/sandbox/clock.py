"""Runs on both sides; inside the sandbox it is the submission's to rewrite. A device clock.

``Clock`` binds the clock and synchronize functions when it is made. The worker makes its
clock before importing submission code, so a submission that patches ``torch.cuda.Event`` or
``time.perf_counter`` later does not change it; it can still patch the clock object itself,
so what the worker's clock says is only ever the worker's claim: the judge records it and never uses
it for a time. The judge uses the same class in its own process to time the reference for time limits.
"""

from __future__ import annotations

import time
from typing import Callable

import torch


class Clock:
    """Times one call: CUDA events around a device-wide synchronize, or a host clock on CPU."""

    def __init__(self, device: str) -> None:
        self.device = device
        self._perf_counter = time.perf_counter
        if device == "cuda":
            self._event = torch.cuda.Event
            self._synchronize = torch.cuda.synchronize
        else:
            self._event = None
            self._synchronize = lambda: None

    def synchronize(self) -> None:
        self._synchronize()

    def time_ms(self, fn: Callable[[], object]) -> tuple[float, object]:
        """Run ``fn`` once and return (elapsed milliseconds, its result)."""
        self._synchronize()
        if self._event is None:
            start = self._perf_counter()
            result = fn()
            return (self._perf_counter() - start) * 1e3, result
        start, end = self._event(enable_timing=True), self._event(enable_timing=True)
        start.record()
        result = fn()
        self._synchronize()  # device-wide: waits for every stream, not only the current one
        end.record()
        end.synchronize()
        return start.elapsed_time(end), result
