"""Trusted side: one prepared worker, as a timing window uses it: an answer, or a baseline (the reference judged as
a submission).

``Contender.prepare`` starts the worker, calibrates the judge's own overhead on it while no submission code has
run (unless it is given the figure of a worker that did: its live baseline's), loads the code and runs the
correctness trials; ``timed_request`` then makes one timed request on fresh
inputs, and ``check_timed`` checks what the judge took of it. Every call's inputs come from a seed of its own,
``reference.input_seed`` of a secret and the call's number, so no call's inputs, even its seed, tell anything
of another's; the calibration pings move zeros, never inputs.
"""

from __future__ import annotations

import random
import secrets
import time
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Protocol

import torch

from evalkit.judge.plausibility import half_storage, precision_class, reduced_precision
from evalkit.judge.judge_settings import JudgeSettings
from evalkit.judge.reference import REFERENCE_TURN, OutputSpec, ReferenceProblem, input_seed
from evalkit.judge.session import Session
from evalkit.judge.tensor_check import Comparison, Taken, compare_outputs, compare_taken, take_sample
from evalkit.judge.timing import CALIBRATION_PINGS, CALIBRATION_WARMUP, L2Flusher, Overhead, collector_paused
from evalkit.judge.verdicts import Finding, Judgement, Stop, confinement_warnings
from evalkit.records import Flag
from evalkit.row_parts import CorrectnessRecord, PytorchOwnRecord
from evalkit.sandbox import protocol
from evalkit.sandbox.gpu_gate import contention_note


class JudgeState(Protocol):
    """What a contender reads of the judge that holds it (``submission_judge.Judge``, whose module imports this
    one): the problem's reference and facts, its inputs, and the judge's turns on the GPU."""

    ref: ReferenceProblem
    specs: list[OutputSpec]
    input_templates: list[Any]
    pytorch_error: PytorchOwnRecord
    correctness_inputs_seed: int
    flusher: L2Flusher
    quiet: Callable[[], AbstractContextManager[Any]]
    use: Callable[[], AbstractContextManager[Any]]

    def setup_fields(self, code_path: Path) -> dict[str, Any]: ...
    def zero_inputs(self) -> list[Any]: ...
    def correctness_inputs(self, call: int) -> list[Any]: ...
    def expected(self, call: int, originals: list[Any]) -> list[torch.Tensor]: ...


@dataclass(frozen=True)
class BeyondEvents:
    """A timed request's parts beyond the worker's own events, on the judge's clock (ms): until its reply less the
    events (None when the reply gave none for every call), the freeze, the idle probe (``session.RequestParts``)."""

    reply_beyond_events_ms: float | None
    freeze_ms: float
    idle_ms: float


@dataclass
class _PendingCheck:
    """A timed request's call taken for a check: its outputs' values (at secret positions, or whole when small) and
    the seed its inputs were drawn from."""

    request: int
    call: int
    seed: int
    taken: list[Taken]


