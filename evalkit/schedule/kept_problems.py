"""Trusted side: the problems a device judge keeps loaded (``device_judge``), the current one last, within their
bounds; and what running out of the GPU's memory unloads.

A judge that goes back to a kept problem loads nothing again (its float64 reference, its timed facts, its cached
expected outputs). Kept problems hold GPU memory the answers' workers may need, so they are bounded by number
(``KEPT_PROBLEMS``) and by memory (``gpu_memory``): the judge's share of the GPU, and the GPU's free share.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import Iterator, Mapping

from evalkit.judge.sandboxed_reference import ReferenceFailed
from evalkit.schedule.gpu_memory import FREE_MEMORY_FLOOR_SHARE, free_garbage, free_share, held_share, out_of_memory
from evalkit.schedule.problem_context import ProblemContext, close_judge, close_partner, held_bytes
from evalkit.sources.problems import Problem

logger = logging.getLogger(__name__)

# Loading a problem again costs its judge 1-2 s on the H200 (the reference timed, its float64 outputs computed),
# paid at every switch between problems, most of them at a corpus's end where answers of every problem queue
# up. Kept problems hold GPU memory the answers' workers may need, hence the bounds of ``gpu_memory``.
KEPT_PROBLEMS = 8

# What a sandboxed reference's worker says when it ran out of GPU memory (torch's error, or the driver's, in its
# message): its words, not the judge's observation (``KeptProblems.out_of_memory``).
REPORTED_OUT_OF_MEMORY_MARKS = ("OutOfMemoryError", "CUDA_ERROR_OUT_OF_MEMORY")


class ReferenceOutOfMemory(ReferenceFailed):
    """Loading a problem's reference ran the GPU out of memory: the answer is judged again, and the problem loaded
    anew, never kept as broken."""


class KeptProblems:
    """A device judge's loaded problems, the least recently used first; ``memory_bound`` is the share of the GPU's
    memory they may hold (``gpu_memory.kept_memory_share``)."""

    def __init__(self, problems: Mapping[str, Problem], device: str, memory_bound: float) -> None:
        self.problems, self.device, self.memory_bound = problems, device, memory_bound
        self.contexts: OrderedDict[str, ProblemContext] = OrderedDict()
        self._reported: set[str] = set()  # problems whose reference reported running out of memory, unanswered since

    @property
    def current(self) -> str | None:
        return next(reversed(self.contexts), None)

    @property
    def ids(self) -> list[str]:
        return list(self.contexts)

    def get(self, problem_id: str) -> ProblemContext | None:
        return self.contexts.get(problem_id)

    def __iter__(self) -> Iterator[ProblemContext]:
        return iter(list(self.contexts.values()))

    def switch_to(self, problem_id: str) -> ProblemContext:
        """Make ``problem_id`` the current problem: the one kept, else a new one, once room is made for it."""
        current = self.current
        if current is not None and current != problem_id:
            close_partner(self.contexts[current])  # only the current problem keeps a live baseline (GPU memory)
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
        kept = self.contexts
        while kept and (len(kept) >= KEPT_PROBLEMS or self.memory_share() > self.memory_bound
                        or self.free_share() < FREE_MEMORY_FLOOR_SHARE):
            dropped = next(iter(kept)) if len(kept) >= KEPT_PROBLEMS else \
                max(kept, key=lambda key: held_bytes(kept[key]))  # the first such: least recent
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
        self._reported.add(problem_id)
        return True

    def answered(self, problem_id: str) -> None:
        """An answer of ``problem_id`` was judged with its reference answering throughout."""
        self._reported.discard(problem_id)
