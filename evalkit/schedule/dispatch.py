"""Trusted side: the answers waiting for a judge, shared by every batch in flight.

A ``Batch`` is one caller's answers (a ``judge_many``, an ``evalkit score``, an async call): its rows arrive on
its own queue as they are decided, whichever station decides them. Any number of batches may be in flight at
once, from any threads; the stations take built answers from one ``ReadyQueue``. A batch abandoned midway is
cancelled: its answers not yet taken leave the queue (their builds, if not started, are cancelled), an answer a
station holds is ended (its workers killed; a Ray judge lets it finish) and its row dropped, and the stations go on
with the other batches as before.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections import Counter
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Callable

from evalkit.intake.triage import Triage
from evalkit.judge.builder import BuildOutcome
from evalkit.records import ResultRow, Submission

logger = logging.getLogger(__name__)

# A station takes an answer of a problem another station holds only while this many of that problem's answers wait
# built: one for its holder, the rest for whoever is free.
STEAL_FROM = 2


class Batch:
    """One caller's answers: ``expected`` rows, delivered on ``rows`` as they are decided. ``notify`` (optional) is
    called from the deciding thread after each row is queued (an event loop's wake-up)."""

    def __init__(self, notify: Callable[[], None] | None = None) -> None:
        self.rows: queue.Queue[ResultRow] = queue.Queue()
        self.expected = 0
        self.received = 0
        self.cancelled = False
        self._notify = notify
        self._ready: ReadyQueue | None = None

    @property
    def done(self) -> bool:
        return self.received >= self.expected

    def put(self, row: ResultRow) -> None:
        if self.cancelled:
            return
        self.rows.put(row)
        if self._notify is not None:
            try:
                self._notify()
            except Exception:  # noqa: BLE001 - a caller's wake-up never stops the judge thread deciding rows
                logger.exception("waking the caller of a batch failed")

    def next_row(self, timeout_s: float) -> ResultRow | None:
        """The next decided row, or None when none came within ``timeout_s``."""
        try:
            row = self.rows.get(timeout=timeout_s) if timeout_s > 0 else self.rows.get_nowait()
        except queue.Empty:
            return None
        self.received += 1
        return row

    def cancel(self) -> None:
        """Drop what is not yet judged; rows decided from now on are dropped too."""
        self.cancelled = True
        if self._ready is not None:
            self._ready.cancel(self)


@dataclass(eq=False)
class Preparation:
    """A caller's ``prepare_baselines``: the problems whose every baseline a station times (or finds cached), in
    turn with the answers; ``done`` is set (or failed) once it has."""

    problems: list[str]
    done: Future[None] = field(default_factory=Future)


@dataclass(eq=False)
class Item:
    """A built (or building) answer waiting for a judge, and the batch its row goes to."""

    submission: Submission
    early: Triage
    build: Future[BuildOutcome]
    batch: Batch = field(repr=False)


Work = Item | Preparation | tuple[str, str]  # what a station is handed: an answer, a caller's preparation, a baseline


class ReadyQueue:
    """Built answers waiting for a judge; a station takes one of its own problem's first, else one of a problem it
    keeps loaded, else the oldest of a problem no other station holds, else one another station's problem has to
    spare (``_pick_built``).
    A caller's ``Preparation`` goes before them (it waits, as an answer's caller does). While nothing is built, an
    idle station is handed one baseline to time ahead (a problem and a kind, every problem's first kind before any
    second kind), for a problem with an answer still building. Before the first answer comes, one of the baselines
    asked for ``when_idle`` (the problems an Evaluator starts with); the first answer drops the rest (a timing of
    another problem's baseline would freeze its build, and switch the judge away from the problems it holds)."""

    def __init__(self, on_cancel: Callable[[Batch], None] | None = None) -> None:
        self._on_cancel = on_cancel  # ends a cancelled batch's answers already taken (the engine's stations)
        self._items: list[Item] = []
        self._preparations: list[Preparation] = []
        self._ahead: dict[int, list[tuple[str, str]]] = {}  # kind's rank -> (problem, kind) to time ahead
        self._idle: list[tuple[str, str]] = []  # (problem, kind) to time while no answer is queued
        self._changed = threading.Condition()
        self._stopped = False
        self._holding: dict[str, tuple[str, str]] = {}  # station -> (its GPU, the problem it took its last work of)
        self._keeping: dict[str, tuple[str, frozenset[str]]] = {}  # station -> (its GPU, the problems it holds loaded)

    def add(self, item: Item) -> None:
        item.batch._ready = self
        with self._changed:
            self._items.append(item)
            self._idle.clear()  # the answers came: their own problems' baselines are timed ahead from now on
            self._changed.notify_all()
        item.build.add_done_callback(lambda _: self._notify())

    def ahead(self, problem_id: str, kinds: tuple[str, ...]) -> None:
        """Time ``problem_id``'s baselines of ``kinds`` ahead of its answers, when a station would idle."""
        with self._changed:
            for rank, kind in enumerate(kinds):
                self._ahead.setdefault(rank, []).append((problem_id, kind))
            self._changed.notify_all()

    def when_idle(self, problem_id: str, kinds: tuple[str, ...]) -> None:
        """Time ``problem_id``'s baselines of ``kinds`` until the first answer comes (each problem's first kind first)."""
        with self._changed:
            self._idle.extend((problem_id, kind) for kind in kinds)
            self._idle.sort(key=lambda entry: kinds.index(entry[1]) if entry[1] in kinds else len(kinds))
            self._changed.notify_all()

    def prepare(self, problem_ids: list[str]) -> Preparation:
        """Queue a caller's preparation of ``problem_ids``; its ``done`` is set once a station has made it."""
        preparation = Preparation(list(problem_ids))
        with self._changed:
            if self._stopped:
                preparation.done.set_exception(RuntimeError("the judges are closed: nothing can be prepared"))
                return preparation
            self._preparations.append(preparation)
            self._changed.notify_all()
        return preparation

    @property
    def sizes(self) -> dict[str, int]:
        """How many entries each of the queue's containers holds now (what a long run must not grow)."""
        with self._changed:
            return {"items": len(self._items), "preparations": len(self._preparations), "idle": len(self._idle),
                    "ahead": sum(len(entries) for entries in self._ahead.values())}

    def take(self, problem: str | None, station: str = "", gpu: str = "",
             kept: list[str] | tuple[str, ...] = ()) -> Work | None:
        """A caller's preparation, else a built answer, else a (problem, baseline kind) to time ahead, else waits;
        None once stopped. ``station`` names the taker, ``problem`` the problem it holds, ``kept`` every problem it
        holds loaded, ``gpu`` the GPU it shares with other stations ("" for none: ``_pick_built``)."""
        with self._changed:
            self._keeping[station] = (gpu, frozenset(kept))
            while not self._stopped:
                if self._preparations:
                    return self._preparations.pop(0)
                work = self._next_work(problem, station, gpu)
                if work is not None:
                    self._holding[station] = (gpu, work.submission.problem if isinstance(work, Item) else work[0])
                    return work
                self._changed.wait()
            return None

    def _next_work(self, problem: str | None, station: str, gpu: str) -> Item | tuple[str, str] | None:
        """A built answer (``_pick_built``), else a baseline to time ahead, else None: taken off the queue."""
        pick = self._pick_built(problem, station, gpu)
        if pick is not None:
            self._items.remove(pick)
            return pick
        waiting = {item.submission.problem for item in self._items}  # builds still running
        for rank in sorted(self._ahead):
            entries = self._ahead[rank]
            while entries:
                ahead = entries.pop(0)
                if ahead[0] in waiting:
                    return ahead
        return self._idle.pop(0) if self._idle else None

    def _pick_built(self, problem: str | None, station: str, gpu: str) -> Item | None:
        """The built answer ``station`` judges next: one of ``problem``'s (the one it holds), else one of a problem it
        keeps loaded that no other station of its ``gpu`` holds, else one of a problem no other station of its
        ``gpu`` holds or keeps, else one no other holds, else one of a problem with answers enough waiting for two
        stations. So a judge goes back to the problems it loaded before loading another (an RL step's problems come
        again each step), and the judges of one GPU hold different problems, not each of them all of them (each
        problem keeps GPU memory while held: docs/judge.md, A judge's GPU memory), yet none idles while answers
        wait. Stations that share no GPU take their kept problems' answers first, else the oldest."""
        built = [item for item in self._items if item.build.done()]
        held = {held for name, (on, held) in self._holding.items() if name != station and gpu and on == gpu}
        mine = self._keeping.get(station, ("", frozenset()))[1] - held
        theirs = {kept for name, (on, problems) in self._keeping.items() if name != station and gpu and on == gpu
                  for kept in problems}
        taken_by_others = held | theirs
        waiting = Counter(item.submission.problem for item in built)
        return next((i for i in built if i.submission.problem == problem), None) \
            or next((i for i in built if i.submission.problem in mine), None) \
            or next((i for i in built if i.submission.problem not in taken_by_others), None) \
            or next((i for i in built if i.submission.problem not in held), None) \
            or next((i for i in built if waiting[i.submission.problem] >= STEAL_FROM), None)

    def cancel(self, batch: Batch) -> None:
        with self._changed:
            dropped = [item for item in self._items if item.batch is batch]
            self._items = [item for item in self._items if item.batch is not batch]
        for item in dropped:
            item.build.cancel()  # not started: never built; running: finishes, and is cached for next time
        if self._on_cancel is not None:
            self._on_cancel(batch)

    def stop(self) -> None:
        with self._changed:
            self._stopped = True
            preparations, self._preparations = self._preparations, []
            self._changed.notify_all()
        for preparation in preparations:
            preparation.done.set_exception(RuntimeError("the judges closed before these baselines were prepared"))

    def _notify(self) -> None:
        with self._changed:
            self._changed.notify_all()
