"""Runs on both sides; inside the sandbox it is the submission's to rewrite. A device clock.

``Clock`` binds the clock and synchronize functions when it is made. The worker makes its
clock before importing submission code, so a submission that patches ``torch.cuda.Event`` or
``time.perf_counter`` later does not change it; it can still patch the clock object itself,
so what the worker's clock says is only ever the worker's claim: the judge records it and never uses
it for a time. The judge uses the same class in its own process to time the reference for time limits.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import torch


class Clock:
    """Times one call: CUDA events around a device-wide synchronize, or a host clock on CPU."""

    def __init__(self, device: str) -> None:
        self.device = device
        self._events: list[Any] = []  # two a call, made once and used again by every request
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

    def time_calls(self, fn: Callable[..., object], argument_sets: list[list[Any]]) -> tuple[list[object], list[float]]:
        """``fn`` on each argument set in turn, each call timed as the field times a kernel in one process: a device
        event recorded before it and one after, then a device-wide synchronize before the next (on a CPU, the host
        clock around it). (The results, each call's milliseconds.)"""
        results: list[object] = []
        if self._event is None:
            times = []
            for arguments in argument_sets:
                start = self._perf_counter()
                results.append(fn(*arguments))
                times.append((self._perf_counter() - start) * 1e3)
            return results, times
        while len(self._events) < 2 * len(argument_sets):
            self._events.append(self._event(enable_timing=True))
        events = self._events[:2 * len(argument_sets)]
        self._synchronize()
        for arguments, start, end in zip(argument_sets, events[::2], events[1::2]):
            start.record()
            results.append(fn(*arguments))
            end.record()
            self._synchronize()
        return results, [start.elapsed_time(end) for start, end in zip(events[::2], events[1::2])]
