"""Trusted side: the problems a device judge keeps loaded (``device_judge``), the current one last, within their
bounds; what running out of the GPU's memory unloads; and handing memory back, so that the answers' workers (other
processes) find it.

A judge that goes back to a kept problem loads nothing again (its float64 reference, its timed facts, its cached
expected outputs). Kept problems hold GPU memory the answers' workers may need, so they are bounded by number
(``KEPT_PROBLEMS``) and by memory: the judge's share of the GPU, and the GPU's free share. (Each answer's own share
of the GPU among its judges is ``gpu_memory``'s.)
"""

from __future__ import annotations

import gc
import logging
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping

import torch

from evalkit.judge.contender import Contender
from evalkit.judge.sandboxed_reference import ReferenceFailed
from evalkit.judge.submission_judge import Judge, close_contender
from evalkit.records import ResultRow
from evalkit.sandbox.cuda_buffers import CudaDriverError
from evalkit.sandbox.launcher import UntrustedProcess
from evalkit.sandbox.spare import discard
from evalkit.sources.problems import Problem

logger = logging.getLogger(__name__)

# Loading a problem again costs its judge 1-2 s on the H200 (the reference timed, its float64 outputs computed),
# paid at every switch between problems, most of them at a corpus's end where answers of every problem queue up.
KEPT_PROBLEMS = 8
# Kept problems hold GPU memory the answers' workers may need: a share of the device's memory (split among the
# judges of one GPU), which a problem larger than it never shares with another.
KEPT_PROBLEMS_MEMORY_SHARE = 0.25
# A problem given as text keeps more than the judge's tensors: the buffers lent to its reference's worker and that
# worker's own memory, neither of them the judge's allocations. So a new problem is also made room for while the
# GPU has less than this share free, whoever holds it: five kept problems of the shipped set (their references
# sandboxed) ran the H200 out of memory (docs/gpu-runs/2026-11-29-rl-throughput-h200).
FREE_MEMORY_FLOOR_SHARE = 0.35

# What a sandboxed reference's worker says when it ran out of GPU memory (torch's error, or the driver's, in its
# message): its words, not the judge's observation (``KeptProblems.out_of_memory``).
REPORTED_OUT_OF_MEMORY_MARKS = ("OutOfMemoryError", "CUDA_ERROR_OUT_OF_MEMORY")
# What else an answer's own CUDA code says when the GPU refuses it memory (torch's check of a CUDA call, the runtime's
# name): never "the host ran out of memory", which is the answer's own memory limit, judged once.
ANSWER_GPU_OUT_OF_MEMORY_MARKS = ("CUDA error: out of memory", "cudaErrorMemoryAllocation")
# Problems whose reference's report of running out of memory is remembered (the oldest forgotten first): a server
# whose clients send ever new references stays flat; a problem forgotten is believed once more, one more unloading.
REPORTED_REMEMBERED = 256


@dataclass
class ProblemContext:
    """One problem: its baselines (None until known), its judge once an answer needs it (or why not), and the live
    baseline its answers are timed beside (``partner``), kept while the problem is, unless the GPU's free share
    falls below ``FREE_MEMORY_FLOOR_SHARE``: an RL step goes through its problems in turn, and starting each one's
    live baseline again took about 1 s of the judge's time a problem on the H200."""

    problem: Problem
    baselines: dict[str, Any] | None = None
    judge: Judge | None = None
    setup_error: str = ""
    partner: Contender | None = None


def close_judge(context: ProblemContext | None) -> None:
    """End the problem's live baseline and its reference (a sandboxed one's worker): it is loaded anew if needed."""
    close_partner(context)
    if context is not None and context.judge is not None:
        context.judge.ref.close()
        context.judge = None


def held_bytes(context: ProblemContext) -> int:
    """About what a kept problem holds on the GPU: what its judge lent its sandboxed reference, and the float64
    outputs it keeps (0 before it is loaded)."""
    return context.judge.ref.lent_device_bytes() + context.judge.expected_bytes if context.judge else 0


def close_partner(context: ProblemContext | None) -> None:
    """End the problem's live baseline, if it has one."""
    if context is not None and context.partner is not None:
        close_contender(context.partner)
        worker = context.partner.session.worker
        if isinstance(worker, UntrustedProcess):  # its folder goes too (a test's channel has none)
            discard(worker)
        context.partner = None


def kept_memory_share(gpu_judges: int) -> float:
    """The share of its GPU's memory a judge's kept problems may hold, with ``gpu_judges`` judges on that GPU."""
    return KEPT_PROBLEMS_MEMORY_SHARE / max(1, gpu_judges)


def held_share(device: str, lent_bytes: int) -> float:
    """The share of the GPU's memory this process's tensors hold, plus ``lent_bytes`` it allocated outside torch's
    allocator (0 on CPU)."""
    if device != "cuda" or not torch.cuda.is_initialized():
        return 0.0
    return (torch.cuda.memory_allocated() + lent_bytes) / torch.cuda.mem_get_info()[1]


def free_share(device: str) -> float:
    """The share of the GPU's memory free, whoever holds the rest (1 on CPU)."""
    if device != "cuda" or not torch.cuda.is_initialized():
        return 1.0
    free, total = torch.cuda.mem_get_info()
    return free / total


def out_of_memory(err: BaseException) -> bool:
    """The GPU ran out of memory, as this process observed it: torch's error, or the driver refusing an allocation
    (``cuda_buffers``: the buffers a judge lends a sandboxed reference). A sandboxed worker's word for it is weighed
    apart (``KeptProblems.out_of_memory``)."""
    return isinstance(err, torch.OutOfMemoryError) or \
        (isinstance(err, CudaDriverError) and err.name == "CUDA_ERROR_OUT_OF_MEMORY")


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


