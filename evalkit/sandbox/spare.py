"""Trusted side: a judge's next worker, started while the judge is still busy with the current answer.

Starting a worker (Python, then torch) takes seconds, and a judge paid them on every answer, on its critical
path. ``SpareWorker`` keeps one worker started ahead: it imports torch while the judge checks the current
answer or waits for builds, and it is stopped (SIGSTOP, ``parked``) whenever the judge measures anything,
so it never runs beside a timing.

Until it is handed an answer, a spare owns nothing and runs nothing of anyone's: its folder stays the
judge's (``UntrustedProcess`` hands folders to the sandbox user only with the setup request), so the answer
being judged meanwhile cannot plant files there, and it has loaded no submission code.

Workers die with the judge through a parent-death signal, which the kernel ties to the *thread* that started
them. Spares are therefore started by one thread of their own that lives as long as the ``SpareWorker``
(judge threads come and go with each batch), and a spare is stopped only once it has armed that signal.
"""

from __future__ import annotations

import shutil
import tempfile
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Callable, Iterator, TypeVar

from evalkit.sandbox.launcher import Limits, UntrustedProcess, WorkerGone
from evalkit.sandbox.processes import pin_threads
from evalkit.sandbox.programs import ANSWER_WORKER, Program

T = TypeVar("T")

WORKDIR_PREFIX = "evalkit-judge-"
ARM_WAIT_S = 5.0  # a spare normally arms within tens of milliseconds of its start


class SpareWorker:
    """Workers started ahead for a judge's next answers, ``count`` of them (a second one is ready when answers
    come back to back: a worker's start pauses whenever the judge measures, so one started with the current
    answer may not be ready for the next). One judge thread uses it; not thread-safe."""

    def __init__(self, limits: Limits, env: dict[str, str], count: int = 1, program: Program = ANSWER_WORKER,
                 start_cpus: tuple[int, ...] | None = None) -> None:
        self._env, self._count, self._program = env, count, program
        # Started on ``start_cpus`` (more cores than the judge's: a start on the judge's own cores slowed the judge
        # and the worker it was timing), then moved onto ``limits.cpus`` when taken.
        self._limits = replace(limits, cpus=start_cpus) if start_cpus and limits.cpus else limits
        self._pin_to = limits.cpus if start_cpus and limits.cpus else None
        self._spares: deque[UntrustedProcess] = deque()  # oldest first
        self._starter: ThreadPoolExecutor | None = None  # the thread every worker here is started by
        self._stopped = False  # set by ``stop`` (any thread): no worker is started from then on

    def take(self, extensions_dir: Path | None) -> UntrustedProcess:
        """A started worker for the answer whose extensions live in ``extensions_dir`` (the oldest spare still
        alive, else a fresh one); spares start to replace it. The caller removes its ``workdir`` when done."""
        worker = None
        while worker is None and self._spares:
            worker = self._spares.popleft()
            if not worker.alive():  # killed meanwhile (a stop signal's clean-up, the OOM killer)
                discard(worker)
                worker = None
        worker = worker or self._start()
        if self._pin_to:
            pin_threads(worker.pid, self._pin_to)
        worker.extensions_dir = extensions_dir
        self.fill()
        return worker

    def fill(self) -> None:
        """Start spares until ``count`` are (a judge's first answer then finds one started, as later ones do)."""
        while len(self._spares) < self._count and not self._stopped:
            self._spares.append(self._start())

    def keep(self, count: int) -> None:
        """From now on keep at least ``count`` started ahead (a kind of worker a judge needs only once it has
        needed one)."""
        self._count = max(self._count, count)

    @contextmanager
    def parked(self) -> Iterator[None]:
        """Every spare stopped for the duration (wrap every measurement of the judge in it)."""
        for spare in [s for s in self._spares if not s.armed(ARM_WAIT_S)]:  # could not be stopped safely: not kept
            self._spares.remove(spare)
            discard(spare)
        stopped = []
        for spare in list(self._spares):
            try:
                spare.freeze()
                stopped.append(spare)
            except WorkerGone:  # it could not be stopped, so it was killed: not kept
                self._spares.remove(spare)
                discard(spare)
        try:
            yield
        finally:
            for spare in stopped:
                spare.thaw()

    def close(self) -> None:
        spares, self._spares = list(self._spares), deque()
        at_once(_end_idle, spares)
        if self._starter is not None:
            self._starter.shutdown(wait=True)
            self._starter = None

    def stop(self) -> None:
        """Start no worker from now on (any thread may call it: its judge is being abandoned); ``take`` raises."""
        self._stopped = True

    def _start(self) -> UntrustedProcess:
        if self._stopped:
            raise RuntimeError("this judge is closing: it starts no more workers")
        if self._starter is None:
            self._starter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="evalkit-spare-starter")
        workdir = Path(tempfile.mkdtemp(prefix=WORKDIR_PREFIX))
        return self._starter.submit(UntrustedProcess, workdir, self._limits, self._env,
                                    program=self._program).result()


def discard(worker: UntrustedProcess) -> None:
    """End a worker and remove its folder."""
    worker.close()
    shutil.rmtree(worker.workdir, ignore_errors=True)


def _end_idle(spare: UntrustedProcess) -> None:
    spare.kill()  # it never had work: nothing to wait for (asked politely, it may still be importing)
    discard(spare)


def at_once(end: Callable[[T], object], things: list[T]) -> None:
    """``end`` each of ``things``, each in a thread of its own: a GPU worker takes a moment to exit (its CUDA
    context goes with it), and a judge closing waited for its workers one after the other."""
    if len(things) <= 1:
        for thing in things:
            end(thing)
        return
    with ThreadPoolExecutor(len(things), thread_name_prefix="evalkit-close") as pool:
        for done in [pool.submit(end, thing) for thing in things]:
            done.result()
