"""Trusted side: a device judge's answers in flight two at a time, so that one answer's float64 checks, kernel profile
and close run beside the next answer's setup, load and correctness trials; nothing ever runs beside a timing.

Each answer is judged in a lane: a thread of its own, with a GPU gate of its own (``gpu_gate``: one gate serves one
thread). Its *front* (setup, load, correctness, its timed window) is judged while the caller waits; once its timing is
over (``Judge.examine``'s ``timed``), the caller is let go and the lane goes on alone with its *tail*; the row is then
delivered (``deliver``) when decided. A timing waits until no tail runs (``wait_for_tails``), and a tail never times:
so at most one tail and one front run at once. A tail that meets what only a judge alone may do (unload problems
after the GPU ran out of memory, close a reference that failed) gives the answer back to be judged again alone
(``JudgeAgainAlone``), never touching what the next answer's front uses.
"""

from __future__ import annotations

import logging
import threading
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, TypeVar

logger = logging.getLogger(__name__)

Gate = TypeVar("Gate")
Row = TypeVar("Row")
Deliver = Callable[[str, Any], None]  # (answer key, its row, or None: to be judged again alone)


class JudgeAgainAlone(Exception):
    """Raised in a tail where judging the answer on would change what the other lane uses: the answer is judged again
    with nothing beside it."""


@dataclass(eq=False)
class _Handoff:
    """Between the caller and a lane: the row when decided before the tail began, and the moment either happened."""

    front_over: threading.Event = field(default_factory=threading.Event)
    row: Any = None
    tail: bool = False
    error: BaseException | None = None  # what the front raised: raised again in the caller


class Lanes(Generic[Gate]):
    """The lanes of one device judge, each with one of ``gates`` (two: one front and one tail at a time); ``default``
    is the gate of any other thread (never a lane's: a gate serves one thread)."""

    def __init__(self, default: Gate, gates: list[Gate]) -> None:
        self._default = default  # the gate of the caller's own thread (loads, baselines, answers judged alone)
        self._free = list(gates)
        self._changed = threading.Condition()
        self._tails: dict[str, tuple[str, str]] = {}  # answer key -> (its problem, its build), for each tail running
        self._local = threading.local()

    @property
    def gate(self) -> Gate:
        """The gate of the lane the calling thread judges in (the first gate outside any lane)."""
        return getattr(self._local, "gate", self._default)

    def timing_over(self) -> None:
        """Called once the answer the calling lane judges is timed: the caller is let go, the tail goes on (nothing
        outside a lane)."""
        timed = getattr(self._local, "timed", None)
        if timed is not None:
            self._local.timed = None
            timed()

    def in_tail(self) -> bool:
        """Whether the calling thread is a lane past its answer's timing."""
        return getattr(self._local, "tail", False)

    def tail_problems(self) -> set[str]:
        """The problems whose answers' tails run now: their references are in use, not to be unloaded."""
        with self._changed:
            return {problem for problem, _ in self._tails.values()}

    def hold(self, stack: ExitStack, then: Callable[[], AbstractContextManager[Any]]) -> None:
        """What the calling lane holds until its timing is over (its answer's whole share of GPU memory): closed by
        ``timed``, which enters ``then()`` (the tail's own smaller share) for the tail. Nothing outside a lane: a
        thread that is no lane would keep ``then``'s judge (its problem's tensors) alive past its unloading."""
        if getattr(self._local, "timed", None) is not None:
            self._local.front_held = (stack, then)

    def wait_for_tails(self, build: str | None = None) -> None:
        """Until no tail runs (before a timing, or anything done alone), or, given ``build``, none of an answer of that
        build: a judged worker holds its build's cache entry for its life (``remains.entry_lock``), so the next
        answer's worker of the same build would keep the tail's profile waiting, while its own timing waited for the
        tail. A tail never waits for itself."""
        if self.in_tail():
            raise RuntimeError("a tail may not time or unload problems: judge its answer again alone")
        with self._changed:
            self._changed.wait_for(lambda: not any(build in (None, built) for _, built in self._tails.values()))

    def run(self, key: str, problem: str, build: str, work: Callable[[], Row], deliver: Deliver) -> Row | None:
        """``work()`` in a lane of its own: its row when decided before it called ``timing_over``, else None (the row
        goes to ``deliver`` once decided; None there when the tail gave the answer back: ``JudgeAgainAlone``).
        ``build`` names the answer's build (its cache entry): a tail of the same build is waited for first."""
        self.wait_for_tails(build)
        with self._changed:
            gate = self._free.pop()
        handoff = _Handoff()
        lane = threading.Thread(target=self._lane, args=(handoff, gate, key, (problem, build), work, deliver),
                                name=f"evalkit-lane-{key[:40]}", daemon=True)
        lane.start()
        handoff.front_over.wait()
        if handoff.error is not None:
            raise handoff.error
        return None if handoff.tail else handoff.row

    def _lane(self, handoff: _Handoff, gate: Gate, key: str, tail: tuple[str, str],
              work: Callable[[], Row], deliver: Deliver) -> None:
        self._local.gate, self._local.tail = gate, False
        with ExitStack() as tail_held:
            def timed() -> None:
                front_held = getattr(self._local, "front_held", None)
                if front_held is not None:
                    front_held[0].close()
                    tail_held.enter_context(front_held[1]())
                with self._changed:
                    self._tails[key] = tail
                self._local.tail = handoff.tail = True
                handoff.front_over.set()

            self._local.timed = timed
            row: Row | None = None
            try:
                row = work()
            except JudgeAgainAlone:
                logger.info("%s: judged again alone", key)
            except BaseException as err:  # noqa: BLE001 - a lane never dies silently
                if handoff.tail:  # its answer is judged again alone
                    logger.exception("%s: its lane failed after its timing; judged again alone", key)
                else:
                    handoff.error = err
            finally:
                with self._changed:
                    self._tails.pop(key, None)
                    self._free.append(gate)
                    self._changed.notify_all()
        if handoff.tail:
            deliver(key, row)
        else:
            handoff.row = row
            handoff.front_over.set()
