"""`evalkit serve` on CPU, as RL trainers drive it: answers by problem id and by reference text, a batch polled until
done (each row carrying its item), cancelled, or cut by its deadline, clients kept apart (no name taken from another,
no other client's ids or the server's folders in an error), every error JSON of one shape, one log line per request,
and SIGTERM answered only after the request in flight (the server drains, closes its judges, and exits 143)."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from process_helpers import alive, children
from serve_helpers import PROBLEMS, REFERENCE, ZEROS_ANSWER, answer, call, start_server, wait_for_batch
from shared_builds import cache_sharing_builds

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

HANG_S = 300  # a hang's step limit where a test must see it ended long before (a client's setting may say so)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, prebuilt: Path):
    folder = tmp_path_factory.mktemp("serve")
    cache = cache_sharing_builds(prebuilt, folder / "cache")
    log = folder / "serve.log"
    base, proc = start_server(["serve", "--device", "cpu", "--problems", str(PROBLEMS), "--cache-dir", str(cache),
                               "--timing-trials", "5", "--seed", "3"], log)
    yield base, proc, log, cache
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def test_answers_by_problem_id_and_by_reference_text(server) -> None:
    base = server[0]
    status, row = call(f"{base}/v1/judge", {"problem": "linear_relu", "answer": answer("correct_cpp")})
    assert status == 200 and row["verdict"] == "correct" and row["feedback"].startswith("Correct."), row
    status, row = call(f"{base}/v1/judge", {"reference_code": REFERENCE, "answer": answer("incorrect"),
                                            "settings": {"atol": 0.001}, "sample": "mine", "id": "q7"})
    assert status == 200 and row["verdict"] == "incorrect" and row["sample"] == "mine" and row["item"] == "q7"
    assert row["problem"].startswith("inline_") and row["correctness"]["atol"] == 0.001


def test_a_batch_is_polled_until_done_and_each_row_carries_its_item(server) -> None:
    base = server[0]
    status, batch = call(f"{base}/v1/batch", {"items": [
        {"problem": "linear_relu", "answer": answer("crash"), "id": "a", "sample": "same"},
        {"reference_code": REFERENCE, "answer": answer("runtime_error"), "sample": "same"},
        {"problem": "linear_relu", "answer": "no code at all", "id": "c"}]})
    assert status == 200 and batch["size"] == 3
    quick: list[int] = []
    clients = [threading.Thread(target=lambda: quick.append(
        call(f"{base}/v1/judge", {"problem": "linear_relu", "answer": "I give up."})[1]["verdict"] == "no_code"))
        for _ in range(8)]
    for client in clients:
        client.start()
    for client in clients:
        client.join(timeout=120)
    assert quick == [True] * 8
    state = wait_for_batch(base, batch["id"])
    by_item = {row["item"]: (row["verdict"], row["sample"]) for row in state["rows"]}
    assert by_item == {"a": ("crash", "same"), 1: ("runtime_error", "same"), "c": ("no_code", by_item["c"][1])}
    assert call(f"{base}/v1/health")[1]["in_flight"] == 0


@pytest.mark.parametrize(("body", "status", "field"), [
    ({"problem": "linear_relu", "answer": 3}, 400, "answer"),
    ({"problem": "linear_reul", "answer": "x"}, 404, "problem"),
    ({"answer": "x"}, 400, "problem"),
    ({"problem": "linear_relu", "reference_code": REFERENCE, "answer": "x"}, 400, "problem"),
    ({"problem": "linear_relu", "answer": "x", "timeout": 3}, 400, "timeout"),
    ({"reference_code": "x = 1\n", "answer": "x"}, 400, "reference_code"),
    ({"reference_code": REFERENCE, "answer": "x", "settings": {"atoll": 1}}, 400, "settings"),
    ({"reference_code": REFERENCE, "answer": "x", "settings": {"correctness_trials": 1_000_000}}, 400, "settings"),
    ({"reference_code": REFERENCE, "answer": "x", "settings": {"timing_budget_s": 86400}}, 400, "settings"),
    ({"reference_code": REFERENCE, "answer": "x", "name": "Bad Name"}, 400, "name"),
    ({"reference_code": REFERENCE, "answer": "x", "name": "n" * 65}, 413, "name"),
    ({"problem": "linear_relu", "answer": "x" * (1024 * 1024 + 1)}, 413, "answer"),
    ({"reference_code": REFERENCE + "#" * (1024 * 1024), "answer": "x"}, 413, "reference_code"),
    ({"problem": "linear_relu", "answer": "x", "deadline_s": 0}, 400, "deadline_s"),
    ({"problem": "linear_relu", "answer": "x", "deadline_s": 10 ** 9}, 400, "deadline_s"),
    ({"problem": "linear_relu", "answer": "x", "sample": "s" * 201}, 413, "sample"),
])
def test_bad_input_is_refused_naming_the_field_before_any_work(server, body: dict, status: int, field: str) -> None:
    started = time.monotonic()
    got, error = call(f"{server[0]}/v1/judge", body)
    assert (got, error["field"]) == (status, field), error
    if field != "reference_code":  # a reference's text is checked in a sandbox; everything else at once
        assert time.monotonic() - started < 30


def test_every_error_is_json_of_one_shape(server) -> None:
    base = server[0]
    for path, method, raw, status in (("nowhere", "GET", None, 404), ("judge", "PUT", b"{}", 405),
                                      ("judge", "GET", None, 405), ("batch/nope", "GET", None, 404),
                                      ("batch/nope", "DELETE", None, 404), ("judge", "POST", b"{not json", 400),
                                      ("judge", "POST", b"[" * 100_000, 400), ("batch", "POST", b'{"items": []}', 400)):
        url = f"{base}/v1/{path}"
        got, error = call(url, raw=raw, method=method)
        assert got == status and set(error) == {"error", "field"} and error["error"], (url, method, error)


def test_clients_are_kept_apart_by_their_references_content(server) -> None:
    base, cache = server[0], server[3]
    zeros_reference = REFERENCE.replace("return torch.relu(self.linear(x))", "return torch.zeros_like(x)")
    squatter = call(f"{base}/v1/judge", {"reference_code": zeros_reference, "name": "shared", "answer": ZEROS_ANSWER})
    assert squatter[1]["verdict"] == "correct", squatter  # correct against its own reference, under its own id
    victim = call(f"{base}/v1/judge", {"reference_code": REFERENCE, "name": "shared", "answer": ZEROS_ANSWER})[1]
    assert victim["verdict"] == "incorrect", "the victim's answer was judged against the squatter's reference"
    assert victim["problem"].startswith("shared_") and victim["problem"] != squatter[1]["problem"]
    status, error = call(f"{base}/v1/judge", {"problem": squatter[1]["problem"], "answer": ZEROS_ANSWER})
    assert status == 404, "another client's problem was reachable by its id"
    assert "shared_" not in error["error"].replace(squatter[1]["problem"], "") and "inline_" not in error["error"]
    for body in ({"reference_code": "def get_inputs(:\n", "answer": "x"},
                 {"reference_code": REFERENCE, "answer": "x", "settings": {"atol": "loose"}}):
        error = call(f"{base}/v1/judge", body)[1]["error"]
        assert str(cache) not in error and "/tmp" not in error, error


def test_a_cancelled_batch_ends_its_answers_even_one_in_a_judges_hands(server) -> None:
    base = server[0]
    slow = {"reference_code": REFERENCE, "settings": {"run_timeout_s": HANG_S}}
    status, batch = call(f"{base}/v1/batch", {"items": [{**slow, "answer": answer("hang"), "id": f"h{n}"}
                                                        for n in range(3)]})
    assert status == 200
    time.sleep(8)  # the first hang is loaded and hanging in the judge's hands
    started = time.monotonic()
    status, cancelled = call(f"{base}/v1/batch/{batch['id']}", method="DELETE")
    assert status == 200 and cancelled["done"] and cancelled["cancelled"] == 3, cancelled
    rows = call(f"{base}/v1/batch/{batch['id']}")[1]["rows"]
    assert sorted(row["item"] for row in rows) == ["h0", "h1", "h2"]
    assert {(row["verdict"], row["error"]["kind"]) for row in rows} == {("skipped", "cancelled")}
    row = call(f"{base}/v1/judge", {**slow, "answer": answer("incorrect")})[1]
    assert row["verdict"] == "incorrect" and time.monotonic() - started < HANG_S / 2, "the hang held the judge"
    assert call(f"{base}/v1/health")[1]["in_flight"] == 0


def test_a_deadline_gives_up_on_what_is_left(server) -> None:
    base = server[0]
    slow = {"reference_code": REFERENCE, "settings": {"run_timeout_s": HANG_S}}
    started = time.monotonic()
    status, error = call(f"{base}/v1/judge", {**slow, "answer": answer("hang"), "deadline_s": 5})
    assert (status, error["field"]) == (504, "deadline_s") and time.monotonic() - started < HANG_S / 2, error
    batch = call(f"{base}/v1/batch", {"items": [{**slow, "answer": answer("hang")}, {**slow, "answer": "no code"}],
                                      "deadline_s": 5})[1]
    rows = wait_for_batch(base, batch["id"], timeout_s=HANG_S / 2)["rows"]
    assert sorted((row["item"], row["verdict"], row["error"] and row["error"]["kind"]) for row in rows) == [
        (0, "skipped", "deadline_passed"), (1, "no_code", None)]


def test_each_request_is_one_line_of_the_servers_log(server) -> None:
    base, log = server[0], server[2]
    call(f"{base}/v1/health")
    call(f"{base}/v1/batch/nope")
    call(f"{base}/v1/batch/nope", method="DELETE")
    call(f"{base}/v1/judge", {"problem": "linear_relu", "answer": "no code"})
    text = log.read_text()
    assert "evalkit serve: listening on http://127.0.0.1:" in text and "problems: 3 from" in text, text[-2000:]
    assert "GET /v1/health 200" in text and "GET /v1/batch/{batch_id} 404" in text
    assert "POST /v1/judge 200" in text and "DELETE /v1/batch/{batch_id} 404" in text


def test_sigterm_answers_the_request_in_flight_then_stops(server) -> None:
    base, proc, log, _ = server
    replies: list[tuple[int, Any]] = []
    client = threading.Thread(target=lambda: replies.append(
        call(f"{base}/v1/judge", {"problem": "linear_relu", "answer": answer("hang")})))
    client.start()
    time.sleep(3)  # the hang is being built or judged
    kids = children(proc.pid)
    proc.send_signal(signal.SIGTERM)
    client.join(timeout=300)
    assert replies and replies[0][0] == 200 and replies[0][1]["verdict"] == "timeout", replies
    assert proc.wait(timeout=120) == 128 + signal.SIGTERM  # drained, closed, and says so as evalkit score does
    time.sleep(1)
    assert not [pid for pid in kids if alive(pid)], "a sandbox or judge outlived the server"
    assert "SIGTERM: stopping" in log.read_text() and "stopped by SIGTERM" in log.read_text()
