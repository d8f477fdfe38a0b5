"""`evalkit serve` on CPU, as an RL trainer drives it: answers by problem id and by reference text, a batch polled
until done, clients at once, bad input refused naming the field, and SIGTERM answered only after the request in
flight (the server drains, closes its judges, and exits 143)."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from conftest import FIXTURES, ROOT
from process_helpers import alive, children
from shared_builds import cache_sharing_builds

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

PROBLEMS = FIXTURES / "judge_problems"
ANSWERS = FIXTURES / "judge_submissions" / "fixtures" / "linear_relu"
REFERENCE = (PROBLEMS / "linear_relu" / "reference.py").read_text()


def _answer(name: str) -> str:
    return next(ANSWERS.glob(f"{name}.*")).read_text()


def _call(url: str, body: Any = None, raw: bytes | None = None, timeout: float = 300) -> tuple[int, Any]:
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, prebuilt: Path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    cache = cache_sharing_builds(prebuilt, tmp_path_factory.mktemp("serve") / "cache")
    proc = subprocess.Popen([sys.executable, "-m", "evalkit", "serve", "--device", "cpu", "--port", str(port),
                             "--problems", str(PROBLEMS), "--cache-dir", str(cache), "--timing-trials", "5",
                             "--seed", "3"], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if _call(f"{base}/v1/health", timeout=2)[0] == 200:
                break
        except OSError:
            time.sleep(0.5)
    assert proc.poll() is None, proc.stdout.read()
    yield base, proc
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def test_answers_by_problem_id_and_by_reference_text(server) -> None:
    base, _ = server
    status, row = _call(f"{base}/v1/judge", {"problem": "linear_relu", "answer": _answer("correct_cpp")})
    assert status == 200 and row["verdict"] == "correct" and row["feedback"].startswith("Correct."), row
    status, row = _call(f"{base}/v1/judge", {"reference_code": REFERENCE, "answer": _answer("incorrect"),
                                             "settings": {"atol": 0.001}, "sample": "mine"})
    assert status == 200 and row["verdict"] == "incorrect" and row["sample"] == "mine"
    assert row["problem"].startswith("inline_") and row["correctness"]["atol"] == 0.001


def test_a_batch_is_polled_until_done_while_other_clients_call(server) -> None:
    base, _ = server
    status, batch = _call(f"{base}/v1/batch", {"items": [
        {"problem": "linear_relu", "answer": _answer("crash")},
        {"reference_code": REFERENCE, "answer": _answer("runtime_error")},
        {"problem": "linear_relu", "answer": "no code at all"}]})
    assert status == 200 and batch["size"] == 3
    quick: list[int] = []
    clients = [threading.Thread(target=lambda: quick.append(
        _call(f"{base}/v1/judge", {"problem": "linear_relu", "answer": "I give up."})[1]["verdict"] == "no_code"))
        for _ in range(8)]
    for client in clients:
        client.start()
    for client in clients:
        client.join(timeout=120)
    assert quick == [True] * 8
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        status, state = _call(f"{base}/v1/batch/{batch['id']}")
        if state["done"]:
            break
        time.sleep(0.5)
    assert sorted(row["verdict"] for row in state["rows"]) == ["crash", "no_code", "runtime_error"]
    assert _call(f"{base}/v1/health")[1]["in_flight"] == 0


@pytest.mark.parametrize(("body", "status", "field"), [
    ({"problem": "linear_relu", "answer": 3}, 400, "answer"),
    ({"problem": "linear_reul", "answer": "x"}, 404, "problem"),
    ({"answer": "x"}, 400, "problem"),
    ({"problem": "linear_relu", "reference_code": REFERENCE, "answer": "x"}, 400, "problem"),
    ({"problem": "linear_relu", "answer": "x", "timeout": 3}, 400, "timeout"),
    ({"reference_code": "x = 1\n", "answer": "x"}, 400, "reference_code"),
    ({"reference_code": REFERENCE, "answer": "x", "settings": {"atoll": 1}}, 400, "reference_code"),
])
def test_bad_input_is_refused_naming_the_field(server, body: dict, status: int, field: str) -> None:
    base, _ = server
    got, error = _call(f"{base}/v1/judge", body)
    assert (got, error["field"]) == (status, field), error


def test_a_body_that_is_not_json_or_an_unknown_batch_is_refused(server) -> None:
    base, _ = server
    assert _call(f"{base}/v1/judge", raw=b"{not json")[0] == 400
    assert _call(f"{base}/v1/batch/nope")[0] == 404
    assert _call(f"{base}/v1/batch", {"items": []})[1]["field"] == "items"


def test_sigterm_answers_the_request_in_flight_then_stops(server) -> None:
    base, proc = server
    replies: list[tuple[int, Any]] = []
    client = threading.Thread(target=lambda: replies.append(
        _call(f"{base}/v1/judge", {"problem": "linear_relu", "answer": _answer("hang")})))
    client.start()
    time.sleep(3)  # the hang is being built or judged
    kids = children(proc.pid)
    proc.send_signal(signal.SIGTERM)
    client.join(timeout=300)
    assert replies and replies[0][0] == 200 and replies[0][1]["verdict"] == "timeout", replies
    assert proc.wait(timeout=120) == 128 + signal.SIGTERM  # drained, closed, and says so as evalkit score does
    time.sleep(1)
    assert not [pid for pid in kids if alive(pid)], "a sandbox or judge outlived the server"

