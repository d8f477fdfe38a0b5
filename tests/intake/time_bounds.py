"""Test helpers (no side of the trust boundary): timing a call on adversarial input, and stopping it when it hangs.

A call's time is the CPU time of the calling thread (``time.thread_time``), not the wall clock: on a loaded machine the
wall clock of a linear scan grew past QUICK_S while its CPU time did not, and a test must not fail for the
machine's load (and not the process's either: the session's prebuild may run in another of its threads,
``tests/conftest.py``). A call past HANG_S of wall time is interrupted (the ``re`` engine checks for signals, and a blocked ``open`` is retried
only after the handler runs), so a regression to a backtracking pattern fails the test instead of
hanging the suite.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from typing import Any, TypeVar

QUICK_S = 2.0  # CPU seconds, generous for the inputs these tests build: linear code takes far less
HANG_S = 20.0
MAX_GROWTH = 8.0  # four times the input: linear code takes about 4x, quadratic code 16x
_FLOOR_S = 0.01  # a smaller time is noise: the growth is taken against at least this

T = TypeVar("T")


class StillRunning(Exception):
    """The timed call ran past HANG_S."""


def _stop(signum: int, frame: Any) -> None:
    raise StillRunning(f"still running after {HANG_S:.0f} s: it hangs on this input")


def timed(call: Callable[[], T]) -> tuple[T, float]:
    """What ``call()`` returns and the CPU seconds it took; StillRunning when it runs over HANG_S of wall time."""
    previous = signal.signal(signal.SIGALRM, _stop)
    signal.setitimer(signal.ITIMER_REAL, HANG_S)
    start = time.thread_time()
    try:
        return call(), time.thread_time() - start
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def growth(function: Callable[[Any], object], make_input: Callable[[int], Any], n: int, rounds: int = 3) -> float:
    """How many times longer ``function`` takes on ``make_input(4 * n)`` than on ``make_input(n)``.

    Each size's time is its best over every call made. The two sizes take turns, so a burst of load slows
    both; a round is added only while the ratio is still over MAX_GROWTH (an unloaded run showed 5.9 for
    linear code once in 39 ratios, a loaded CI run 8.06): more calls only bring each best closer to the
    true time, so quadratic code stays near 16x however many rounds it gets.
    """
    small, big = make_input(n), make_input(4 * n)
    best_small = best_big = float("inf")
    ratio = float("inf")
    for _ in range(rounds):
        for _ in range(3):
            best_small = min(best_small, timed(lambda: function(small))[1])
            best_big = min(best_big, timed(lambda: function(big))[1])
        ratio = best_big / max(best_small, _FLOOR_S)
        if ratio < MAX_GROWTH:
            break
    return ratio