class Contender:
    """One worker's session with the judge's state (``judge``: a ``submission_judge.Judge``) and settings."""

    def __init__(self, judge: JudgeState, settings: JudgeSettings, session: Session, verify: bool = True) -> None:
        self.judge, self.settings, self.session, self.ref = judge, settings, session, judge.ref
        self.verify = verify  # check timed outputs against the reference (a baseline's are the reference's own)
        self.timing_secret = secrets.randbits(62)  # the key of every timed call's input seed: never sent
        self.rng = random.Random(secrets.randbits(64))  # which timed calls are checked, and the window's order
        self.calls_drawn = 0
        self._pending: list[_PendingCheck] = []  # outputs taken from timed requests, compared after the window
        self.calibrated = Overhead(0.0, 0.0)  # the part of a request subtracted, by pings before the code loaded
        self.overhead = self.calibrated  # the figure in use (a window measures it anew: ``window.window_overhead``)
        self.zeros: list[list[Any]] = []
        self.last_claim_ms: float | None = None  # the worker's own time of its last request's calls, per call
        self.last_events_ms: float | None = None  # and of all of them: what its request took by its own events
        self.last_parts = BeyondEvents(None, 0.0, 0.0)  # its last request's
        self.failed = False  # set once a request of it failed: a kept baseline is then started anew
        self.stage_seconds: dict[str, float] = {}
        self.flags: list[str] = []
        self.turn_wait_s = 0.0  # waiting for the GPU's turn (``turn``), part of calibrate_s and timing_s
        self.checks_s = 0.0  # the judge's checks of timed requests (``check_timed``), part of timing_s

    @property
    def batch(self) -> int:
        return self.session.batch

    @contextmanager
    def turn(self) -> Iterator[list[str]]:
        """A measurement's turn on the machine (``judge.quiet``: builds frozen, the GPU to itself) with the garbage
        collector paused; yields the other judges' uses of the GPU it was made beside. Its wait is counted."""
        start = time.monotonic()
        with self.judge.quiet() as beside, collector_paused():
            self.turn_wait_s += time.monotonic() - start
            yield list(beside or [])

    def waits(self) -> dict[str, float]:
        """Where a judged answer's time went inside its stages: its waits for the GPU's turn, and its timed
        requests' checks (``stage_seconds``' parts of other stages)."""
        return {"turn_wait_s": self.turn_wait_s, **({"checks_s": self.checks_s} if self.checks_s else {})}

    @property
    def per_call(self) -> Overhead:
        """The judge's own overhead of a request, per call of it."""
        return Overhead(self.overhead.total_ms / self.batch, self.overhead.jitter_ms / self.batch)

    def per_call_ms(self, wall_ms: float) -> float:
        """A request's time per call, the judge's own overhead taken out: never below what the judge can tell
        from nothing (its overhead's jitter per call, 1 us at least), so no call reads 0 ms and no ratio divides
        by it."""
        return max(wall_ms / self.batch - self.per_call.total_ms, self.per_call.jitter_ms, 1e-3)

    def prepare(self, code_path: Path, stages: dict[str, float], calibrated: Overhead | None = None) -> Judgement:
        """Start, calibrate, load and check the code at ``code_path``: a passing judgement with its correctness
        record, or ``Stop`` with what failed. All of it but the calibration is a shared use of the GPU
        (``judge.use``): it may run beside other judges' work, never beside a timing. ``calibrated``: the figure
        of another worker's pings on this problem (its live baseline's), taken instead of pinging this one."""
        contended: list[str] = []
        with self.judge.use():
            start = time.monotonic()
            setup_s = self._start_and_calibrate(code_path, contended, calibrated)
            stages["setup_s"] = setup_s  # until the worker answered its first ping: it was set up (and started)
            stages["calibrate_s"] = time.monotonic() - start - setup_s
            start = time.monotonic()
            ready = self.session.load()
            stages["load_s"] = time.monotonic() - start
            start = time.monotonic()
            correctness = self._check_correctness()
            correctness["weights"] = ready.weights
            stages["correctness_s"] = time.monotonic() - start
        correctness["precision_class"] = precision_class(correctness["rel_l2_err"])
        judgement = Judgement(Finding.PASSED, "", correctness=correctness)
        if reduced_precision(correctness):
            judgement.flags.append(Flag.REDUCED_PRECISION.value)
        if contended:  # its overhead was calibrated beside other judges' work on the GPU
            judgement.flags.append(Flag.CONTENDED_GPU.value)
            judgement.warnings.append(contention_note(contended))
        judgement.warnings.extend(confinement_warnings(ready))
        if ready.weights == "seeded":
            judgement.warnings.append("ModelNew's parameters differ from Model's in names or shapes: "
                                      "weights come from seeding the RNG identically, not from the state_dict")
        return judgement

    def _start_and_calibrate(self, code_path: Path, contended: list[str], calibrated: Overhead | None) -> float:
        """Set the worker up, then time pings along a timed request's path while no submission code has run; the
        seconds until the first ping's reply (the setup, and what was left of the worker's start). The first ping
        only waits for the setup (its time is not used): it is made outside the measurement, so the setup's work
        is not in the GPU's exclusive turn, and the worker is frozen, its GPU work over, before the turn is asked
        for. ``contended``: the other judges' uses the calibration was made beside, if any. Given ``calibrated``
        (pings of another worker on the same path, sizes and batch), only the first ping is made: every worker's
        pings measure the same harness, and a window subtracts one figure from both its sides anyway."""
        judge = self.judge
        start = time.monotonic()  # a CPU worker's setup reply (``Session.start``) waits for what is left of its start
        self.session.start(judge.setup_fields(code_path), judge.specs, judge.input_templates)
        self.zeros = [judge.zero_inputs() for _ in range(self.batch)]  # a ping moves as much as a call, tells nothing
        self.session.calibrate(self.zeros, lambda made: bool(made))
        first_s = time.monotonic() - start
        if calibrated is not None:
            self.calibrated = self.overhead = calibrated
            return first_s
        with self.turn() as beside:  # a measurement like any timing: builds frozen meanwhile
            contended.extend(beside)
            self.session.calibrate(self.zeros, CALIBRATION_WARMUP.enough)
            pings = self.session.calibrate(self.zeros, CALIBRATION_PINGS.enough)
        self.calibrated = self.overhead = Overhead.from_pings(pings)
        return first_s

    def _call(self, originals: list[list[Any]]) -> tuple[float, protocol.CalledClaim]:
        wall_ms, claim = self.session.observe(originals)
        self.session.check_delivery(claim, self.judge.specs)
        return wall_ms, claim

    def _check_correctness(self) -> CorrectnessRecord:
        """The correctness trials, each one request of a batch of calls on the judge's correctness inputs. The
        first request runs trial 1's first call alone, so that a hang costs the first call's limit rather than a
        whole batch's (23 s on a problem of 5.85 ms calls, four to a request, against 10 s)."""
        worst: Comparison | None = None
        stored_as: str | None = None
        judge, batch = self.judge, self.batch
        requests = [[0]] + [[trial * batch + k for k in range(batch)] for trial in range(self.settings.correctness_trials)]
        for numbers in requests:
            with judge.use():  # a point where another judge's timing may go first (``gpu_gate``)
                originals = [judge.correctness_inputs(number) for number in numbers]
                self._call(originals)
            for k, (number, inputs) in enumerate(zip(numbers, originals)):
                with REFERENCE_TURN:  # its float64 outputs are read before the reference's next request
                    expected = judge.expected(number, inputs)
                    comparisons = self._compare(k, expected)
                    stored_as = stored_as or half_storage(self.session.outputs(k), expected)
                for index, result in enumerate(comparisons):
                    if not result.ok:
                        trial = number // batch + 1
                        seed = input_seed(judge.correctness_inputs_seed, number)
                        failed = CorrectnessRecord(failed_trial=trial, output_index=index, seed=seed,
                                                   atol=self.settings.atol, rtol=self.settings.rtol)
                        failed.update(result.to_record())
                        raise Stop(Finding.WRONG_VALUES, f"trial {trial}, output {index}: {result.reason}",
                                   {"correctness": failed})
                    if worst is None or result.max_abs_err > worst.max_abs_err:
                        worst = result
        settings = self.settings
        return CorrectnessRecord(
            trials=settings.correctness_trials, calls_per_trial=batch, atol=settings.atol, rtol=settings.rtol,
            reference_precision=self.ref.precision, max_abs_err=worst.max_abs_err if worst else 0.0,
            max_rel_err=worst.max_rel_err if worst else 0.0, rel_l2_err=worst.rel_l2_err if worst else 0.0,
            pytorch_own=judge.pytorch_error, seed=settings.seed, inputs_seed=judge.correctness_inputs_seed,
            timing_inputs_seed=self.timing_secret, stored_as=stored_as)

    def _compare(self, k: int, expected: list[torch.Tensor]) -> list[Comparison]:
        """Call ``k``'s outputs in the last request, read where the worker keeps them, against ``expected``, the
        float64 reference, whole."""
        atol, rtol = self.settings.atol, self.settings.rtol
        return [compare_outputs(out, exp, atol=atol, rtol=rtol, expected_dtype=spec.dtype)
                for out, exp, spec in zip(self.session.outputs(k), expected, self.judge.specs)]

    def timed_request(self) -> tuple[float, list[list[Any]]]:
        """One timed request on fresh inputs (each call's from a seed of its own) after an L2 flush. (The judge's
        milliseconds, the inputs.)"""
        first, self.calls_drawn = self.calls_drawn, self.calls_drawn + self.batch
        originals = [self.ref.make_inputs(input_seed(self.timing_secret, first + k)) for k in range(self.batch)]
        self.judge.flusher.flush()
        wall_ms, claim = self._call(originals)
        self.last_events_ms = sum(claim.call_ms) if len(claim.call_ms) == len(originals) else None
        self.last_claim_ms = self.last_events_ms / len(originals) if self.last_events_ms is not None else None
        parts = self.session.last_parts
        beyond = parts.reply_ms - self.last_events_ms if self.last_events_ms is not None else None
        self.last_parts = BeyondEvents(beyond, parts.freeze_ms, parts.idle_ms)
        return wall_ms, originals

    def check_timed(self, originals: list[list[Any]], request: int, drawn: bool) -> bool:
        """Take timed request ``request`` for a check against the reference when ``drawn``: one of its calls,
        picked by the secret generator, its outputs read at positions drawn now (the worker is frozen, its outputs
        where its calls left them). The float64 reference it is compared with is computed after the window
        (``finish_checks``), outside the GPU's exclusive turn, from the call's input seed. Whether it took one."""
        if not (self.verify and drawn):
            return False
        start = time.monotonic()
        k = self.rng.randrange(self.batch)
        taken = [take_sample(out, secrets.randbits(62)) for out in self.session.outputs(k)]
        seed = input_seed(self.timing_secret, self.calls_drawn - self.batch + k)  # the last request's call k
        self._pending.append(_PendingCheck(request, k, seed, taken))
        self.checks_s += time.monotonic() - start
        return True

    def finish_checks(self) -> None:
        """Compare the outputs taken from timed requests (``check_timed``) with the float64 reference of their
        inputs, drawn again from their seeds; ``Stop`` at the first wrong one, naming its request and call."""
        start = time.monotonic()
        try:
            while self._pending:
                check = self._pending.pop(0)
                with self.judge.use(), REFERENCE_TURN:  # a point where another judge's timing may go first
                    expected = self.ref.expected_read_at_once(self.ref.make_inputs(check.seed))
                    results = [compare_taken(taken, exp, atol=self.settings.atol, rtol=self.settings.rtol,
                                             expected_dtype=spec.dtype)
                               for taken, exp, spec in zip(check.taken, expected, self.judge.specs)]
                for index, result in enumerate(results):
                    if not result.ok:
                        raise Stop(Finding.WRONG_DURING_TIMING,
                                   f"an output produced during timing (request {check.request + 1}, call "
                                   f"{check.call + 1}) is wrong: {result.reason}",
                                   {"correctness": self._failed_timed(check.request, index, result)})
        finally:
            self._pending.clear()
            self.checks_s += time.monotonic() - start

    def _failed_timed(self, request: int, index: int, result: Comparison) -> CorrectnessRecord:
        """The correctness record of output ``index`` of timed request ``request``, found wrong."""
        failed = CorrectnessRecord(timed_request=request + 1, output_index=index, atol=self.settings.atol,
                                   rtol=self.settings.rtol)
        failed.update(result.to_record())
        return failed
