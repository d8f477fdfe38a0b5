"""Trusted side: one judge's side of its GPU's gate, host-wide: non-timed GPU work shares the GPU, a timing has it alone.

Only a timed window needs the GPU to itself; a judge's other GPU work (an answer's setup, load and correctness
trials, its profile, a problem's reference loaded and its float64 outputs) may run beside another judge's, but never
beside a timing. So a judge holds a shared *use* of its GPU (``GpuGate.use``) around that work, and times only
inside ``GpuGate.exclusive``, given the turn its run takes for it (``BuildFreezer.timing``: every other timing of the
GPU over, the builds frozen). Through the host's registry (``host_timing``), whatever process or run the others are:

- a timing says it wants the GPU (a ``want`` token) before it queues for its turn, and no new use starts while one
  does (writer preference): a use announces itself, then looks for wants, and stands aside until none is left;
- a judge that has its turn waits until no other judge's use is live (it announced first, so a use that starts
  after it looked sees it): at most ``USE_WAIT_S``, then it times anyway and says which uses were still live, so
  the row is flagged (``contended_gpu``).

A judge that waits for another judge's worker to let go of a build's cache entry waits outside its use
(``GpuGate.aside``): that worker holds the entry through its own judge's timing.

A use is held for a stage, but entering a nested one is a point where the stage may pause: when another judge's
timing wants the GPU there, this judge drops its use until that timing is over (``GpuGate.use``). A judge enters
one around each request of a stage's loop (a correctness trial, a timed output's check), so a timing waits for one
request of another judge's, not for its whole stage (a warm answer's correctness ran for seconds on the H200).

Re-entrant: uses nest; a use inside ``exclusive`` is the timing's own work and waits for nothing; a use held when
``exclusive`` is entered is dropped for the timing and taken again after it (a judge's worker is frozen between its
requests, so nothing of its work runs meanwhile), so a judge never waits for its own use, nor holds one while it
queues for the turn. A process that dies holds nothing (the registry's tokens die with it). One gate serves one
judge, from one thread.

The judges of a GPU share its memory too: ``GpuGate.memory`` holds one answer's working set against theirs
(``HostTiming.reserve_memory``), waiting, outside any use, until it fits.
"""

from __future__ import annotations

import logging
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Callable, Iterator

from evalkit.sandbox.host_timing import HostTiming, Token, open_registry

logger = logging.getLogger(__name__)

# How long a judge that has its GPU's turn waits for other judges' non-timed work on it before it times anyway (and
# flags the row). A use is one stage of one answer: on the H200 the profile of one forward, a warm answer's longest
# stage, cost 1.0-1.6 s (docs/gpu-runs/2026-11-24-judge-work-h200), so ten seconds is several times it, yet a sixth
# of what one answer may hang for before its limits end it (60 s, ``hang_limit_s``): a hanging neighbour costs a
# timing at most this long, and the first call of an answer that compiles longer (Triton, torch.compile) is timed
# beside.
USE_WAIT_S = 10.0
# How long a judge waits for the other judges of its GPU to leave it memory enough for its answer before it judges it
# anyway (and may run out of memory, then judged again: ``device_judge``): a few answers' time, so that one judge
# stopped while holding its share never stops the others.
MEMORY_WAIT_S = 120.0


class GpuGate:
    """One judge's uses and timings of GPU ``device`` (its ``CUDA_VISIBLE_DEVICES`` entry, as every evalkit process of
    the host names it)."""

    def __init__(self, registry: HostTiming, device: str) -> None:
        self.registry, self.device = registry, device
        self._depth = 0  # uses entered and not yet left
        self._exclusive = 0  # timings entered and not yet left
        self._memory_depth = 0  # memory shares entered and not yet left
        self._token: Token | None = None

    @classmethod
    def open(cls, device: str | None) -> "GpuGate | None":
        """The gate of GPU ``device`` in the host's registry; None for no GPU, or where the registry cannot be used
        (warned by ``open_registry``: then only the run's own timings exclude each other)."""
        registry = open_registry() if device else None
        return cls(registry, device) if registry is not None and device else None

    @contextmanager
    def use(self) -> Iterator[None]:
        """Non-timed work on the GPU: waits while any timing wants it (a timing of this judge excepted). Nested in a
        use this judge holds, it first stands aside for another judge's timing that wants the GPU, if any."""
        if self._depth == 0 and not self._exclusive:
            self._token = self.registry.take_use(self.device)
        elif self._token is not None and self.registry.timing_wanted(self.device):
            self._drop()  # between two requests of a stage: its worker is frozen, its work done
            self._token = self.registry.take_use(self.device)
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            if self._depth == 0:
                self._drop()

    @contextmanager
    def aside(self) -> Iterator[None]:
        """While this judge waits for something another judge may hold through its timing (a build's cache entry,
        which a judged worker holds for its life: ``remains.entry_lock``): its use dropped, and taken back after
        (once no timing wants the GPU). Holding it there would make that timing wait for this judge, which waits
        for that judge: each timing then waits out ``USE_WAIT_S`` and is flagged. Only between requests: nothing of
        this judge's runs on the GPU while it waits."""
        held = self._token is not None
        self._drop()
        try:
            yield
        finally:
            if held and self._depth and not self._exclusive:
                self._token = self.registry.take_use(self.device)

    @contextmanager
    def exclusive(self, turn: Callable[[], AbstractContextManager[Any]]) -> Iterator[list[str]]:
        """A timing: this judge's use dropped, ``turn`` entered (the GPU's turn taken for it), then every other
        judge's use waited for (at most ``USE_WAIT_S``). Yields the uses still live then (empty: the GPU is this
        judge's alone)."""
        self._exclusive += 1
        self._drop()
        try:
            with turn():
                contended = self.registry.wait_for_uses(self.device, USE_WAIT_S)
                if contended:
                    logger.warning("GPU %s: other judges' work on it (%s) still ran after %g s; timing beside it",
                                   self.device, ", ".join(contended), USE_WAIT_S)
                yield contended
        finally:
            self._exclusive -= 1
            if self._depth and not self._exclusive:
                self._token = self.registry.take_use(self.device)

    @contextmanager
    def memory(self, nbytes: int, budget_bytes: int) -> Iterator[None]:
        """One answer's share of the GPU's memory, ``nbytes``, held for the duration: waits (at most
        ``MEMORY_WAIT_S``) until it fits in ``budget_bytes`` beside the other judges' (``HostTiming.reserve_memory``).
        Entered outside any use: a timing never waits for a judge that waits for memory. A hold inside one of this
        judge's own takes nothing more: a judge judges one answer at a time, and the share it holds is for all of that
        answer's work (a baseline timed for it too): a second token would count it twice in the other judges' sums."""
        token = None if self._memory_depth else self.registry.reserve_memory(self.device, nbytes, budget_bytes,
                                                                             MEMORY_WAIT_S)
        self._memory_depth += 1
        try:
            yield
        finally:
            self._memory_depth -= 1
            if token is not None:
                token.release()

    def _drop(self) -> None:
        token, self._token = self._token, None
        if token is not None:
            token.release()


def contention_note(contended: list[str]) -> str:
    """What a row says when it was timed beside other judges' work on its GPU (``GpuGate.exclusive``)."""
    return (f"timed while {len(contended)} other judge(s) still had work on this GPU after waiting {USE_WAIT_S:g} s "
            f"for it (an answer compiling or hanging outside its timing): the times may be slowed")
