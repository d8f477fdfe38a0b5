"""Hostile clients of `evalkit serve` (issue 42, C and D replayed): a million correctness trials, bodies of hundreds
of MiB sent in chunks, hundreds of half-sent requests and requests without the token, all while another client is
judged. Its row still arrives, the server's memory stays bounded, and SIGTERM still drains and exits 143. The server
runs with a token, no problems folder (problems given as text only) and -q (no request lines)."""

from __future__ import annotations

import signal
import socket
import threading
import time
from pathlib import Path

import pytest

from serve_helpers import REFERENCE, answer, call, resident_bytes, start_server

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

TOKEN = "not-a-real-secret-7f3a"
READ_TIMEOUT_S = 3
BODY_BYTES = 256 * 2**20  # each hostile body; the server's limit is 8 MiB
HALF_SENT = 200


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    folder = tmp_path_factory.mktemp("hostile")  # no problems folder here
    log = folder / "serve.log"
    base, proc = start_server(["-q", "serve", "--device", "cpu", "--cache-dir", str(folder / "cache"), "--read-timeout",
                               str(READ_TIMEOUT_S), "--timing-trials", "5", "--seed", "3"], log, cwd=folder,
                              env={"EVALKIT_SERVE_TOKEN": TOKEN, "EVALKIT_PROBLEMS": None}, token=TOKEN)
    yield base, proc, log
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def test_the_token_is_asked_on_every_route_but_health(server) -> None:
    base = server[0]
    assert call(f"{base}/v1/health")[0] == 200
    for token in (None, "wrong", TOKEN + "x"):
        for url, method, body in ((f"{base}/v1/judge", "POST", {"reference_code": REFERENCE, "answer": "x"}),
                                  (f"{base}/v1/batch", "POST", {"items": []}), (f"{base}/v1/batch/x", "GET", None),
                                  (f"{base}/v1/batch/x", "DELETE", None), (f"{base}/v1/elsewhere", "GET", None)):
            status, error = call(url, body, method=method, token=token)
            assert status == 401 and set(error) == {"error", "field"} and "Bearer" in error["error"], (url, token)
    assert call(f"{base}/v1/batch/x", token=TOKEN)[0] == 404
    status, error = call(f"{base}/v1/judge", {"problem": "linear_relu", "answer": "x"}, token=TOKEN)
    assert status == 404 and "known: none" in error["error"]  # no problems folder: problems given as text only


def _send_chunked(port: int, sent: list[int]) -> None:
    """A chunked body of ``BODY_BYTES``, sent as fast as the server reads it; how much got out before it stopped."""
    chunk = b"x" * 2**20
    framed = b"%x\r\n%s\r\n" % (len(chunk), chunk)
    count = 0
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(b"POST /v1/judge HTTP/1.1\r\nHost: evalkit\r\nAuthorization: Bearer " + TOKEN.encode() +
                     b"\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        try:
            while count < BODY_BYTES:
                sock.sendall(framed)
                count += len(chunk)
        except OSError:
            pass  # refused and closed
    sent.append(count)


def _half_sent(port: int, with_body: bool) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(b"POST /v1/judge HTTP/1.1\r\nHost: evalkit\r\nContent-Length: 1000\r\nAuthorization: Bearer " +
                 TOKEN.encode() + b"\r\n\r\n{\"answer\": " if with_body else b"POST /v1/judge HTTP/1.1\r\nHost: ev")
    return sock


def _cut_off(sock: socket.socket) -> bool:
    """Whether the server answered 408 and closed, or just closed (within the read timeout and some slack)."""
    sock.settimeout(READ_TIMEOUT_S + 30)
    try:
        data = sock.recv(4096)
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False
    return data == b"" or data.startswith(b"HTTP/1.1 408")


def test_hostile_clients_cost_another_client_nothing_and_sigterm_still_drains(server) -> None:
    base, proc, log = server
    port = int(base.rsplit(":", 1)[1])
    judged = {"reference_code": REFERENCE, "answer": answer("incorrect")}
    assert call(f"{base}/v1/judge", judged, token=TOKEN)[1]["verdict"] == "incorrect"  # the server warmed up
    before, peak, attacking = resident_bytes(proc.pid), [0], True

    def watch() -> None:
        while attacking:
            peak[0] = max(peak[0], resident_bytes(proc.pid))
            time.sleep(0.05)
    watcher = threading.Thread(target=watch)
    watcher.start()
    started = time.monotonic()
    status, error = call(f"{base}/v1/judge", {**judged, "settings": {"correctness_trials": 10**6}}, token=TOKEN)
    assert (status, error["field"]) == (400, "settings") and time.monotonic() - started < 10  # C: before any work
    half_sent = [_half_sent(port, with_body=n % 2 == 1) for n in range(HALF_SENT)]
    sent: list[int] = []
    senders = [threading.Thread(target=_send_chunked, args=(port, sent)) for _ in range(2)]
    for sender in senders:
        sender.start()
    other = call(f"{base}/v1/judge", {**judged, "sample": "the other client"}, token=TOKEN)  # while it all goes on
    for sender in senders:
        sender.join(timeout=300)
    attacking = False
    watcher.join()
    assert other[0] == 200 and other[1]["verdict"] == "incorrect" and other[1]["sample"] == "the other client"
    assert len(sent) == 2 and max(sent) < BODY_BYTES / 4, f"the server read {sent} bytes of bodies over its limit"
    assert peak[0] - before < 200 * 2**20, f"the server grew by {(peak[0] - before) / 2**20:.0f} MiB"
    assert all(_cut_off(sock) for sock in half_sent), "a half-sent request was left open past the read timeout"
    for sock in half_sent:
        sock.close()
    more = [_half_sent(port, with_body=n % 2 == 1) for n in range(50)]  # still arriving when the server stops
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=120) == 128 + signal.SIGTERM
    for sock in more:
        sock.close()
    text = log.read_text()
    assert "POST /v1/judge" not in text and "listening on" not in text, text[-2000:]  # -q: errors only
    assert "Traceback" not in text, text[-4000:]
