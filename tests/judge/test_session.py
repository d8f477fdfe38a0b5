"""The judge against a fake worker that speaks the protocol: every way a worker can misbehave between
two messages becomes that submission's verdict, and nothing escapes as an exception."""

from __future__ import annotations

import dataclasses
import json
import os
import time
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

import pytest
import torch

from conftest import FIXTURES
from evalkit.judge.reference import ReferenceProblem
from evalkit.judge import tensor_check
from evalkit.judge.session import Session, error_record
from evalkit.judge.submission_judge import Judge, JudgeSettings
from evalkit.judge.time_limits import TimeLimits
from evalkit.judge.verdicts import VERDICT_OF, Finding
from evalkit.records import Verdict
from evalkit.sandbox import protocol, shared_buffers
from evalkit.sandbox.launcher import Limits, WorkerGone
from evalkit.sandbox.protocol import Op, ProtocolViolation
from evalkit.sandbox.reply_reading import decode_reply
from evalkit.sandbox.untrusted.worker import sets_of
from evalkit.sources.problems import load_problem

Script = Callable[["FakeWorker", protocol.Request], Any]


class FakeWorker:
    """Answers each request with what ``script(self, request)`` returns (a claim), or raises what it raises. Like a
    real worker it keeps each call's outputs (``results``) in its own memory, here the test's process, whose memory
    the judge reads through ``/proc/self/mem``, as it reads a real CPU worker's."""

    def __init__(self, ref: ReferenceProblem, script: Script | None = None) -> None:
        self.ref, self.script = ref, script or honest
        self.requests: list[protocol.Request] = []
        self.waits_s: list[tuple[str, float]] = []  # each request's op and the limit the judge gave its reply
        self.inputs: list[Any] = []
        self.specs: list[dict[str, Any]] = []
        self.results: list[list[torch.Tensor]] = []  # each call's outputs in the last request
        self.closed = False
        self.frozen = False
        self._pending: Any = None
        self._last_call: protocol.Request | None = None
        self._mappings: list[Any] = []

    def send(self, message: protocol.Request) -> None:
        self.requests.append(message)
        self._pending = message

    def send_fds(self, fds: list[int]) -> None:  # what the worker does with the judge's buffers
        setup = self._pending
        fds = [os.dup(fd) for fd in fds]
        self.inputs = sets_of(shared_buffers.map_entries(setup.inputs, fds, self._mappings), setup.batch)
        self.specs = setup.outputs

    def receive_fds(self, count: int, timeout_s: float) -> list[int]:
        return [os.open("/proc/self/mem", os.O_RDONLY)]  # a CPU worker hands over its memory

    def receive(self, timeout_s: float, stage: str, spin: bool = False,
                arrived: Callable[[], None] | None = None) -> protocol.Claim:
        request, self._pending = self._pending, None
        self.waits_s.append((request.op, timeout_s))
        self._last_call = request if request.op == Op.CALL else None
        claim = self.script(self, request)
        if arrived is not None:
            arrived()
        return claim

    def close(self) -> tuple[str, str]:
        self.closed = True
        return "", ""

    def ended(self) -> bool:
        return self.closed

    def freeze(self, settle_s: float = 0.0) -> None:
        self.frozen = True

    def thaw(self) -> None:
        self.frozen = False

    def watch(self) -> None:
        pass

    def forward(self) -> None:
        """The calls of the last request, their outputs kept in ``results``."""
        calls = (self._last_call.calls if self._last_call else None) or len(self.inputs)
        with torch.no_grad():
            self.results = [[self.ref.model(*inputs).clone()] for inputs in self.inputs[:calls]]


def honest(worker: FakeWorker, request: protocol.Request) -> protocol.Claim:
    op = request.op
    if op == Op.LOAD:
        return protocol.ReadyClaim(weights="state_dict", landlock=7)
    if op == Op.PING:
        return protocol.PongClaim(nonce=request.nonce, call_ms=[0.0] * (request.calls or 1))
    if op == Op.CALL:
        worker.forward()
        return called(worker, request)
    raise AssertionError(f"unexpected request {op}")


def place(output: torch.Tensor) -> protocol.PlaceClaim:
    """Where ``output`` lies in this (the fake worker's) process, as a CPU worker says it."""
    return protocol.PlaceClaim(segment=-1, offset=output.data_ptr(), strides=list(output.stride()))


def called(worker: FakeWorker, request: protocol.Request, ms: float = 0.05) -> protocol.CalledClaim:
    shape = list(worker.results[0][0].shape)
    return protocol.CalledClaim(nonce=request.nonce, formed=True, types=["torch.Tensor"], shapes=[shape],
                                dtypes=["torch.float32"], call_ms=[ms] * len(worker.results),
                                places=[[place(out) for out in outputs] for outputs in worker.results])


def on_call(number: int, misbehave: Callable[[FakeWorker], Any]) -> Script:
    """Honest, except that forward call ``number`` (1-based) does ``misbehave`` instead."""
    calls = {"n": 0}

    def script(worker: FakeWorker, request: protocol.Request) -> Any:
        if request.op == Op.CALL:
            calls["n"] += 1
            if calls["n"] == number:
                worker.request = request
                return misbehave(worker)
        return honest(worker, request)
    return script


def raise_(error: BaseException) -> Callable[[FakeWorker], Any]:
    def misbehave(worker: FakeWorker) -> Any:
        raise error
    return misbehave


@pytest.fixture(scope="module")
def judge() -> Judge:
    ref = ReferenceProblem(load_problem(FIXTURES / "judge_problems" / "linear_relu"), "cpu", init_seed=3)
    settings = JudgeSettings(atol=1e-2, rtol=1e-2, correctness_trials=2, timing_trials=3, warmup_trials=1,
                             run_timeout_s=5, seed=11)
    return Judge(ref, settings, Limits())


def _verdict(judge: Judge, script: Script | None) -> tuple[Verdict, Any, FakeWorker]:
    worker = FakeWorker(judge.ref, script)
    judgement = judge.judge_with(worker, Path("submission.py"))
    assert worker.closed
    return VERDICT_OF[judgement.finding], judgement, worker


def test_a_shorter_request_length_makes_fewer_calls_a_request(judge):
    short = Judge(judge.ref, dataclasses.replace(judge.settings, request_length_ms=1e-6), Limits())
    assert judge.batch == 32 and short.batch == 1  # a microsecond problem: by the setting, one call is long enough


