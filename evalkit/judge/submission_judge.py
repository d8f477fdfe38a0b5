"""Trusted side: judging one submission's worker: load, correctness trials, timing, then its kernels.

The judge owns the inputs, the output buffers, the reference and the comparison. The worker only
ever receives copies of inputs and writes into buffers the judge poisons before every call; every call's
time is the judge's own (``session.Session.observe``) minus an overhead it calibrated before the submission
was loaded, and every check is made on the judge's private copy of the outputs. What the judge concludes
comes from what it observes itself, reported as a ``verdicts.Judgement``. The baselines are the reference
judged here exactly like a submission (``judge_reference``).
"""

from __future__ import annotations

import logging
import random
import secrets
import statistics
import time
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import torch

from evalkit.judge.baselines import reference_as_submission
from evalkit.judge.kernel_profile import ProfilingWorker, observe_kernels
from evalkit.judge.plausibility import half_storage, precision_class, reduced_precision
from evalkit.judge.reference import OutputSpec, ReferenceProblem, correctness_seed, timing_seed, values_bytes
from evalkit.judge.repetitions import Repetitions, RepetitionRule
from evalkit.judge.session import Session, WorkerChannel, unwritten
from evalkit.judge.tensor_check import Comparison, compare_outputs, compare_sampled
from evalkit.judge.time_limits import TimeLimits, reference_ms, time_limits
from evalkit.judge.timing import (CALIBRATION_PINGS, CALIBRATION_WARMUP, L2Flusher, Overhead, batch_size,
                                  collector_paused, is_noisy, net_stats)
from evalkit.judge.verdicts import Finding, Judgement, Stop, confinement_warnings, crash_reason
from evalkit.records import Flag, to_jsonable
from evalkit.sandbox import protocol
from evalkit.sandbox.launcher import Limits, UntrustedProcess, WorkerGone
from evalkit.sources.settings import ProblemSettings

logger = logging.getLogger(__name__)

# The float64 outputs of the correctness trials a judge keeps, to judge its problem's next answers on the same
# inputs without computing them again: float64 references were most of a judged answer's time on the H200.
EXPECTED_CACHE_BYTES = {"cuda": 4 * 2**30, "cpu": 2**30}
COMPILE_FIRST_CALL_S = 900.0  # torch.compile's first call compiles: the compile baseline gets this long
Quiet = Callable[[], AbstractContextManager[None]]
_DEFAULTS = ProblemSettings()  # the one declaration of every setting's default


@dataclass(frozen=True)
class JudgeSettings:
    """How one problem's submissions (and its baselines) are judged: problem.toml's settings, overridden
    per run (``evalkit.schedule.options.ScoreOptions.judge_settings``). The timing fields default to
    problem.toml's declared defaults (``evalkit.sources.settings.ProblemSettings``)."""

    atol: float
    rtol: float
    correctness_trials: int
    timing_trials: int
    warmup_trials: int
    run_timeout_s: float | None  # every step's limit; None: derived from the reference's time
    seed: int
    time_submissions: bool = True
    min_timing_trials: int = _DEFAULTS.min_timing_trials  # timing_trials is the most (evalkit/judge/repetitions.py)
    timing_budget_s: float = _DEFAULTS.timing_budget_s
    timing_precision: float = _DEFAULTS.timing_precision

    def repetitions(self) -> RepetitionRule:
        """When a timing stops (docs/judge.md, How many calls)."""
        return RepetitionRule(min_requests=self.min_timing_trials, max_requests=self.timing_trials,
                              precision=self.timing_precision, budget_s=self.timing_budget_s)

    def timing_key(self) -> str:
        """The settings that shape a timing, as text: part of a cached baseline's key."""
        return (f"warmup {self.warmup_trials} trials {self.timing_trials} min {self.min_timing_trials} "
                f"budget {self.timing_budget_s:g} precision {self.timing_precision:g}")


