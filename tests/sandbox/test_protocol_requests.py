"""The judge's requests to a worker: declared types with a version the worker checks before any submission code
runs; a request of another type or version is refused, and the worker says so and exits (never a verdict)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
import os
import pickle
import re
import socket
import subprocess
import sys
from multiprocessing.connection import Connection

import pytest

from conftest import ROOT
from evalkit.sandbox import protocol
from evalkit.sandbox.protocol import Op, Request, RequestRefused, read_request, setup_request
from evalkit.sandbox.untrusted.worker import HARNESS_FAILED_EXIT, REFUSED_EXIT


def test_every_request_the_judge_makes_is_one_the_worker_reads() -> None:
    setup = setup_request("judge", "answer.py", "cpu", {"memory_bytes": 1}, init_inputs=[3], batch=2)
    assert read_request(setup, setup=True) is setup
    completed = setup.completed("/ext", (61000, 61000))
    assert completed.limits == {"memory_bytes": 1, "run_as": (61000, 61000)} and completed.extensions_dir == "/ext"
    assert setup.limits == {"memory_bytes": 1}, "completing a setup leaves the judge's own copy alone"
    for request in (protocol.simple_request(Op.LOAD), protocol.simple_request(Op.PROFILE),
                    protocol.simple_request(Op.EXIT), protocol.nonce_request(Op.PING, 7),
                    protocol.nonce_request(Op.CALL, 8, calls=3)):
        assert read_request(request) is request


@pytest.mark.parametrize(("message", "setup", "why"), [
    ({"op": "setup", "mode": "judge"}, True, "expected a SetupRequest, got dict"),
    (Request(Op.LOAD), True, "expected a SetupRequest, got Request"),
    (setup_request("judge", "a.py", "cpu", {}), False, "expected a Request, got SetupRequest"),
    (Request(Op.LOAD, version=protocol.REQUEST_VERSION + 1), False, "two versions of evalkit"),
    (dataclasses.replace(setup_request("judge", "a.py", "cpu", {}), version=0), True, "two versions of evalkit"),
    (dataclasses.replace(setup_request("judge", "a.py", "cpu", {}), mode="profile"), True, "mode 'profile'"),
    (Request(Op.CALL), False, "call with nonce None"),
    (Request(Op.CALL, nonce=1, calls=0), False, "calls 0"),
    (Request("format_disk"), False, "unknown request 'format_disk'"),
    # a field of another type than declared, named with both types
    (dataclasses.replace(setup_request("judge", "a.py", "cpu", {}), batch="2"), True,
     "SetupRequest.batch: expected int, got str"),
    (dataclasses.replace(setup_request("judge", "a.py", "cpu", {}), limits=[("memory_bytes", 1)]), True,
     "SetupRequest.limits: expected dict[str, Any], got list"),
    (dataclasses.replace(setup_request("judge", "a.py", "cpu", {}), limits={1: 2}), True,
     "SetupRequest.limits key 1: expected str, got int"),
    (dataclasses.replace(setup_request("judge", "a.py", "cpu", {}), init_inputs=[3]), True,
     "SetupRequest.init_inputs: expected bytes, got list"),
    (dataclasses.replace(setup_request("judge", "a.py", "cpu", {}), inputs=()), True,
     "SetupRequest.inputs: expected list[Any], got tuple"),
    (Request(Op.CALL, nonce="7"), False, "Request.nonce: expected int | None, got str"),
    (Request(Op.PING, nonce=True), False, "Request.nonce: expected int | None, got bool"),
    (Request(Op.CALL, nonce=1, calls=2.0), False, "Request.calls: expected int | None, got float"),
    (Request(b"load"), False, "Request.op: expected str, got bytes"),
])
def test_a_request_of_another_type_or_version_is_refused(message: object, setup: bool, why: str) -> None:
    with pytest.raises(RequestRefused, match=re.escape(why)):
        read_request(pickle.loads(pickle.dumps(message)), setup=setup)


def test_every_request_round_trips_as_the_worker_reads_it() -> None:
    setup = setup_request("judge", "a.py", "cpu", {"memory_bytes": 1}, init_inputs=[3], inputs=[{"kind": "shm"}],
                          outputs=[{"kind": "shm"}], fd_count=2, batch=2, dtype="bfloat16")
    requests = [setup.completed("/ext", (61000, 61000)), protocol.simple_request(Op.LOAD),
                protocol.nonce_request(Op.PING, 2**63), protocol.nonce_request(Op.CALL, 8, calls=3)]
    for request in requests:
        assert read_request(pickle.loads(pickle.dumps(request)), setup=request is requests[0]) == request


def _raw_worker(folder: Path) -> tuple[subprocess.Popen, Connection]:
    """A worker started by hand in ``folder`` (no launcher, no sandbox), and the judge's end of its socket."""
    judge_end, worker_end = socket.socketpair()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    worker = subprocess.Popen([sys.executable, "-m", "evalkit.sandbox.untrusted.worker", str(worker_end.fileno()),
                               str(os.getpid())], pass_fds=(worker_end.fileno(),), cwd=folder, env=env,
                              stderr=subprocess.PIPE, text=True)
    worker_end.close()
    return worker, Connection(judge_end.detach())


def test_a_worker_given_another_version_says_so_and_exits_before_anything_runs(tmp_path) -> None:
    worker, conn = _raw_worker(tmp_path)
    conn.send(dataclasses.replace(setup_request("build", str(tmp_path / "answer.py"), "cpu", {}), version=99))
    _, stderr = worker.communicate(timeout=120)
    assert worker.returncode == REFUSED_EXIT
    assert "request version 99, this worker speaks" in stderr


def test_a_worker_given_a_field_of_another_type_says_which_and_exits_before_anything_runs(tmp_path) -> None:
    worker, conn = _raw_worker(tmp_path)
    conn.send(dataclasses.replace(setup_request("build", str(tmp_path / "answer.py"), "cpu", {}), n_inputs="2"))
    _, stderr = worker.communicate(timeout=120)
    assert worker.returncode == REFUSED_EXIT
    assert "SetupRequest.n_inputs: expected int, got str" in stderr


def test_a_worker_whose_harness_fails_says_what_and_never_exits_0(tmp_path) -> None:
    # A harness failure outside any claim (here: limits it cannot apply; on a GPU host, an extension folder its mount
    # namespace hid) once ended the worker with exit code 0 and no word, read as "ended without replying".
    worker, conn = _raw_worker(tmp_path)
    conn.send(setup_request("judge", str(tmp_path / "answer.py"), "cpu", {}))  # no limits at all
    _, stderr = worker.communicate(timeout=120)
    assert worker.returncode == HARNESS_FAILED_EXIT, stderr
    assert "evalkit worker: the harness failed: KeyError" in stderr, stderr