def test_an_honest_worker_is_correct_and_timed(judge):
    verdict, judgement, worker = _verdict(judge, None)
    assert verdict is Verdict.CORRECT, judgement.reason
    assert judgement.timing["count"] == 3
    ops = [r.op for r in worker.requests]
    pings = ops.index(Op.LOAD) - 1
    assert ops[:pings + 3] == [Op.SETUP] + [Op.PING] * pings + [Op.LOAD, Op.CALL]  # calibrated before loading
    assert pings >= 10
    batch = worker.requests[0].batch
    assert batch == 32  # a tiny problem: the most calls per request, so the judge's overhead weighs little
    assert worker.requests[0].fd_count == 1  # one anonymous buffer per input, every call's stacked; outputs stay the worker's
    assert judgement.timing["calls_per_request"] == batch
    assert judgement.timing["clock"] == "judge" and judgement.timing["overhead_ms"] > 0
    # where the judge's time went, stage by stage (judged through judge_with, which profiles nothing: no profile_s)
    stages = judgement.stage_seconds
    parts = {"turn_wait_s"} | ({"checks_s"} if judgement.timing["verified_calls"] else set())  # records.STAGE_PARTS
    assert set(stages) == {"setup_s", "calibrate_s", "load_s", "correctness_s", "timing_s", "close_s"} | parts
    assert stages["turn_wait_s"] + stages.get("checks_s", 0.0) <= stages["calibrate_s"] + stages["timing_s"]


def test_a_worker_still_starting_at_its_setup_is_waited_for_in_setup_s_not_calibrate_s(judge, monkeypatch):
    # A CPU worker answers the setup with its memory only once its start is over: that wait is the setup's, and the
    # calibration is the pings' alone (a CPU step's "calibration" was mostly this wait).
    from evalkit.judge import contender as contender_module

    now = {"s": 0.0}
    monkeypatch.setattr(contender_module, "time", SimpleNamespace(monotonic=lambda: now["s"]))

    class Starting(FakeWorker):
        def receive_fds(self, count: int, timeout_s: float) -> list[int]:
            now["s"] += 5.0  # what was left of its start
            return super().receive_fds(count, timeout_s)

    judgement = judge.judge_with(Starting(judge.ref, None), Path("submission.py"))
    assert judgement.stage_seconds["setup_s"] == 5.0 and judgement.stage_seconds["calibrate_s"] == 0.0


def test_slow_pings_end_the_calibration_by_its_time_budget(judge):
    # 20 ms pings: the warm-up stops after 250 ms (13 pings), the measured pings after 500 ms (30, their least),
    # not after 30 + 100 pings.
    def slow_pings(worker: FakeWorker, request: protocol.Request) -> Any:
        if request.op == Op.PING:
            time.sleep(0.02)
        return honest(worker, request)
    _, judgement, worker = _verdict(judge, slow_pings)
    pings = sum(r.op == Op.PING for r in worker.requests)
    assert 5 + 30 <= pings <= 14 + 30, pings
    assert judgement.timing["overhead_ms"] * judgement.timing["calls_per_request"] >= 20


def test_every_call_looks_the_same_and_carries_a_fresh_nonce(judge):
    _, _, worker = _verdict(judge, None)
    calls = [r for r in worker.requests if r.op == Op.CALL]
    batch = worker.requests[0].batch
    # the first call alone, then correctness trials, warm-up, timed (a second round when the first was noisy):
    # after the first, indistinguishable
    assert len(calls) in (1 + 2 + 1 + 3, 1 + 2 + 2 * (1 + 3))
    assert calls[0].calls == 1
    assert {dataclasses.replace(r, nonce=0) for r in calls[1:]} == {protocol.Request(Op.CALL, nonce=0, calls=batch)}
    assert len({r.nonce for r in calls}) == len(calls)


def test_a_hang_costs_the_first_calls_limit_not_a_whole_batchs(judge):
    """The answer's first request holds one call: with calls of 5.85 ms (5.85 s allowed each), a hang is cut
    off at the first call's 10 s rather than at a whole request's 5.85 s per call of the batch."""
    judge.time_limits = TimeLimits.derived(reference_ms=5.85)
    _, _, worker = _verdict(judge, None)
    waits = [wait for op, wait in worker.waits_s if op == Op.CALL]
    assert waits[0] == 10.0
    assert waits[1:] == [pytest.approx(5.85 * judge.batch)] * (len(waits) - 1) and judge.batch > 1


def test_a_reply_with_another_calls_nonce_is_a_protocol_violation(judge):
    # A worker that answers ahead: its reply cannot echo a nonce it has not been sent yet.
    def ahead(worker: FakeWorker) -> protocol.CalledClaim:
        worker.forward()
        return protocol.CalledClaim(**{**vars(called(worker, worker.request)), "nonce": worker.request.nonce + 1})
    verdict, judgement, _ = _verdict(judge, on_call(4, ahead))
    assert verdict is Verdict.RUNTIME_ERROR
    assert "nonce" in judgement.reason


def test_the_workers_own_time_is_a_claim_and_never_the_time(judge):
    def slow_but_claims_a_microsecond(worker: FakeWorker, request: protocol.Request) -> Any:
        if request.op != Op.CALL:
            return honest(worker, request)
        time.sleep(0.02 * len(worker.inputs))  # 20 ms for each call of the request
        worker.forward()
        return called(worker, request, ms=0.001)
    verdict, judgement, _ = _verdict(judge, slow_but_claims_a_microsecond)
    assert verdict is Verdict.CORRECT
    assert judgement.timing["median_ms"] > 15
    assert judgement.timing["claimed_median_ms"] == pytest.approx(0.001)


def _timed_calls(worker: FakeWorker) -> bool:
    """Whether the request the worker answers now is a timed one (after the first call and the 2 trials)."""
    return sum(r.op == Op.CALL for r in worker.requests) > 3


def every_timed_call(change: Callable[[torch.Tensor], Any]) -> Script:
    """Honest, except that on every timed request each call's output is changed by ``change`` before the reply."""
    def script(worker: FakeWorker, request: protocol.Request) -> Any:
        claim = honest(worker, request)
        if request.op == Op.CALL and _timed_calls(worker):
            for outputs in worker.results:
                change(outputs[0])
        return claim
    return script