class Judge:
    """Judges submissions of one problem on one device; reuse it for all of that problem's submissions.

    ``quiet`` is entered around every timing: it keeps other untrusted code (builds) off the machine
    (``evalkit.sandbox.freezer.BuildFreezer.timing``); by default nothing is paused.
    """

    def __init__(self, ref: ReferenceProblem, settings: JudgeSettings, limits: Limits,
                 quiet: Quiet | None = None) -> None:
        settings.repetitions()  # refuses a timing rule that makes no sense before anything runs
        self.ref, self.settings, self.limits = ref, settings, limits
        self.quiet = quiet or nullcontext
        self.flusher = L2Flusher(ref.device)
        self.reference_ms = reference_ms(ref, settings.seed)  # also sizes the batch
        self.time_limits = time_limits(self.reference_ms, settings.run_timeout_s)
        self.specs, self.input_templates, self.pytorch_error = self._first_trial_facts()
        self.batch = batch_size(self.reference_ms, values_bytes(self.input_templates) + values_bytes(self.specs), ref.device)
        # Secret, and the same for every answer this judge judges: their correctness trials share inputs, so each
        # float64 output is computed once (``expected``). Nothing carries from one sandbox to the next to use it.
        self.correctness_inputs_seed = secrets.randbelow(2**62)
        self._expected: dict[int, list[torch.Tensor]] = {}
        self._expected_room = EXPECTED_CACHE_BYTES.get(ref.device, EXPECTED_CACHE_BYTES["cpu"])

    def _first_trial_facts(self) -> tuple[list[OutputSpec], list[Any], dict[str, Any]]:
        """The outputs' form, the inputs' form and PyTorch's own float32 error, from the first trial's inputs."""
        originals = self.ref.make_inputs(correctness_seed(self.settings.seed, 0))
        own = self.ref.pytorch_float32(originals)
        specs = self.ref.output_specs(own)
        self.ref.pick_float64_backend(originals)
        expected = self.ref.expected(originals)
        result = compare_outputs(own[0], expected[0], atol=self.settings.atol, rtol=self.settings.rtol,
                                 expected_dtype=specs[0].dtype)
        templates = [torch.empty_like(v, device="meta") if isinstance(v, torch.Tensor) else v for v in originals]
        error = {"max_abs_err": result.max_abs_err, "max_rel_err": result.max_rel_err, "rel_l2_err": result.rel_l2_err}
        return specs, templates, error

    def correctness_inputs(self, call: int) -> list[Any]:
        """The inputs of correctness call ``call`` (trial * batch + k), the same for every answer."""
        return self.ref.make_inputs(correctness_seed(self.correctness_inputs_seed, call))

    def expected(self, call: int, originals: list[Any]) -> list[torch.Tensor]:
        """The float64 reference of correctness call ``call`` on ``originals`` (its inputs): computed once, while
        the cache has room."""
        if call in self._expected:
            return self._expected[call]
        expected = self.ref.expected(originals)
        size = values_bytes(expected)
        if size <= self._expected_room:
            self._expected[call], self._expected_room = expected, self._expected_room - size
        return expected

    def judge(self, worker: WorkerChannel, code_path: Path, compiles_on_first_call: bool = True,
              profiler: ProfilingWorker | None = None) -> Judgement:
        """Judge the code at ``code_path`` in ``worker``, a fresh sandboxed one (the first call's limit is the longer
        one unless the caller knows the answer has nothing to compile then: ``time_limits.compiles_on_first_call``);
        then, when it passed and ``profiler`` gives a worker to profile in, which kernels it launches
        (``kernel_profile``)."""
        limits = self.time_limits.for_answer(compiles_on_first_call)
        judgement = self.judge_with(worker, code_path, limits=limits)
        if profiler is None or judgement.finding is not Finding.PASSED:
            return judgement
        start, timed_stages = time.monotonic(), dict(judgement.stage_seconds)  # the profile's close is its own
        worker, code_path = profiler()
        session = Session(worker, self.ref, limits, batch=1)
        originals = self.ref.make_inputs(timing_seed(secrets.randbelow(2**62), 0))

        def observe() -> Judgement:
            judgement.flags.extend(observe_kernels(session, self.setup_fields(code_path), self.specs,
                                                   self.input_templates, originals, judgement.correctness))
            return judgement
        result = self._through(worker, session, observe, {})
        result.stage_seconds = {**timed_stages, "profile_s": time.monotonic() - start}
        return result

    def setup_fields(self, code_path: Path) -> dict[str, Any]:
        """The setup request's fields for a worker that runs the code at ``code_path`` (its shared buffers aside)."""
        return {"mode": "judge", "code_path": str(code_path), "device": self.ref.device,
                "limits": self.limits.to_dict(), "init_inputs": self.ref.init_inputs, "init_seed": self.ref.init_seed,
                "n_inputs": self.ref.n_inputs, "state_dict": self.ref.state_dict}

    def judge_reference(self, kind: str, worker: UntrustedProcess) -> dict[str, Any]:
        """A baseline: the reference written as a submission (``kind`` eager or compile) and judged like one, in
        ``worker`` (a fresh sandboxed one, whose folder the caller removes). Returns its timing record, or
        ``{"error": why}``. torch.compile's caches go where every worker's temporary files do: its own folder."""
        code_path = worker.workdir / "submission.py"
        code_path.write_text(reference_as_submission(self.ref.problem.reference_path.read_text(), kind))
        settings = replace(self.settings, time_submissions=True,
                           warmup_trials=max(self.settings.warmup_trials, 3 if kind == "compile" else 1))
        limits = self.time_limits.for_answer(compiles_on_first_call=True)  # trusted code: the generous limit
        if kind == "compile":
            limits = replace(limits, first_call_s=max(limits.first_call_s, COMPILE_FIRST_CALL_S))
        judgement = self.judge_with(worker, code_path, settings=settings, limits=limits)
        if judgement.finding is not Finding.PASSED or not judgement.timing:
            return {"error": f"the reference judged as a submission: {judgement.reason}"[:500]}
        return {**judgement.timing, "flags": judgement.flags, "stage_seconds": judgement.stage_seconds}

    def judge_with(self, worker: WorkerChannel, code_path: Path, *, settings: JudgeSettings | None = None,
                   limits: TimeLimits | None = None) -> Judgement:
        """Judge through ``worker`` (any channel speaking the protocol), then close it."""
        stages: dict[str, float] = {}
        run = _Run(self, settings or self.settings, Session(worker, self.ref, limits or self.time_limits, self.batch))
        return self._through(worker, run.session, lambda: run.run(code_path, stages), stages)

    def _through(self, worker: WorkerChannel, session: Session, work: Callable[[], Judgement],
                 stages: dict[str, float]) -> Judgement:
        """``work``'s judgement, or the failure that ended it (whatever the worker did); then ``worker`` closed."""
        try:
            result = work()
        except Stop as stop:
            result = Judgement.stopped(stop)
        except WorkerGone as gone:
            finding = Finding.WORKER_TIMED_OUT if gone.kind == "timeout" else Finding.WORKER_DIED
            result = Judgement(finding, str(gone), error={"kind": gone.kind, "message": str(gone)})
        finally:
            start = time.monotonic()
            stdout, stderr = worker.close()
            session.release()
            stages["close_s"] = time.monotonic() - start
        result.stage_seconds.update(stages)
        if result.error is not None or result.finding in (Finding.WORKER_DIED, Finding.WORKER_TIMED_OUT):
            result.error = dict(result.error or {}, stdout_tail=stdout[-4000:], stderr_tail=stderr[-8000:])
            if result.finding is Finding.WORKER_DIED:
                result.reason = crash_reason(result.reason, stderr)
        return result


