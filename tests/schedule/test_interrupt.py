"""Stopping a run on a signal: ``evalkit.schedule.interrupt.interruptible`` and ``score()`` off the main thread."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from conftest import FIXTURES
from evalkit.schedule.interrupt import Interrupted, interruptible
from evalkit.schedule.local import score
from evalkit.schedule.options import ScoreOptions


def _deliver(signum: int) -> None:
    """Send ``signum`` to this process and give Python the moment it needs to run the handler."""
    os.kill(os.getpid(), signum)
    time.sleep(2)  # the handler raises long before this ends


@pytest.mark.parametrize(("name", "code"), [("SIGINT", 130), ("SIGTERM", 143), ("SIGHUP", 129)])
def test_a_stop_signal_cleans_up_raises_and_restores_the_handler(name: str, code: int) -> None:
    signum = getattr(signal, name)
    before = signal.getsignal(signum)
    cleaned: list[str] = []
    with pytest.raises(Interrupted) as caught:
        with interruptible(lambda: cleaned.append("killed")):
            assert signal.getsignal(signum) is not before
            _deliver(signum)
    assert cleaned == ["killed"]
    assert caught.value.signum == signum and caught.value.exit_code == code
    assert caught.value.signal_name == name
    assert signal.getsignal(signum) is before


def test_later_signals_are_ignored_while_the_run_unwinds() -> None:
    cleaned: list[str] = []
    with interruptible(lambda: cleaned.append("killed")):
        with pytest.raises(Interrupted):
            _deliver(signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)  # would kill pytest if it were not ignored
        time.sleep(0.2)
    assert cleaned == ["killed"]


def test_a_signal_the_process_ignores_stays_ignored() -> None:
    before = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with interruptible(lambda: None):
            assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGHUP)
            time.sleep(0.2)
    finally:
        signal.signal(signal.SIGHUP, before)


def test_off_the_main_thread_no_handler_is_installed() -> None:
    seen: list[object] = []

    def body() -> None:
        with interruptible(lambda: None):
            seen.append(signal.getsignal(signal.SIGTERM))

    before = signal.getsignal(signal.SIGTERM)
    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    assert seen == [before]


def test_score_runs_from_a_thread_that_is_not_the_main_one(tmp_path: Path) -> None:
    answer = tmp_path / "subs" / "api" / "linear_relu" / "prose.txt"
    answer.parent.mkdir(parents=True)
    answer.write_text("No code in this answer, sorry.\n")
    options = ScoreOptions(submissions=tmp_path / "subs", problems_dir=FIXTURES / "judge_problems",
                           out_dir=tmp_path / "report", device="cpu", baselines=(), seed=7,
                           cache_dir=tmp_path / "cache")
    results: list[object] = []
    thread = threading.Thread(target=lambda: results.append(score(options)))
    thread.start()
    thread.join(timeout=120)
    assert len(results) == 1, "score() raised or hung off the main thread"
    outcome = results[0]
    assert outcome.judged == 1 and outcome.counts == {"no_code": 1} and outcome.seed == 7