def test_an_output_not_finished_when_the_worker_is_frozen_is_caught_when_checked(judge):
    # Work left to finish after the reply (here: none of it done) is frozen with the worker; what the judge reads is
    # unfinished, and the checked requests (never fewer than MIN_VERIFIED) find it.
    for _ in range(3):
        _, judgement, _ = _verdict(judge, every_timed_call(lambda out: out.fill_(float("nan"))))
        assert judgement.finding is Finding.WRONG_DURING_TIMING, judgement.reason


def test_one_element_left_unwritten_in_an_output_read_whole_is_caught(judge):
    # An output of at most SAMPLED_ELEMENTS elements is compared whole: a single wrong element is seen.
    for _ in range(3):
        _, judgement, _ = _verdict(judge, every_timed_call(lambda out: out.view(-1).__setitem__(77, float("nan"))))
        assert judgement.finding is Finding.WRONG_DURING_TIMING, judgement.reason
        assert "1 of 128 elements" in judgement.reason
        worst = judgement.correctness["worst"]  # the judge's own reading of its copy, for the model's feedback
        assert judgement.correctness["timed_request"] >= 1 and [(w["index"], w["got"]) for w in worst] == [([4, 13], "nan")]


def test_a_large_output_half_unwritten_is_caught_at_positions_drawn_once_the_worker_is_frozen(judge, monkeypatch):
    # A large output is compared at SAMPLED_ELEMENTS positions (here 64 of 128) drawn from the judge's secret after
    # the reply, the worker frozen: half an output left unwritten is missed with probability 2**-64.
    monkeypatch.setattr(tensor_check, "SAMPLED_ELEMENTS", 64)
    for _ in range(3):
        _, judgement, _ = _verdict(judge, every_timed_call(lambda out: out.view(-1)[::2].fill_(float("nan"))))
        assert judgement.finding is Finding.WRONG_DURING_TIMING, judgement.reason
        assert "of 64 sampled elements" in judgement.reason


def test_the_float64_checks_of_timed_requests_run_after_the_exclusive_turn_on_the_inputs_they_were_timed_on():
    """Only the timed window needs the GPU alone: the judge takes a checked call's outputs inside it, and computes
    their float64 reference after it (19% of the timing stage's time on the H200, docs/gpu-runs/
    2026-11-29-rl-throughput-h200), from the call's inputs drawn again from their seed."""
    in_turn, expected_in_turn, timed_inputs, checked_inputs = [], [], {}, []

    @contextmanager
    def quiet():
        in_turn.append(True)
        try:
            yield []
        finally:
            in_turn.pop()

    ref = ReferenceProblem(load_problem(FIXTURES / "judge_problems" / "linear_relu"), "cpu", init_seed=3)
    settings = JudgeSettings(atol=1e-2, rtol=1e-2, correctness_trials=1, timing_trials=12, warmup_trials=1,
                             run_timeout_s=5, seed=11)
    judge = Judge(ref, settings, Limits(), quiet=quiet)
    make_inputs, expected = ref.make_inputs, ref.expected

    def drawn(seed):
        inputs = make_inputs(seed)
        timed_inputs.setdefault(seed, inputs[0].clone())
        return inputs

    def float64(inputs):
        expected_in_turn.append(bool(in_turn))
        checked_inputs.append(inputs[0].clone())
        return expected(inputs)

    ref.make_inputs, ref.expected = drawn, float64
    calls_before = len(expected_in_turn)
    verdict, judgement, _ = _verdict(judge, None)
    assert verdict is Verdict.CORRECT, judgement.reason
    checked = judgement.timing["verified_calls"]
    assert checked and judgement.stage_seconds["checks_s"] > 0
    assert expected_in_turn[calls_before:] and not any(expected_in_turn[calls_before:])
    known = list(timed_inputs.values())
    assert all(any(torch.equal(inputs, seen) for seen in known) for inputs in checked_inputs[-len(checked):])


def test_timed_calls_wrong_everywhere_are_caught_by_the_sampled_checks(judge, monkeypatch):
    monkeypatch.setattr(tensor_check, "SAMPLED_ELEMENTS", 4)
    _, judgement, _ = _verdict(judge, every_timed_call(lambda out: out.fill_(5.0)))
    assert judgement.finding is Finding.WRONG_DURING_TIMING, judgement.reason
    assert "4 of 4 sampled elements" in judgement.reason


def test_one_output_for_every_call_of_a_request_is_caught(judge):
    # Output aliasing: every call of a request claims the same tensor (the last call's result), so all calls but
    # the last read another call's output; a checked request picks its call in secret.
    def one_tensor(worker: FakeWorker, request: protocol.Request) -> Any:
        claim = honest(worker, request)
        if request.op == Op.CALL and _timed_calls(worker):
            last = worker.results[-1]
            return dataclasses.replace(claim, places=[[place(last[0])] for _ in worker.results])
        return claim
    for _ in range(3):
        _, judgement, _ = _verdict(judge, one_tensor)
        assert judgement.finding is Finding.WRONG_DURING_TIMING, judgement.reason


@pytest.mark.parametrize("where, says", [
    (lambda out: protocol.PlaceClaim(segment=-1, offset=8, strides=[16, 1]), "does not hold"),
    (lambda out: protocol.PlaceClaim(segment=0, offset=out.data_ptr(), strides=[16, 1]), "GPU allocation"),
    (lambda out: protocol.PlaceClaim(segment=-1, offset=out.data_ptr(), strides=[2**40, 1]), "spread over"),
    (lambda out: protocol.PlaceClaim(segment=-1, offset=out.data_ptr() + 1, strides=[16, 1]), "not a multiple"),
    (lambda out: protocol.PlaceClaim(segment=-1, offset=out.data_ptr(), strides=[1]), "1 strides for its 2"),
])
def test_a_place_the_workers_memory_cannot_back_is_a_protocol_violation(judge, where, says):
    def misplaced(worker: FakeWorker) -> protocol.CalledClaim:
        worker.forward()
        claim = called(worker, worker.request)
        return dataclasses.replace(claim, places=[[where(outputs[0])] for outputs in worker.results])
    verdict, judgement, _ = _verdict(judge, on_call(1, misplaced))
    assert judgement.finding is Finding.PROTOCOL_VIOLATION and verdict is Verdict.RUNTIME_ERROR, judgement.reason
    assert says in judgement.reason