@dataclass
class _Attempt:
    """One timing attempt: the walls of its timed requests, the worker's claimed times, the numbers of the
    requests checked against the reference (warm-ups included), and its repetition count."""

    count: Repetitions
    walls: list[float] = field(default_factory=list)
    claimed: list[float] = field(default_factory=list)
    checked: list[int] = field(default_factory=list)


class _Run:
    """One submission's judging: the judge's state plus this worker's session and settings."""

    def __init__(self, judge: Judge, settings: JudgeSettings, session: Session) -> None:
        self.judge, self.settings, self.session, self.ref = judge, settings, session, judge.ref
        self.inputs_seed = secrets.randbelow(2**62)  # secret: nothing the worker sees determines its timed inputs
        self.rng = random.Random(secrets.randbits(64))  # which timed calls are re-checked: secret too

    def run(self, code_path: Path, stages: dict[str, float]) -> Judgement:
        start = time.monotonic()
        overhead, setup_s = self._start_and_calibrate(code_path)
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
        judgement.warnings.extend(confinement_warnings(ready))
        if ready.weights == "seeded":
            judgement.warnings.append("ModelNew's parameters differ from Model's in names or shapes: "
                                      "weights come from seeding the RNG identically, not from the state_dict")
        if self.settings.time_submissions:
            start = time.monotonic()
            with self.judge.quiet(), collector_paused():
                judgement.timing = self._time(judgement.flags, overhead)
            stages["timing_s"] = time.monotonic() - start
        judgement.reason = _correct_reason(correctness, judgement.timing)
        return judgement

    def _start_and_calibrate(self, code_path: Path) -> tuple[Overhead, float]:
        """Set the worker up, then time pings along a call's path while no submission code has run; also the
        seconds until the first ping's reply (the setup, and what was left of the worker's start)."""
        judge = self.judge
        self.session.start(judge.setup_fields(code_path), judge.specs, judge.input_templates)
        originals = self._draw(lambda k: timing_seed(self.inputs_seed, -1 - k))
        with self.judge.quiet(), collector_paused():  # a measurement like any timing: builds frozen meanwhile
            warmup = self.session.calibrate(originals, CALIBRATION_WARMUP.enough)
            pings = self.session.calibrate(originals, CALIBRATION_PINGS.enough)
        return Overhead.from_pings(pings), warmup[0] / 1e3

    def _draw(self, seed_of: Callable[[int], int]) -> list[list[Any]]:
        """Fresh inputs for each call of one request: set k from seed ``seed_of(k)``."""
        return [self.ref.make_inputs(seed_of(k)) for k in range(self.session.batch)]

    def _call(self, originals: list[list[Any]]) -> tuple[float, protocol.CalledClaim]:
        wall_ms, claim = self.session.observe(originals)
        self.session.check_delivery(claim, self.judge.specs)
        return wall_ms, claim

    def _check_correctness(self) -> dict[str, Any]:
        """The correctness trials, each one request of a batch of calls on the judge's correctness inputs. The
        first request runs trial 1's first call alone, so that a hang costs the first call's limit rather than a
        whole batch's (23 s on a problem of 5.85 ms calls, four to a request, against 10 s)."""
        worst: Comparison | None = None
        stored_as: str | None = None
        batch = self.session.batch
        requests = [[0]] + [[trial * batch + k for k in range(batch)] for trial in range(self.settings.correctness_trials)]
        for numbers in requests:
            originals = [self.judge.correctness_inputs(number) for number in numbers]
            self._call(originals)
            for k, (number, inputs) in enumerate(zip(numbers, originals)):
                expected = self.judge.expected(number, inputs)
                comparisons = self._compare_with(expected, k)
                stored_as = stored_as or half_storage(self.session.held[k], expected)
                for index, result in enumerate(comparisons):
                    if not result.ok:
                        trial = number // batch + 1
                        seed = correctness_seed(self.judge.correctness_inputs_seed, number)
                        raise Stop(Finding.WRONG_VALUES, f"trial {trial}, output {index}: {result.reason}",
                                   {"correctness": {"failed_trial": trial, "output_index": index,
                                                    "seed": seed, **to_jsonable(result)}})
                    if worst is None or result.max_abs_err > worst.max_abs_err:
                        worst = result
        settings = self.settings
        return {"trials": settings.correctness_trials, "calls_per_trial": batch, "atol": settings.atol,
                "rtol": settings.rtol, "reference_precision": self.ref.precision,
                "max_abs_err": worst.max_abs_err if worst else 0.0, "max_rel_err": worst.max_rel_err if worst else 0.0,
                "rel_l2_err": worst.rel_l2_err if worst else 0.0, "pytorch_float32": self.judge.pytorch_error,
                "seed": settings.seed, "inputs_seed": self.judge.correctness_inputs_seed,
                "timing_inputs_seed": self.inputs_seed, "stored_as": stored_as}

    def _compare_with(self, expected: list[torch.Tensor], k: int, sample_seed: int | None = None) -> list[Comparison]:
        """The judge's private copy of call ``k``'s outputs against ``expected``, the float64 reference: whole, or
        at positions ``sample_seed`` draws (``tensor_check.compare_sampled``)."""
        tolerance = {"atol": self.settings.atol, "rtol": self.settings.rtol}
        return [compare_outputs(held, exp, **tolerance, expected_dtype=spec.dtype) if sample_seed is None else
                compare_sampled(held, exp, **tolerance, seed=sample_seed + index, expected_dtype=spec.dtype)
                for index, (held, exp, spec) in enumerate(zip(self.session.held[k], expected, self.judge.specs))]

    def _time(self, flags: list[str], overhead: Overhead) -> dict[str, Any]:
        """Time with the judge's clock; measure again once if noisy, and flag it if it stays noisy."""
        batch = self.session.batch
        per_call = Overhead(total_ms=overhead.total_ms / batch, jitter_ms=overhead.jitter_ms / batch)
        attempts = [self._timed_calls(0, per_call)]
        stats, below = net_stats([w / batch for w in attempts[-1].walls], per_call)
        if is_noisy(stats, per_call, self.ref.device):
            attempts.append(self._timed_calls(1, per_call))
            stats, below = net_stats([w / batch for w in attempts[-1].walls], per_call)
            if is_noisy(stats, per_call, self.ref.device):
                flags.append(Flag.NOISY_TIMING.value)
        last = attempts[-1]
        return {**to_jsonable(stats), "clock": "judge", "calls_per_request": batch, "below_resolution": below,
                "attempts": len(attempts), "overhead_ms": per_call.total_ms, "jitter_ms": per_call.jitter_ms,
                "wall_median_ms": statistics.median(last.walls) / batch,
                "claimed_median_ms": statistics.median(last.claimed) if last.claimed else None,
                "requests": last.count.requests, "stopped_by": last.count.stopped_by,
                "verified_calls": last.checked,
                "samples_ms": [max(w / batch - per_call.total_ms, 0.0) for w in last.walls]}

    def _timed_calls(self, attempt: int, per_call: Overhead) -> _Attempt:
        """Warm-up requests, then timed requests until the repetition rule stops them
        (``repetitions.Repetitions``), each on fresh inputs after an L2 flush. One call of each request the
        rule's secret draw picks is checked against the reference, and so is any call whose output the judge
        holds still poisoned. Every request is the same bare ``call``, checked or not: a check is decided
        after the request's reply, by the judge's secret generator."""
        warmup, batch = self.settings.warmup_trials, self.session.batch
        span = warmup + self.settings.timing_trials  # the seeds of one attempt's requests: at most this many
        measured = _Attempt(Repetitions(self.settings.repetitions(), self.rng, floor_ms=per_call.jitter_ms))
        i = 0
        while i < warmup or not measured.count.done:
            first = (attempt * span + i) * batch
            originals = self._draw(lambda k: timing_seed(self.inputs_seed, first + k))
            self.judge.flusher.flush()
            wall_ms, claim = self._call(originals)
            poisoned = {k for k in range(batch) if unwritten(self.session.held[k])}
            drawn: set[int] = set()
            if i >= warmup:
                measured.walls.append(wall_ms)
                if claim.ms is not None:
                    measured.claimed.append(claim.ms)
                if measured.count.record(wall_ms / 1e3, max(wall_ms / batch - per_call.total_ms, 0.0)):
                    drawn.add(self.rng.randrange(batch))
            for k in sorted(poisoned | drawn):
                self._verify_timed_call(originals[k], k, i, whole=k in poisoned)
            if poisoned or drawn:
                measured.checked.append(i)
            i += 1
        return measured

    def _verify_timed_call(self, originals: list[Any], k: int, i: int, whole: bool) -> None:
        """Call ``k`` of timed request ``i`` against the reference: every element when its output still held poison
        (a NaN left anywhere must be the reference's), else a secret random sample of a large output
        (``tensor_check.compare_sampled``): a timed call's check costs its float64 reference, not a comparison
        of gigabytes, and what it is there to catch, skipped work, leaves wrong elements a sample finds."""
        seed = None if whole else self.rng.getrandbits(63)  # the judge's secret, drawn after the call's reply
        for result in self._compare_with(self.ref.expected(originals), k, seed):
            if not result.ok:
                raise Stop(Finding.WRONG_DURING_TIMING,
                           f"an output produced during timing (request {i + 1}, call {k + 1}) is wrong: "
                           f"{result.reason}")


def _correct_reason(correctness: dict[str, Any], timing: dict[str, Any] | None) -> str:
    text = (f"correct on {correctness['trials']} trials (max abs err {correctness['max_abs_err']:.2g} "
            f"vs {correctness['reference_precision']} reference)")
    if timing:
        text += f"; median {timing['median_ms']:.4g} ms"
    return text

