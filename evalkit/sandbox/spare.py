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
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from evalkit.sandbox.launcher import Limits, UntrustedProcess

WORKDIR_PREFIX = "evalkit-judge-"
ARM_WAIT_S = 5.0  # a spare normally arms within tens of milliseconds of its start
STOP_WAIT_S = 0.5  # SIGSTOP lands within microseconds on an idle core


class SpareWorker:
    """One worker started ahead for a judge's next answer (one judge thread uses it; not thread-safe)."""

    def __init__(self, limits: Limits, env: dict[str, str]) -> None:
        self._limits, self._env = limits, env
        self._next: UntrustedProcess | None = None
        self._starter: ThreadPoolExecutor | None = None  # the thread every worker here is started by

    def take(self, extensions_dir: Path | None) -> UntrustedProcess:
        """A started worker for the answer whose extensions live in ``extensions_dir`` (the spare when it is still
        alive, else a fresh one), and the next spare starts. The caller removes its ``workdir`` when done."""
        worker, self._next = self._next, None
        if worker is not None and not worker.alive():  # killed meanwhile (a stop signal's clean-up, the OOM killer)
            discard(worker)
            worker = None
        worker = worker or self._start()
        worker.extensions_dir = extensions_dir
        self._next = self._start()
        return worker

    @contextmanager
    def parked(self) -> Iterator[None]:
        """The spare stopped for the duration (wrap every measurement of the judge in it)."""
        spare = self._next
        if spare is not None and not spare.armed(ARM_WAIT_S):  # it could not be stopped safely: not kept
            discard(spare)
            spare = self._next = None
        if spare is not None:
            spare.freeze(settle_s=STOP_WAIT_S)
        try:
            yield
        finally:
            if spare is not None:
                spare.thaw()

    def close(self) -> None:
        if self._next is not None:
            self._next.kill()  # it never had work: nothing to wait for (asked politely, it may still be importing)
            discard(self._next)
            self._next = None
        if self._starter is not None:
            self._starter.shutdown(wait=True)
            self._starter = None

    def _start(self) -> UntrustedProcess:
        if self._starter is None:
            self._starter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="evalkit-spare-starter")
        workdir = Path(tempfile.mkdtemp(prefix=WORKDIR_PREFIX))
        return self._starter.submit(UntrustedProcess, workdir, self._limits, self._env).result()


def discard(worker: UntrustedProcess) -> None:
    """End a worker and remove its folder."""
    worker.close()
    shutil.rmtree(worker.workdir, ignore_errors=True)