def test_places_for_fewer_calls_than_the_request_made_are_a_protocol_violation(judge):
    def short(worker: FakeWorker) -> protocol.CalledClaim:
        worker.forward()
        claim = called(worker, worker.request)
        return dataclasses.replace(claim, places=claim.places[:-1])
    verdict, judgement, _ = _verdict(judge, on_call(2, short))
    assert judgement.finding is Finding.PROTOCOL_VIOLATION, judgement.reason


def test_outputs_are_read_only_while_the_worker_is_frozen(judge, monkeypatch):
    from evalkit.sandbox.worker_memory import WorkerMemory

    frozen_when_read: list[bool] = []
    worker = FakeWorker(judge.ref)
    real_view = WorkerMemory.view

    def view(self: WorkerMemory, *args: Any, **kwargs: Any) -> torch.Tensor:
        frozen_when_read.append(worker.frozen)
        return real_view(self, *args, **kwargs)
    monkeypatch.setattr(WorkerMemory, "view", view)
    judgement = judge.judge_with(worker, Path("submission.py"))
    assert VERDICT_OF[judgement.finding] is Verdict.CORRECT, judgement.reason
    assert frozen_when_read and all(frozen_when_read)


def test_a_reply_of_the_wrong_op_is_a_protocol_violation(judge):
    verdict, judgement, _ = _verdict(judge, on_call(1, lambda w: protocol.PongClaim(nonce=w.request.nonce)))
    assert verdict is Verdict.RUNTIME_ERROR
    assert judgement.finding is Finding.PROTOCOL_VIOLATION
    assert "expected 'called', got 'pong'" in judgement.reason


def test_a_worker_that_dies_mid_call_is_a_crash(judge):
    verdict, judgement, _ = _verdict(judge, on_call(2, raise_(WorkerGone("crash", "the process ended"))))
    assert verdict is Verdict.CRASH
    assert "the process ended" in judgement.reason


def test_a_worker_that_stops_answering_is_a_timeout(judge):
    verdict, _, _ = _verdict(judge, on_call(1, raise_(WorkerGone("timeout", "timeout: stage 'forward'"))))
    assert verdict is Verdict.TIMEOUT


def test_a_malformed_reply_is_the_submissions_fault(judge):
    verdict, judgement, _ = _verdict(judge, on_call(1, raise_(ProtocolViolation("a reply that is not JSON"))))
    assert verdict is Verdict.RUNTIME_ERROR
    assert "protocol violation" in judgement.reason


def test_a_claimed_error_is_a_runtime_error_with_its_frames(judge):
    frame = protocol.FrameClaim(file="submission.py", line=4, function="forward", in_submission=True, text="x")
    claim = protocol.ErrorClaim(kind="runtime_error", stage="forward", message="ValueError: boom", traceback=[frame])
    verdict, judgement, _ = _verdict(judge, on_call(1, lambda w: claim))
    assert verdict is Verdict.RUNTIME_ERROR
    assert judgement.reason == "forward: ValueError: boom"
    assert judgement.error["traceback"][0]["line"] == 4


def test_outputs_claimed_but_never_computed_are_incorrect(judge):
    def lie(worker: FakeWorker) -> protocol.CalledClaim:  # says where its outputs are: tensors it never wrote
        worker.results = [[torch.full((8, 16), float("nan"))] for _ in worker.inputs[:worker.request.calls]]
        return called(worker, worker.request)
    verdict, judgement, _ = _verdict(judge, on_call(1, lie))
    assert verdict is Verdict.INCORRECT
    assert judgement.finding is Finding.WRONG_VALUES


