"""Trusted side: a judge station in a process of its own, so several judges time at once without sharing an
interpreter (and its lock) and each sees only its own GPU.

The scheduler starts ``python -m evalkit.schedule.judge_process FD`` with ``CUDA_VISIBLE_DEVICES`` set to
the judge's GPU and its affinity set to the judge's cores, and talks to it over a socket pair, in the messages
``judge_messages`` declares (pickled: both ends are evalkit's own code; no submission code runs in either):
``ProcessStation`` is the scheduler's end (a ``judge_client.MessageStation``), ``serve`` the judge's (a
``judge_server.JudgeServer``); a measurement's Hold / Release and Progress travel inside a request.

A judge process that dies turns the answer it was judging into a ``judge_failed`` row and is started again.
"""

from __future__ import annotations

import faulthandler
import logging
import os
import pickle  # noqa: S403 - both ends are evalkit's trusted processes
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from contextlib import ExitStack, contextmanager, suppress
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Callable, Iterator

from evalkit.records import ResultRow
from evalkit.report_folder import ReportFolder
from evalkit.sandbox.freezer import BuildFreezer
from evalkit.schedule import judge_messages as m
from evalkit.schedule.judge_client import MessageStation
from evalkit.schedule.judge_messages import StationSpec
from evalkit.schedule.judge_server import JudgeServer, open_device_judge
from evalkit.schedule.placement import JudgeSlot, host_device, visible_devices_entry

logger = logging.getLogger(__name__)

EXIT_WAIT_S = 10.0
# The scheduler's word to end the answer in hand (a ``Cancel`` in the process's cancel file): a signal, since the judge
# process reads its socket only between answers and at a measurement's edges, and a hanging answer reaches neither.
CANCEL_SIGNAL = signal.SIGUSR1
# At this signal a judge process, or ``evalkit serve``, writes every thread's stack to its stderr (the run's log) and
# goes on: what a run that seems stuck is doing, seen without stopping it (``kill -USR2 PID``; docs/rl.md).
STACKS_SIGNAL = signal.SIGUSR2
# torch warns at import that NumPy (no dependency of evalkit) is missing; the judge process imports torch before
# any code of its own runs, so the filter goes on its command line.
NUMPY_WARNING_IGNORED = "ignore:Failed to initialize NumPy:UserWarning"


class JudgeProcessDied(RuntimeError):
    """The judge process ended without answering (it crashed, or was killed)."""


class ProcessStation(MessageStation):
    """A judge in a process of its own (the messages pickled over a socket pair); requests block until answered."""

    def __init__(self, slot: JudgeSlot, spec: StationSpec, freezer: BuildFreezer | None,
                 progress: Callable[[str], None] | None = None, report: ReportFolder | None = None) -> None:
        super().__init__(slot.name, spec, report)
        self.slot, self.freezer = slot, freezer
        self._progress = progress or (lambda text: None)
        self._proc: subprocess.Popen | None = None
        self._conn: Connection | None = None
        self._rows: Connection | None = None  # the second socket: rows decided apart from the replies (``Decided``)
        self._cancel_file: Path | None = None  # the key of the answer to end, read on CANCEL_SIGNAL

    def abandon(self) -> None:
        """Kill the judge process now, mid-answer or not, and start no other: the run is stopping."""
        self._abandoned = True
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()

    def close(self) -> None:
        """Ask the judge process to exit; kill it if it cannot be asked or does not go (it may be gone already: a
        signal that stops the run reaches it too)."""
        proc = self._proc
        if proc is None:
            return
        try:
            self._send(m.Exit())
            proc.wait(timeout=EXIT_WAIT_S)
        except (OSError, subprocess.TimeoutExpired, JudgeProcessDied):
            proc.kill()
            proc.wait()
        self._proc, self._conn, self._rows = None, None, None
        self._forget_cancel_file()

    def _forget_cancel_file(self) -> None:
        cancel_file, self._cancel_file = self._cancel_file, None
        if cancel_file is not None:
            cancel_file.unlink(missing_ok=True)

    def _running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _cancel_in_judge(self, key: str) -> None:
        proc, cancel_file = self._proc, self._cancel_file
        if proc is None or cancel_file is None or proc.poll() is not None:
            return
        cancel_file.write_text(m.Cancel(key).to_text())
        with suppress(ProcessLookupError):
            os.kill(proc.pid, CANCEL_SIGNAL)

    def _open(self) -> None:
        parent, child = socket.socketpair()
        rows_parent, rows_child = socket.socketpair()
        handle, name = tempfile.mkstemp(prefix="evalkit-judge-cancel-")
        os.close(handle)
        self._cancel_file = Path(name)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(_import_path())}
        if self.slot.gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = visible_devices_entry(self.slot.gpu, os.environ.get("CUDA_VISIBLE_DEVICES"))
        child_fd, rows_fd = child.detach(), rows_child.detach()
        self._proc = subprocess.Popen([sys.executable, "-W", NUMPY_WARNING_IGNORED, "-m", "evalkit.schedule.judge_process",
                                       str(child_fd), name, str(rows_fd)],
                                      pass_fds=(child_fd, rows_fd), env=env, stdin=subprocess.DEVNULL)
        os.close(child_fd)
        os.close(rows_fd)
        if self.slot.cpus:
            os.sched_setaffinity(self._proc.pid, self.slot.cpus)
        self._conn = Connection(parent.detach())
        self._rows = rows = Connection(rows_parent.detach())
        threading.Thread(target=self._read_rows, args=(rows,), name=f"evalkit-rows-{self.slot.name}",
                         daemon=True).start()

    def _read_rows(self, rows: Connection) -> None:
        """The rows the judge process decides apart from its replies, until it ends; then, if it is still this
        station's judge, every row awaited from it is lost."""
        try:
            while True:
                self._file_decided(pickle.loads(rows.recv_bytes()))  # noqa: S301 - our own judge process
        except (EOFError, OSError, m.WrongMessage) as err:
            if self._rows is rows:
                self._lose_decided(JudgeProcessDied(f"judge process {self.slot.name}: its rows' socket ended ({err})"))
        finally:
            rows.close()

    def _exchange(self, message: Any) -> Any:
        """Send ``message``; its reply, once the judge's Hold / Release / Progress on the way are served."""
        self._send(message)
        with ExitStack() as frozen:
            while True:
                reply = m.expect(self._receive(), *m.TO_SCHEDULER)
                if isinstance(reply, m.Hold):
                    if self.freezer is not None:
                        frozen.enter_context(self.freezer.timing(
                            device=host_device(self.slot, os.environ.get("CUDA_VISIBLE_DEVICES"))))
                    self._send(m.Held())
                elif isinstance(reply, m.Release):
                    frozen.close()
                    self._send(m.Released())
                elif isinstance(reply, m.Progress):
                    self._progress(reply.text)
                else:
                    return reply

    def _lost(self, why: str) -> JudgeProcessDied:
        return self._died(why)

    def _send(self, message: Any) -> None:
        try:
            self._conn.send_bytes(pickle.dumps(message))
        except (OSError, AttributeError) as err:
            raise self._died(f"could not send to it ({err})") from err

    def _receive(self) -> Any:
        try:
            return pickle.loads(self._conn.recv_bytes())  # noqa: S301 - our own judge process
        except (EOFError, OSError) as err:
            raise self._died(f"it stopped answering ({err})") from err

    def _died(self, why: str) -> JudgeProcessDied:
        code = self._proc.poll() if self._proc else None
        if self._proc is not None and code is None:
            self._proc.kill()
            self._proc.wait()
        self._proc, self._conn, self._rows = None, None, None
        self._forget_cancel_file()
        died = JudgeProcessDied(f"judge process {self.slot.name} ended (exit code {code}): {why}")
        self._lose_decided(died)
        return died


