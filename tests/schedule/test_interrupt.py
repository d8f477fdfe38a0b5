"""Stopping a run on a signal: ``evalkit.schedule.interrupt.interruptible`` and ``score()`` off the main thread."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from conftest import ROOT, prose_answer_options
from evalkit.schedule.interrupt import Interrupted, interruptible
from evalkit.schedule.local import score


def _deliver(signum: int) -> None:
    """Send ``signum`` to this process and give Python the moment it needs to run the handler."""
    os.kill(os.getpid(), signum)
    time.sleep(2)  # the handler raises long before this ends


STOP_SIGNALS = [("SIGINT", 130), ("SIGTERM", 143), ("SIGHUP", 129)]


@contextmanager
def disposition(signum: int, handler: object) -> Iterator[None]:
    """``signum``'s disposition set to ``handler`` for the block, whatever this process inherited: under ``nohup``
    SIGHUP arrives ignored, and in a background job of a shell without job control SIGINT does."""
    inherited = signal.signal(signum, handler)  # type: ignore[arg-type]
    try:
        yield
    finally:
        signal.signal(signum, inherited)


@pytest.mark.parametrize(("name", "code"), STOP_SIGNALS)
def test_a_stop_signal_cleans_up_raises_and_restores_the_handler(name: str, code: int) -> None:
    signum = getattr(signal, name)
    reached: list[int] = []  # the caller's own handler: a signal interruptible failed to catch lands here

    def before(received: int, frame: object) -> None:
        reached.append(received)

    cleaned: list[str] = []
    with disposition(signum, before):
        with pytest.raises(Interrupted) as caught:
            with interruptible(lambda: cleaned.append("killed")):
                assert signal.getsignal(signum) is not before
                _deliver(signum)
        assert signal.getsignal(signum) is before
    assert cleaned == ["killed"] and reached == []
    assert caught.value.signum == signum and caught.value.exit_code == code
    assert caught.value.signal_name == name


def test_later_signals_are_ignored_while_the_run_unwinds() -> None:
    cleaned: list[str] = []
    with disposition(signal.SIGTERM, signal.SIG_DFL), interruptible(lambda: cleaned.append("killed")):
        with pytest.raises(Interrupted):
            _deliver(signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)  # would kill pytest if it were not ignored
        time.sleep(0.2)
    assert cleaned == ["killed"]


@pytest.mark.parametrize("name", [name for name, _ in STOP_SIGNALS])
def test_a_signal_the_process_ignores_stays_ignored(name: str) -> None:
    signum = getattr(signal, name)
    cleaned: list[str] = []
    with disposition(signum, signal.SIG_IGN):
        with interruptible(lambda: cleaned.append("killed")):
            assert signal.getsignal(signum) == signal.SIG_IGN
            os.kill(os.getpid(), signum)
            time.sleep(0.2)
        assert signal.getsignal(signum) == signal.SIG_IGN
    assert cleaned == []


def _ignore_stop_signals() -> None:
    for name in ("SIGINT", "SIGHUP"):  # what a background job and nohup hand down
        signal.signal(getattr(signal, name), signal.SIG_IGN)


def test_the_signal_tests_hold_when_pytest_starts_with_sighup_and_sigint_ignored(tmp_path: Path) -> None:
    """The tests above hold in a pytest that inherited SIGHUP ignored (``nohup``) and SIGINT ignored (a background
    job of a shell without job control): each sets the disposition it tests."""
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0",
                           "--basetemp", str(tmp_path / "pytest"), "-k", "cleans_up or stays_ignored or unwinds",
                           str(Path(__file__).relative_to(ROOT))],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, preexec_fn=_ignore_stop_signals)
    assert done.returncode == 0 and "7 passed" in done.stdout, done.stdout + done.stderr


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
    options = prose_answer_options(tmp_path)
    results: list[object] = []
    thread = threading.Thread(target=lambda: results.append(score(options)))
    thread.start()
    thread.join(timeout=120)
    assert len(results) == 1, "score() raised or hung off the main thread"
    outcome = results[0]
    assert outcome.judged == 1 and outcome.counts == {"no_code": 1} and outcome.seed == 7