@pytest.mark.parametrize("raw, says", [
    (b"not json", "not JSON"),
    (b"[1, 2]", "not an object"),
    (b'{"op": "hello"}', "unknown op"),
    (b'{"op": "called", "nonce": 1, "formed": true, "types": 7, "shapes": [], "dtypes": []}', "'types' = 7"),
    (b'{"op": "called", "nonce": 1, "formed": true, "types": [], "shapes": [], "dtypes": [], "call_ms": [1e400]}',
     "time of inf"),
    (b'{"op": "called", "nonce": 1, "formed": true, "types": [], "shapes": [], "dtypes": [], "call_ms": [-1]}',
     "time of -1"),
    (b'{"op": "called", "nonce": 1, "formed": true, "types": [], "shapes": [[-1]], "dtypes": []}',
     "shape dimension"),
    (b'{"op": "called", "formed": true, "types": [], "shapes": [], "dtypes": []}', "nonce"),
    (b'{"op": "called", "nonce": 1, "formed": true, "types": [], "shapes": [], "dtypes": [], "places": [[7]]}',
     "place 7"),
    (b'{"op": "called", "nonce": 1, "formed": true, "types": [], "shapes": [], "dtypes": [], '
     b'"places": [[[0, 0, []]]]}', "segment = 0"),
    (b'{"op": "called", "nonce": 1, "formed": true, "types": [], "shapes": [], "dtypes": [], '
     b'"places": [[[-1, -5, []]]]}', "offset = -5"),
    (b'{"op": "called", "nonce": 1, "formed": true, "types": [], "shapes": [], "dtypes": [], '
     b'"places": [[[-1, 8, [1.5]]]]}', "stride = 1.5"),
    (b'{"op": "called", "nonce": 1, "formed": true, "types": [], "shapes": [], "dtypes": [], '
     b'"segments": [{"handle": "zz", "nbytes": 4}]}', "a segment"),
    (b'{"op": "called", "nonce": 1, "formed": true, "types": [], "shapes": [], "dtypes": [], '
     b'"call_ms": [' + b"1," * 1024 + b'1]}', "at most 1024"),
    (b'{"op": "pong", "nonce": "x"}', "nonce"),
    (b'{"op": "profiled", "kernels": ["a"], "aten_ops": [], "kernel_us": [1, 2]}', "kernel times"),
    (b'{"op": "ready", "weights": "mine", "landlock": 1}', "not one of"),
    (b'{"op": "ready", "weights": "seeded", "landlock": true}', "Landlock ABI"),
    (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    (b'{"op": "called", "ms": ' + b"9" * 5000 + b"}", "not JSON"),
    (json.dumps({"op": "pong", "pad": "x" * (5 * 2**20)}).encode(), "over the"),
])
def test_decode_reply_rejects_what_the_protocol_does_not_allow(raw, says):
    with pytest.raises(ProtocolViolation, match=says.replace("(", r"\(")):
        decode_reply(raw)


def test_decode_reply_bounds_and_coerces_what_it_accepts():
    raw = json.dumps({"op": "error", "kind": ["compile_error"], "stage": "forward", "message": "m" * 10**6,
                      "traceback": [{"file": "f", "line": 3}] * 50}).encode()
    claim = decode_reply(raw)
    assert claim.kind == "runtime_error"  # a kind that is not one of the three is a runtime error
    assert len(claim.message) == protocol.MAX_TEXT
    assert len(claim.traceback) == protocol.MAX_FRAMES


def test_every_claim_round_trips_through_the_wire():
    claims = [protocol.ReadyClaim(weights="seeded", landlock=0), protocol.BuiltClaim(landlock=7),
              protocol.PongClaim(nonce=3, call_ms=[0.5, 1.0]),
              protocol.ProfiledClaim(kernels=["k"], aten_ops=[], kernel_us=[2.5]),
              protocol.CalledClaim(nonce=2**62, formed=False, types=["builtins.int"], shapes=[None], dtypes=[None],
                                   call_ms=[1.5]),
              protocol.CalledClaim(nonce=1, formed=True, types=["torch.Tensor"], shapes=[[2, 3]], dtypes=["f"],
                                   call_ms=[1.5], places=[[protocol.PlaceClaim(segment=0, offset=64, strides=[3, 1])]],
                                   segments=[protocol.SegmentClaim(handle="ab" * 64, nbytes=4096)]),
              protocol.ErrorClaim(kind="interface_error", stage="interface", message="m", type="T",
                                  traceback=[protocol.FrameClaim("f", 1, "g", False, "t")])]
    assert [decode_reply(c.encode()) for c in claims] == claims
    assert set(protocol.CLAIMS) == {c.OP for c in claims}


def test_a_request_runs_enough_calls_to_outweigh_the_overhead_within_memory():
    from evalkit.judge.timing import MAX_BATCH, batch_size

    assert batch_size(0.01, 1024, "cuda", 20) == MAX_BATCH["cuda"] > batch_size(0.01, 1024, "cpu", 20) == MAX_BATCH["cpu"]
    assert batch_size(2.0, 1024, "cuda", 20) == 10  # about 20 ms of calls per request
    assert batch_size(2.0, 1024, "cuda", 100) == 50  # a longer request: more calls
    assert batch_size(100.0, 1024, "cuda", 20) == 1
    assert batch_size(0.01, 2 * 2**30, "cuda", 1000) == 1  # 3 copies of 2 GiB per call: no room for a second


def _recorded(judge: Judge) -> tuple[Any, Any, list[tuple[str, bool, int, int]]]:
    """The verdict of an honest answer judged by ``judge`` with a ``quiet`` and a ``use`` that record, at each
    request: its op, whether it was in the exclusive turn, how deep in uses, and how many uses were entered so far."""
    state = {"quiet": False, "use": 0, "entered": 0}
    seen: list[tuple[str, bool, int, int]] = []

    @contextmanager
    def quiet():
        state["quiet"] = True
        try:
            yield []
        finally:
            state["quiet"] = False

    @contextmanager
    def use():
        state["use"] += 1
        state["entered"] += 1
        try:
            yield
        finally:
            state["use"] -= 1

    def recording(worker: FakeWorker, request: protocol.Request) -> Any:
        seen.append((request.op, state["quiet"], state["use"], state["entered"]))
        return honest(worker, request)

    verdict, judgement, _ = _verdict(Judge(judge.ref, judge.settings, Limits(), quiet=quiet, use=use), recording)
    return verdict, judgement, seen


def test_the_overhead_probe_and_every_timed_request_run_while_builds_are_frozen_the_rest_in_a_use_of_the_gpu(judge):
    """Each request in the judge's exclusive turn (``quiet``: builds frozen, the GPU its alone) or in a shared use of
    the GPU (``use``), never in neither: on a GPU another judge's timing waits for the use, and no use starts while
    one times (evalkit/sandbox/gpu_gate.py)."""
    verdict, judgement, seen = _recorded(judge)
    assert verdict is Verdict.CORRECT, judgement.reason
    pings = [frozen for op, frozen, _, _ in seen if op == Op.PING]
    assert not pings[0] and all(pings[1:]), "the first ping only waits for the setup (its time unused): out of the turn"
    calls = [frozen for op, frozen, _, _ in seen if op == Op.CALL]
    timed = judgement.timing["attempts"] * (judge.settings.warmup_trials + judge.settings.timing_trials)
    assert calls[-timed:] == [True] * timed  # warm-up and timed requests
    assert not any(calls[:judge.settings.correctness_trials])  # correctness needs no quiet machine
    assert all(frozen or used for _, frozen, used, _ in seen), [entry for entry in seen if not any(entry[1:3])]
    assert any(op == Op.LOAD and used for op, _, used, _ in seen), "the load is in a use"
    assert contended_gpu_flag() not in judgement.flags


def test_each_correctness_request_enters_a_use_of_its_own_where_another_judges_timing_may_go_first(judge):
    """A stage's use is entered again around each of its requests (evalkit/sandbox/gpu_gate.py): there, another
    judge's timing that wants the GPU goes first, so it waits for one request rather than the whole stage."""
    verdict, judgement, seen = _recorded(judge)
    assert verdict is Verdict.CORRECT, judgement.reason
    correctness = [(depth, entered) for op, frozen, depth, entered in seen if op == Op.CALL and not frozen]
    assert len(correctness) == judge.settings.correctness_trials + 1  # trial 1's first call alone, then the trials
    assert all(depth >= 2 for depth, _ in correctness), "a correctness request ran in its stage's use alone"
    assert len({entered for _, entered in correctness}) == len(correctness), "two requests shared one nested use"


def contended_gpu_flag() -> str:
    from evalkit.records import Flag

    return Flag.CONTENDED_GPU.value


@pytest.mark.parametrize("contended_at", ["calibration", "timing"])
def test_a_timing_made_beside_another_judges_work_on_the_gpu_is_flagged_and_said(judge, contended_at):
    """The exclusive turn could not wait out another judge's use (``GpuGate.exclusive`` yields it), when the overhead
    was calibrated (the judge's first turn) or when the answer was timed (its later ones): the row says so."""
    from contextlib import contextmanager

    turns = []

    @contextmanager
    def contended_quiet():
        turns.append(len(turns))
        yield ["use.0.4242-abcdef"] if (turns[-1] == 0) == (contended_at == "calibration") else []

    verdict, judgement, _ = _verdict(Judge(judge.ref, judge.settings, Limits(), quiet=contended_quiet), None)
    assert verdict is Verdict.CORRECT, judgement.reason
    assert len(turns) >= 2
    assert judgement.flags.count(contended_gpu_flag()) == 1
    assert sum("other judge(s) still had work on this GPU" in warning for warning in judgement.warnings) == 1


def _settings(judge: Judge, **changes: Any) -> JudgeSettings:

    return dataclasses.replace(judge.settings, **changes)


@pytest.mark.parametrize("timing_checks", [10, 3])
def test_timing_checks_is_how_many_timed_requests_the_judge_checks(judge, monkeypatch, timing_checks):
    # An RL setting, 10 timed requests at most, with the secret draw never picking one: only the checks the
    # setting asks for are made (each a float64 reference of its request's inputs), and the answer still passes.
    from evalkit.judge import repetitions

    monkeypatch.setattr(repetitions, "VERIFIED_SHARE", 0.0)
    settings = _settings(judge, timing_trials=10, min_timing_trials=10, timing_checks=timing_checks)
    judgement = Judge(judge.ref, settings, Limits()).judge_with(FakeWorker(judge.ref, honest), Path("submission.py"))
    assert VERDICT_OF[judgement.finding] is Verdict.CORRECT, judgement.reason
    assert judgement.timing["requests"] == 10 and len(judgement.timing["verified_calls"]) == timing_checks


def test_a_slow_answer_stops_by_the_budget_after_few_requests(judge):
    # 0.2 s a request against a 0.5 s budget, with up to 50 timed requests and a minimum of 10 for the
    # precision: the budget ends the timing after MIN_REQUESTS requests, each of them checked.
    from evalkit.judge.repetitions import MIN_REQUESTS

    def slow(worker: FakeWorker, request: protocol.Request) -> Any:
        if request.op == Op.CALL:
            time.sleep(0.2)
        return honest(worker, request)

    settings = _settings(judge, timing_trials=50, min_timing_trials=10, timing_budget_s=0.5)
    worker = FakeWorker(judge.ref, slow)
    judgement = Judge(judge.ref, settings, Limits()).judge_with(worker, Path("submission.py"))
    assert VERDICT_OF[judgement.finding] is Verdict.CORRECT, judgement.reason
    timing = judgement.timing
    assert (timing["stopped_by"], timing["requests"], timing["count"]) == ("budget", MIN_REQUESTS, MIN_REQUESTS)
    assert len(timing["verified_calls"]) == MIN_REQUESTS  # the budget affords 2 requests: all 3 are checked
    calls = sum(r.op == Op.CALL for r in worker.requests)
    assert calls == 1 + settings.correctness_trials + timing["attempts"] * (settings.warmup_trials + MIN_REQUESTS)


def test_the_checked_requests_come_from_the_judges_secret_alone(judge, monkeypatch):
    # 40 timed requests (never precise enough, a budget never spent): which are checked differs from one
    # judging to the next, though the worker does the same; with the judge's secret fixed it is the same,
    # though the times differ. Checked or not, every request the worker sees is the same bare call.
    import secrets as real_secrets

    from evalkit.judge import contender, repetitions, submission_judge

    settings = _settings(judge, timing_trials=40, min_timing_trials=10, timing_budget_s=1e6, timing_precision=1e-3)
    # Never precise enough, whatever the load: a loaded machine's clock floor (``floor_ms``) once made 1e-3 reachable.
    monkeypatch.setattr(repetitions, "precise_enough", lambda *args, **kwargs: False)
    # Never noisy either: a second attempt on a loaded machine draws its checks anew, which is not what this asks.
    monkeypatch.setattr(submission_judge, "is_noisy", lambda *args, **kwargs: False)

    def uneven(worker: FakeWorker, request: protocol.Request) -> Any:  # every other request 4 ms longer
        if request.op == Op.CALL and len(worker.requests) % 2:
            time.sleep(0.004)
        return honest(worker, request)

    def checked() -> tuple[int, ...]:
        worker = FakeWorker(judge.ref, uneven)
        judgement = Judge(judge.ref, settings, Limits()).judge_with(worker, Path("submission.py"))
        assert judgement.timing["stopped_by"] == "max_trials" and judgement.timing["requests"] == 40
        calls = [r for r in worker.requests if r.op == Op.CALL]
        assert len({dataclasses.replace(r, nonce=0) for r in calls[1:]}) == 1
        return tuple(judgement.timing["verified_calls"])

    first, second = checked(), checked()
    assert first != second
    assert len(first) >= 10 and len(second) >= 10

    class FixedSecret:
        randbelow = staticmethod(real_secrets.randbelow)  # the inputs' seed stays secret and fresh

        @staticmethod
        def randbits(bits: int) -> int:
            return 12345

    monkeypatch.setattr(contender, "secrets", FixedSecret)
    assert checked() == checked()


def test_one_judges_answers_share_secret_correctness_inputs_and_their_reference_is_computed_once(monkeypatch):
    ref = ReferenceProblem(load_problem(FIXTURES / "judge_problems" / "linear_relu"), "cpu", init_seed=3)
    settings = JudgeSettings(atol=1e-2, rtol=1e-2, correctness_trials=2, timing_trials=3, warmup_trials=1,
                             run_timeout_s=5, seed=11)
    judge, other = Judge(ref, settings, Limits()), Judge(ref, settings, Limits())
    computed: list[int] = []
    real_expected = ReferenceProblem.expected
    monkeypatch.setattr(ReferenceProblem, "expected",
                        lambda self, inputs: computed.append(1) or real_expected(self, inputs))
    first_inputs: dict[int, torch.Tensor] = {}

    def recording(worker: FakeWorker, request: protocol.Request) -> Any:
        if request.op == Op.CALL and id(worker) not in first_inputs:
            first_inputs[id(worker)] = torch.stack([inputs[0].clone() for inputs in worker.inputs[:request.calls]])
        return honest(worker, request)

    workers = [FakeWorker(ref, recording), FakeWorker(ref, recording)]
    first = judge.judge_with(workers[0], Path("submission.py"))
    by_first = len(computed)
    second = judge.judge_with(workers[1], Path("submission.py"))
    assert VERDICT_OF[first.finding] is VERDICT_OF[second.finding] is Verdict.CORRECT
    assert first.correctness["inputs_seed"] == second.correctness["inputs_seed"] != other.correctness_inputs_seed
    assert first.correctness["timing_inputs_seed"] != second.correctness["timing_inputs_seed"]
    assert torch.equal(first_inputs[id(workers[0])], first_inputs[id(workers[1])])
    calls = settings.correctness_trials * judge.batch
    assert by_first == calls + len(first.timing["verified_calls"])
    # The second answer's correctness trials reuse every float64 output: only its verified timed calls need one.
    assert len(computed) - by_first == len(second.timing["verified_calls"])


def test_the_buffers_lent_to_a_worker_are_freed_only_once_it_has_ended(judge, caplog):
    class Lent:
        freed = False

        def free(self) -> None:
            self.freed = True

    for ended in (True, False):
        worker = FakeWorker(judge.ref)
        worker.ended = lambda ended=ended: ended
        session = Session(worker, judge.ref, judge.time_limits, batch=1)
        lent = Lent()
        session._lent.append(lent)
        session.release()
        assert lent.freed is ended
        assert session.inputs == [] and session.claim is None
    assert "still alive" in caplog.text


def _profiling(judge: Judge, on_profile: Callable[[FakeWorker], Any], timed: FakeWorker) -> FakeWorker:
    """A worker to profile in: honest, and ``on_profile`` answers its profile request (once ``timed`` is closed)."""
    def script(worker: FakeWorker, request: protocol.Request) -> Any:
        if request.op == Op.PROFILE:
            assert timed.closed, "profiled while the timed worker was still open"
            return on_profile(worker)
        return honest(worker, request)
    return FakeWorker(judge.ref, script)


def test_a_passing_answer_is_profiled_in_a_worker_of_its_own_once_its_timed_worker_is_closed(judge, tmp_path):
    code = tmp_path / "submission.py"
    code.write_text("# builds kernels with load_inline\n")
    timed = FakeWorker(judge.ref)
    library_only = protocol.ProfiledClaim(kernels=["at::native::vectorized_elementwise_kernel"],
                                          aten_ops=["aten::relu"], kernel_us=[5.0])
    profiling = _profiling(judge, lambda worker: library_only, timed)
    judgement = judge.examine(timed, code, profiler=lambda: (profiling, code))
    assert VERDICT_OF[judgement.finding] is Verdict.CORRECT and judgement.timing, judgement.reason
    assert Op.PROFILE not in [r.op for r in timed.requests], "the timed worker never starts the profiler"
    ops = [r.op for r in profiling.requests]
    assert ops == [Op.SETUP, Op.LOAD, Op.CALL, Op.PROFILE], "loaded, called once, then profiled for one call"
    assert profiling.requests[0].code_path == str(code) and profiling.requests[2].calls == 1
    assert {"fallback", "no_custom_kernel"} <= set(judgement.flags)  # what it claims only adds flags
    assert judgement.correctness["kernels"] == library_only.kernels
    assert {"timing_s", "profile_s"} <= set(judgement.stage_seconds) and profiling.closed


def test_the_timed_requests_checks_are_made_while_the_profiles_worker_loads(judge, tmp_path, monkeypatch):
    # The judge's float64 work for the checks overlaps the profile's worker's start: made once its load request is
    # sent, before any reply of it is read.
    code = tmp_path / "submission.py"
    code.write_text("")
    timed = FakeWorker(judge.ref)
    profiling = _profiling(judge, lambda worker: protocol.ProfiledClaim(kernels=[], aten_ops=[], kernel_us=[]), timed)
    seen = []
    expected = judge.ref.expected_read_at_once

    def watched(inputs: list[Any]) -> list[torch.Tensor]:
        if timed.closed:  # a timed request's check, not a correctness trial's reference
            seen.append(([r.op for r in profiling.requests], [op for op, _ in profiling.waits_s]))
        return expected(inputs)
    monkeypatch.setattr(judge.ref, "expected_read_at_once", watched)
    judgement = judge.examine(timed, code, profiler=lambda: (profiling, code))
    assert VERDICT_OF[judgement.finding] is Verdict.CORRECT, judgement.reason
    assert len(seen) == len(judgement.timing["verified_calls"]) >= 3
    assert all(sent == [Op.SETUP, Op.LOAD] and Op.LOAD not in read for sent, read in seen), seen
    assert judgement.stage_seconds["checks_s"] > 0


def _dies_at_setup(worker: FakeWorker) -> FakeWorker:
    def send(message: protocol.Request) -> None:
        raise WorkerGone("crash", "the profile's worker ended at its setup")
    worker.send = send  # type: ignore[method-assign]
    return worker


@pytest.mark.parametrize("profiled", [lambda worker: worker, _dies_at_setup], ids=["honest", "dies_at_setup"])
def test_a_wrong_timed_output_is_the_verdict_of_an_answer_profiled_in_a_worker_of_its_own(judge, tmp_path, profiled):
    # Its checks are made during the profile's stage: their verdict stands whatever that worker does, and it is
    # never called.
    code = tmp_path / "submission.py"
    code.write_text("")
    timed = FakeWorker(judge.ref, every_timed_call(lambda out: out.fill_(float("nan"))))
    profiling = profiled(_profiling(judge, lambda worker: protocol.ProfiledClaim(kernels=[], aten_ops=[],
                                                                                  kernel_us=[]), timed))
    judgement = judge.examine(timed, code, profiler=lambda: (profiling, code))
    assert judgement.finding is Finding.WRONG_DURING_TIMING, judgement.reason
    assert not {Op.CALL, Op.PROFILE} & {r.op for r in profiling.requests} and profiling.closed


def test_an_answer_that_fails_when_profiled_gets_that_verdict(judge, tmp_path):
    code = tmp_path / "submission.py"
    code.write_text("")
    timed = FakeWorker(judge.ref)
    profiling = _profiling(judge, raise_(WorkerGone("crash", "the process ended when profiled")), timed)
    judgement = judge.examine(timed, code, profiler=lambda: (profiling, code))
    assert VERDICT_OF[judgement.finding] is Verdict.CRASH and "ended when profiled" in judgement.reason
    assert {"timing_s", "profile_s"} <= set(judgement.stage_seconds) and profiling.closed


@pytest.mark.parametrize("called, flags", [(["ext.relu_forward"], []),
                                           ([], ["fallback", "no_custom_kernel"])])
def test_on_a_cpu_the_timed_worker_is_profiled_once_timed_for_the_native_code_the_answer_called(judge, tmp_path,
                                                                                             called, flags):
    # No profiler names kernels on a CPU: one more call in the answer's own worker, after its timing, says which
    # native code it built was called (issue 42, F: a *.so in its folder is no longer what decides).
    code = tmp_path / "submission.py"
    code.write_text("ext = load_inline(name='ext', cpp_sources=SRC, functions=['relu_forward'])\n")

    def script(worker: FakeWorker, request: protocol.Request) -> Any:
        if request.op == Op.PROFILE:
            return protocol.ProfiledClaim(kernels=called, aten_ops=[], kernel_us=[])
        return honest(worker, request)
    timed = FakeWorker(judge.ref, script)
    judgement = judge.examine(timed, code)
    assert VERDICT_OF[judgement.finding] is Verdict.CORRECT and judgement.timing, judgement.reason
    assert [r.op for r in timed.requests][-1] == Op.PROFILE, "profiled last, after its timing"
    assert judgement.flags == flags and judgement.correctness["kernels"] == called
    assert "profile_s" in judgement.stage_seconds


def test_a_failing_answer_is_never_profiled(judge, tmp_path):
    profiled = []
    judgement = judge.examine(FakeWorker(judge.ref, on_call(1, raise_(WorkerGone("crash", "gone")))), tmp_path / "x.py",
                            profiler=lambda: profiled.append(1))
    assert VERDICT_OF[judgement.finding] is Verdict.CRASH and not profiled


SLOW_CLOSE_S = 1.0


def test_the_profiling_workers_close_is_counted_in_the_profile_not_as_the_timed_workers(judge, tmp_path):
    code = tmp_path / "submission.py"
    code.write_text("")
    timed = FakeWorker(judge.ref)
    profiling = _profiling(judge, lambda worker: protocol.ProfiledClaim(kernels=[], aten_ops=[], kernel_us=[]), timed)
    slow_close = profiling.close

    def close() -> tuple[str, str]:
        time.sleep(SLOW_CLOSE_S)
        return slow_close()
    profiling.close = close
    judgement = judge.examine(timed, code, profiler=lambda: (profiling, code))
    # the fake timed worker closes at once: even a loaded machine takes far less than the sleep for it
    assert judgement.stage_seconds["close_s"] < SLOW_CLOSE_S <= judgement.stage_seconds["profile_s"], \
        judgement.stage_seconds


@pytest.mark.parametrize("misbehave, verdict, says", [
    (raise_(WorkerGone("timeout", "timeout: stage 'profile'")), Verdict.TIMEOUT, "stage 'profile'"),
    (raise_(ProtocolViolation("a reply that is not JSON")), Verdict.RUNTIME_ERROR, "protocol violation"),
    (lambda worker: protocol.PongClaim(nonce=0), Verdict.RUNTIME_ERROR, "expected 'profiled', got 'pong'"),
])
def test_a_profiling_worker_that_hangs_or_breaks_the_protocol_fails_its_answer(judge, tmp_path, misbehave, verdict,
                                                                               says):
    code = tmp_path / "submission.py"
    code.write_text("")
    timed = FakeWorker(judge.ref)
    profiling = _profiling(judge, misbehave, timed)
    judgement = judge.examine(timed, code, profiler=lambda: (profiling, code))
    assert VERDICT_OF[judgement.finding] is verdict and says in judgement.reason, judgement.reason
    assert profiling.closed


def test_every_string_in_a_reply_is_made_safe_to_store():
    # A lone surrogate (no UTF-8 file holds one) and control characters, in any string a worker sends.
    raw = json.dumps({"op": "error", "kind": "runtime_error", "stage": "forward\x1b[2J",
                      "message": "RuntimeError: \ud800 bad\x07", "type": "E\udc00",
                      "traceback": [{"file": "x\ud800.py", "line": 3, "function": "f\x00", "text": "\ud800"}]})
    claim = decode_reply(raw.encode())
    stored = json.dumps(error_record(claim), ensure_ascii=False)
    assert stored.encode("utf-8")  # no UnicodeEncodeError
    assert claim.message == "RuntimeError: \ufffd bad\ufffd" and claim.stage == "forward\ufffd[2J"
    assert claim.traceback[0].file == "x\ufffd.py" and claim.traceback[0].function == "f\ufffd"


def test_a_requests_inputs_are_copied_in_while_its_worker_is_frozen_and_the_clock_starts_before_it_wakes(judge,
                                                                                                       monkeypatch):
    """The copy of the inputs is out of the timed span (nothing of the worker runs while the judge makes it, so the
    worker first sees them with the clock running), and waking the worker is inside it."""
    from evalkit.judge import session as session_module

    events: list[str] = []

    class Watched(FakeWorker):
        def thaw(self) -> None:
            events.append("thaw")
            super().thaw()

    real_init, real_load = session_module.Session.__init__, session_module.Session._load_inputs

    def init(self, *args: Any, **kwargs: Any) -> None:
        real_init(self, *args, **kwargs)
        self._perf_counter = lambda: (events.append("clock"), time.perf_counter())[1]

    def load_inputs(self, originals: list[list[Any]]) -> None:
        events.append("inputs into a frozen worker" if self.worker.frozen else "inputs into a running worker")
        real_load(self, originals)

    monkeypatch.setattr(session_module.Session, "__init__", init)
    monkeypatch.setattr(session_module.Session, "_load_inputs", load_inputs)
    worker = Watched(judge.ref)
    worker.frozen = True  # as a worker is once set up
    judgement = judge.judge_with(worker, Path("submission.py"))
    assert VERDICT_OF[judgement.finding] is Verdict.CORRECT, judgement.reason
    copies = [i for i, event in enumerate(events) if event.startswith("inputs")]
    assert len(copies) > 10 and "inputs into a running worker" not in events
    assert all(events[i + 1:i + 3] == ["clock", "thaw"] for i in copies)