def _import_path() -> list[str]:
    """Where the judge process finds evalkit: this process's own import path (a checkout, a test's rootdir)."""
    here = str(Path(__file__).resolve().parents[2])
    inherited = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return [here, *inherited]


class _Channel:
    """The judge process's end of the socket pair."""

    def __init__(self, fd: int) -> None:
        self.conn = Connection(fd)

    def send(self, message: Any) -> None:
        self.conn.send_bytes(pickle.dumps(message))

    def receive(self) -> Any:
        return pickle.loads(self.conn.recv_bytes())  # noqa: S301 - the scheduler, our own process

    @contextmanager
    def quiet(self) -> Iterator[None]:
        """A measurement: the scheduler freezes the builds for as long as it lasts."""
        self.send(m.Hold())
        m.expect(self.receive(), m.Held)
        try:
            yield
        finally:
            self.send(m.Release())
            m.expect(self.receive(), m.Released)


def dump_stacks_on_signal() -> None:
    """From now on, ``STACKS_SIGNAL`` writes every thread's stack of this process to its stderr."""
    faulthandler.register(STACKS_SIGNAL, all_threads=True)


def serve(fd: int, cancel_file: str, rows_fd: int) -> int:
    """The judge process: a ``JudgeServer`` answering the scheduler's messages until Exit (or a refused Start);
    on ``CANCEL_SIGNAL``, the answer named in ``cancel_file`` is ended if it is in hand. Rows decided apart from the
    replies (``overlap``) go on ``rows_fd``, from the thread that decided them."""
    channel, rows, rows_sent = _Channel(fd), _Channel(rows_fd), threading.Lock()

    def deliver(key: str, row: ResultRow | None) -> None:
        with rows_sent, suppress(OSError):  # the scheduler is gone: nobody waits for the row
            rows.send(m.Decided(key, row))
    server = JudgeServer(lambda spec: open_device_judge(spec, quiet=channel.quiet, deliver=deliver,
                                                   progress=lambda text: channel.send(m.Progress(text))))

    def cancel(signum: int, frame: Any) -> None:  # runs in this thread, between two bytecodes; takes no lock
        if server.device_judge is not None:
            with suppress(OSError, m.WrongMessage):
                server.device_judge.cancel(m.Cancel.from_text(Path(cancel_file).read_text()).key)
    signal.signal(CANCEL_SIGNAL, cancel)
    dump_stacks_on_signal()
    while True:
        try:
            message = channel.receive()
        except EOFError:  # the scheduler is gone: end this judge's workers (its spare) all the same
            message = m.Exit()
        reply = server.handle(message)
        with suppress(OSError):  # the scheduler is gone, or stops reading once it sent Exit
            channel.send(reply)
        if isinstance(message, m.Exit) or isinstance(reply, m.Refused):
            return 1 if isinstance(reply, m.Refused) else 0


if __name__ == "__main__":
    logging.basicConfig(level=os.environ.get("EVALKIT_LOG_LEVEL", "WARNING"), format="evalkit judge: %(message)s")
    sys.exit(serve(int(sys.argv[1]), sys.argv[2], int(sys.argv[3])))