def answer_reported_out_of_memory(row: ResultRow) -> bool:
    """The answer's worker failed saying the GPU ran out of memory (torch's error or the driver's in its error): with
    other judges' answers or other problems holding memory beside it, that may not be the answer's doing. Its word:
    the device judge judges it once more alone, and that judging decides."""
    error = row.error or {}
    said = f"{error.get('type', '')} {error.get('message', '')}"
    return row.verdict in ("runtime_error", "crash") and \
        any(mark in said for mark in (*REPORTED_OUT_OF_MEMORY_MARKS, *ANSWER_GPU_OUT_OF_MEMORY_MARKS))


class ReferenceOutOfMemory(ReferenceFailed):
    """Loading a problem's reference ran the GPU out of memory: the answer is judged again, and the problem loaded
    anew, never kept as broken."""


class KeptProblems:
    """A device judge's loaded problems, the least recently used first; ``memory_bound`` is the share of the GPU's
    memory they may hold (``kept_memory_share``)."""

    def __init__(self, problems: Mapping[str, Problem], device: str, memory_bound: float,
                 in_use: Callable[[], set[str]] = set) -> None:
        self.problems, self.device, self.memory_bound = problems, device, memory_bound
        self._in_use = in_use  # problems another thread judges with now (``overlap``'s tails): never unloaded
        self.contexts: OrderedDict[str, ProblemContext] = OrderedDict()
        self._reported: dict[str, None] = {}  # problems whose reference reported running out of memory, unanswered
        # since, the oldest first

    @property
    def current(self) -> str | None:
        return next(reversed(self.contexts), None)

    @property
    def ids(self) -> list[str]:
        return list(self.contexts)

    def get(self, problem_id: str) -> ProblemContext | None:
        return self.contexts.get(problem_id)

    def current_context(self) -> ProblemContext | None:
        """The problem judged last, or None before any."""
        return next(reversed(self.contexts.values()), None)

    def clear(self) -> None:
        """Forget every kept problem (once each was closed)."""
        self.contexts.clear()

    def __iter__(self) -> Iterator[ProblemContext]:
        return iter(list(self.contexts.values()))

    def switch_to(self, problem_id: str) -> ProblemContext:
        """Make ``problem_id`` the current problem: the one kept, else a new one, once room is made for it."""
        current = self.current
        if current is not None and current != problem_id and self.free_share() < FREE_MEMORY_FLOOR_SHARE:
            close_partner(self.contexts[current])  # its live baseline's memory is the next answers' to use
        context = self.contexts.pop(problem_id, None)
        if context is None:
            self.make_room()
            context = ProblemContext(self.problems[problem_id])
        self.contexts[problem_id] = context
        return context

    def make_room(self) -> None:
        """Drop kept problems (their tensors freed) until one more fits the bounds: past the number, the least
        recently used; past a memory bound, the one holding the most GPU memory. A step of an RL trainer goes
        through all its problems in turn: dropping the least recently used there dropped every problem before
        it was judged again, where dropping the largest keeps the rest loaded."""
        kept, in_use = self.contexts, self._in_use()
        while any(key not in in_use for key in kept) and (
                len(kept) >= KEPT_PROBLEMS or self.memory_share() > self.memory_bound
                or self.free_share() < FREE_MEMORY_FLOOR_SHARE):
            free = [key for key in kept if key not in in_use]
            dropped = free[0] if len(kept) >= KEPT_PROBLEMS else \
                max(free, key=lambda key: held_bytes(kept[key]))  # the first such: least recent
            close_judge(kept.pop(dropped))
            logger.debug("%s: unloaded to make room for another problem", dropped)
            free_garbage(self.device)

    def memory_share(self) -> float:
        """The judge's share of the GPU's memory: its tensors, its loans to sandboxed references (0 on CPU)."""
        lent = sum(context.judge.ref.lent_device_bytes() for context in self.contexts.values() if context.judge)
        return held_share(self.device, lent)

    def free_share(self) -> float:
        return free_share(self.device)

    def unload_all(self, problem_id: str) -> bool:
        """Unload every kept problem after the GPU ran out of memory, ``problem_id``'s too (a sandboxed reference's
        worker ends with its error; the problem is loaded anew): whether another problem was kept, so that judging
        again may fit."""
        others = any(key != problem_id for key in self.contexts)
        while self.contexts:
            close_judge(self.contexts.popitem()[1])
        free_garbage(self.device)
        return others

    def out_of_memory(self, problem_id: str, err: BaseException) -> bool:
        """Whether ``err`` (judging an answer of ``problem_id``, or loading its reference) is the GPU running out of
        memory. What this process observed (torch's error, the driver's) always is. A sandboxed reference's worker's
        word is believed once until one of the problem's answers is judged through (``answered``): each belief
        unloads every kept problem, so a hostile reference that reported it at every answer would otherwise unload
        the other problems for each of its answers, and never be kept as broken."""
        if out_of_memory(err) or isinstance(err, ReferenceOutOfMemory):
            return True
        reported = isinstance(err, ReferenceFailed) and any(mark in str(err) for mark in REPORTED_OUT_OF_MEMORY_MARKS)
        if not reported or problem_id in self._reported:
            return False
        self._reported[problem_id] = None
        while len(self._reported) > REPORTED_REMEMBERED:
            del self._reported[next(iter(self._reported))]
        return True

    def answered(self, problem_id: str) -> None:
        """An answer of ``problem_id`` was judged with its reference answering throughout."""
        self._reported.pop(problem_id, None)
