"""Trusted side: stopping a scoring run on SIGINT, SIGTERM or SIGHUP.

``interruptible`` installs handlers for the duration of a run (and puts the previous ones back after):
the first of those signals runs a clean-up callback at once (the scheduler kills every sandbox of the
run there) and raises ``Interrupted`` in the main thread, which unwinds the run; later ones are ignored
while the run unwinds. A signal the process ignores (``nohup``'s SIGHUP) stays ignored. Signal
handlers can only be installed from the main thread: called from any other thread, ``interruptible``
installs nothing and the caller's own signal handling applies.
"""

from __future__ import annotations

import logging
import signal
import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterator

logger = logging.getLogger(__name__)


def stop_signals() -> tuple[signal.Signals, ...]:
    """The signals that stop a run: SIGINT (Ctrl-C), SIGTERM, and SIGHUP where the platform has it."""
    names = ("SIGINT", "SIGTERM", "SIGHUP")
    return tuple(getattr(signal, name) for name in names if hasattr(signal, name))


class Interrupted(BaseException):
    """A stop signal arrived during a run. A BaseException, like KeyboardInterrupt, so that no
    ``except Exception`` of the judge mistakes it for a failure of the submission being judged."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.signum = signum
        self.outcome: Any = None  # the scheduler attaches its ScoreOutcome: what was judged before the signal

    @property
    def signal_name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        """The shell's convention for a process ended by a signal: 128 + its number (130 for SIGINT)."""
        return 128 + self.signum


@contextmanager
def interruptible(on_signal: Callable[[], object]) -> Iterator[None]:
    """Within the block, a stop signal calls ``on_signal()`` and raises ``Interrupted`` (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        logger.debug("not the main thread: no signal handlers installed for this run")
        yield
        return
    fired: list[int] = []

    def handler(signum: int, frame: object) -> None:
        if fired:  # the run is already unwinding: let it finish its clean-up
            logger.debug("ignoring %s: the run is already stopping", signal.Signals(signum).name)
            return
        fired.append(signum)
        on_signal()
        raise Interrupted(signum)

    previous: dict[signal.Signals, Any] = {}
    try:
        for signum in stop_signals():
            if signal.getsignal(signum) != signal.SIG_IGN:  # ignored on purpose (nohup, a background job): keep it so
                previous[signum] = signal.signal(signum, handler)
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old if old is not None else signal.SIG_DFL)
