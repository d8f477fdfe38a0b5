"""Trusted side: judging one submission's worker: load, correctness trials, timing, then its kernels.

The judge owns the inputs, the reference and the comparison. The worker only ever receives copies of inputs,
and keeps its outputs where the judge reads them itself while it is frozen; every call's time is the judge's own
(``session.Session.observe``) minus the part of a request that is not the calls' own work, measured on a worker
that runs no submission code (``window``), and every check is made on what the judge read. An answer is timed in
one window with its baseline (``window``), so its speedup compares requests made moments apart. What the judge concludes comes from what it observes itself, reported as a ``verdicts.Judgement``.
The baselines are the reference judged here exactly like a submission (``start_baseline``).
"""

from __future__ import annotations

import logging
import secrets
import statistics
import time
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Protocol

import torch

from evalkit.judge.baselines import reference_as_submission
from evalkit.judge.contender import Contender
from evalkit.judge.judge_settings import JudgeSettings
from evalkit.judge.kernel_profile import ProfilingWorker, observe_kernels, observe_native_calls
from evalkit.judge.reference import OutputSpec, ReferenceProblem, input_seed, values_bytes
from evalkit.judge.session import Session, WorkerChannel
from evalkit.judge.tensor_check import compare_outputs
from evalkit.judge.time_limits import TimeLimits, reference_ms, time_limits
from evalkit.judge.timing import GpuIdle, L2Flusher, batch_size, is_noisy, net_stats
from evalkit.judge.verdicts import Finding, Judgement, Stop, crash_reason
from evalkit.judge.window import PartnerFailed, Window, parts_record, side_stats, time_window
from evalkit.judge.speedups import Speedup
from evalkit.records import Flag
from evalkit.row_parts import (BaselineEntry, CorrectnessRecord, ErrorRecord, PytorchOwnRecord, RelativeRecord,
                               TimingRecord, WindowSpeedupRecord)
from evalkit.sandbox.gpu_gate import contention_note
from evalkit.sandbox.launcher import Limits, UntrustedProcess, WorkerGone

logger = logging.getLogger(__name__)

# The float64 outputs of the correctness trials a judge keeps, to judge its problem's next answers on the same
# inputs without computing them again: float64 references were most of a judged answer's time on the H200.
EXPECTED_CACHE_BYTES = {"cuda": 4 * 2**30, "cpu": 2**30}
COMPILE_FIRST_CALL_S = 900.0  # torch.compile's first call compiles: the compile baseline gets this long
Quiet = Callable[[], AbstractContextManager[Any]]  # yields the other judges' uses of the GPU it timed beside, if any
Use = Callable[[], AbstractContextManager[Any]]


class Partner(Protocol):
    """The live baseline an answer is timed beside, and its kind: started when none is kept, unless ``start`` is
    false (then only the kept one, if any)."""

    def __call__(self, start: bool = True) -> tuple[str, Contender] | None: ...


class BaselineFailed(Exception):
    """The reference, judged as a submission, did not pass: no baseline of that kind."""


class Judge:
    """Judges submissions of one problem on one device; reuse it for all of that problem's submissions.

    ``quiet`` is entered around every timing: it keeps other untrusted code (builds) off the machine
    (``evalkit.sandbox.freezer.BuildFreezer.timing``) and other judges' work off the GPU, and yields the other
    judges' uses of the GPU it could not wait out (``evalkit.sandbox.gpu_gate``); ``use`` around the judge's other
    GPU work (its worker's non-timed stages, its own float64 outputs): a shared use of the GPU. By default neither
    pauses anything.
    """

    def __init__(self, ref: ReferenceProblem, settings: JudgeSettings, limits: Limits,
                 quiet: Quiet | None = None, use: Use | None = None) -> None:
        settings.repetitions()  # refuses a timing rule that makes no sense before anything runs
        self.ref, self.settings, self.limits = ref, settings, limits
        self.quiet, self.use = quiet or nullcontext, use or nullcontext
        with self.use():
            self.flusher = L2Flusher(ref.device)
            self.idle = GpuIdle(ref.device)
            self.reference_ms = reference_ms(ref, settings.seed)  # also sizes the batch
            self.specs, self.input_templates, self.pytorch_error = self._first_trial_facts()
        self.time_limits = time_limits(self.reference_ms, settings.run_timeout_s, settings.hang_limit_s)
        self.baseline_limits = time_limits(self.reference_ms, settings.run_timeout_s)  # trusted code: no ceiling
        self.batch = batch_size(self.reference_ms, values_bytes(self.input_templates) + values_bytes(self.specs),
                                ref.device, settings.request_length_ms)
        # Secret, and the same for every answer this judge judges: their correctness trials share inputs, so each
        # float64 output is computed once (``expected``). Nothing carries from one sandbox to the next to use it.
        self.correctness_inputs_seed = secrets.randbelow(2**62)
        self._expected: dict[int, list[torch.Tensor]] = {}
        self._expected_room = EXPECTED_CACHE_BYTES.get(ref.device, EXPECTED_CACHE_BYTES["cpu"])

    def _first_trial_facts(self) -> tuple[list[OutputSpec], list[Any], PytorchOwnRecord]:
        """The outputs' form, the inputs' form and PyTorch's own float32 error, from the first trial's inputs."""
        originals = self.ref.make_inputs(input_seed(self.settings.seed, 0))
        own = self.ref.pytorch_own(originals)
        specs = self.ref.output_specs(own)
        self.ref.pick_float64_backend(originals)
        expected = self.ref.expected_read_at_once(originals)
        result = compare_outputs(own[0], expected[0], atol=self.settings.atol, rtol=self.settings.rtol,
                                 expected_dtype=specs[0].dtype)
        templates = [torch.empty_like(v, device="meta") if isinstance(v, torch.Tensor) else v for v in originals]
        error = PytorchOwnRecord(max_abs_err=result.max_abs_err, max_rel_err=result.max_rel_err,
                                 rel_l2_err=result.rel_l2_err)
        return specs, templates, error

    @property
    def expected_bytes(self) -> int:
        """What the float64 outputs this judge keeps (``expected``) hold."""
        return EXPECTED_CACHE_BYTES.get(self.ref.device, EXPECTED_CACHE_BYTES["cpu"]) - self._expected_room

    def correctness_inputs(self, call: int) -> list[Any]:
        """The inputs of correctness call ``call`` (trial * batch + k), the same for every answer."""
        return self.ref.make_inputs(input_seed(self.correctness_inputs_seed, call))

    def zero_inputs(self) -> list[Any]:
        """Inputs of the right form holding zeros: what a calibration ping moves."""
        return [torch.zeros(t.shape, dtype=t.dtype, device=self.ref.device) if isinstance(t, torch.Tensor) else t
                for t in self.input_templates]

    def expected(self, call: int, originals: list[Any]) -> list[torch.Tensor]:
        """The float64 reference of correctness call ``call`` on ``originals`` (its inputs): computed once, while
        the cache has room; else read at once (``ReferenceProblem.expected_read_at_once``): before the reference's
        next request."""
        if call in self._expected:
            return self._expected[call]
        expected = self.ref.expected_read_at_once(originals)
        size = values_bytes(expected)
        if size <= self._expected_room:
            expected = [value.clone() for value in expected]
            self._expected[call], self._expected_room = expected, self._expected_room - size
        return expected

    def session(self, worker: WorkerChannel, limits: TimeLimits, batch: int | None = None) -> Session:
        """A session with ``worker``, sharing the judge's idle probe."""
        return Session(worker, self.ref, limits, batch or self.batch, idle=self.idle)

    def examine(self, worker: WorkerChannel, code_path: Path, compiles_on_first_call: bool = True,
                profiler: ProfilingWorker | None = None, partner: Partner | None = None,
                timed: Callable[[], None] | None = None) -> Judgement:
        """Judge the code at ``code_path`` in ``worker``, a fresh sandboxed one (the first call's limit is the longer
        one unless the caller knows the answer has nothing to compile then: ``time_limits.compiles_on_first_call``),
        timed beside the baseline ``partner`` gives, once it passed; then, when it passed and ``profiler`` gives a
        worker to profile in, which kernels it launches (``kernel_profile``); on a CPU, with no ``profiler``, which
        native code it built and called, in its own worker once timed (``kernel_profile.observe_native_calls``).
        ``timed`` is called once a passing answer's timing is over and its worker closed, before its checks and
        profile: from there on nothing of it needs the GPU alone (``schedule.overlap``)."""
        limits = self.time_limits.for_answer(compiles_on_first_call)
        native = profiler is None and self.ref.device == "cpu"
        checks = DeferredChecks(self) if profiler is not None else None
        judgement = self.judge_with(worker, code_path, limits=limits, partner=partner, native_calls=native,
                                    checks=checks)
        if timed is not None and judgement.finding is Finding.PASSED and judgement.timing:
            timed()
        if profiler is None or checks is None or judgement.finding is not Finding.PASSED:
            return judgement
        start, timed_stages = time.monotonic(), dict(judgement.stage_seconds)  # the profile's close is its own
        worker, code_path = profiler()
        with self.use():
            session = self.session(worker, limits, batch=1)
            originals = self.ref.make_inputs(input_seed(secrets.randbits(62), 0))

            def observe() -> Judgement:
                judgement.correctness = judgement.correctness or CorrectnessRecord()  # a passing answer's: never None
                try:
                    judgement.flags.extend(observe_kernels(session, self.setup_fields(code_path), self.specs,
                                                           self.input_templates, originals, judgement.correctness,
                                                           meanwhile=checks.run))
                finally:  # whatever the profile's worker did, a wrong output of a timed request is the verdict
                    checks.run()
                return judgement
            result = self._through(worker, session, observe, {})
        result.stage_seconds = {**timed_stages, **checks.seconds(), "profile_s": time.monotonic() - start}
        return result

    def setup_fields(self, code_path: Path) -> dict[str, Any]:
        """The setup request's fields for a worker that runs the code at ``code_path`` (its shared buffers aside)."""
        return {"mode": "judge", "code_path": str(code_path), "device": self.ref.device,
                "limits": self.limits.to_dict(), "init_inputs": self.ref.init_inputs, "init_seed": self.ref.init_seed,
                "n_inputs": self.ref.n_inputs, "state_dict": self.ref.state_dict,
                "dtype": str(self.ref.dtype).removeprefix("torch.")}

    def start_baseline(self, kind: str, worker: UntrustedProcess) -> Contender:
        """The reference written as a submission (``kind`` eager or compile), prepared in ``worker`` (a fresh
        sandboxed one) like an answer: calibrated, loaded, checked, then kept alive to be timed beside answers.
        Raises ``BaselineFailed`` (with ``worker`` closed) when it does not pass. torch.compile's caches go where
        every worker's temporary files do: its own folder."""
        code_path = worker.workdir / "submission.py"
        code_path.write_text(reference_as_submission(self.ref.problem.reference_path.read_text(), kind))
        settings = replace(self.settings, time_submissions=True,
                           warmup_trials=max(self.settings.warmup_trials, 3 if kind == "compile" else 1))
        limits = self.baseline_limits.for_answer(compiles_on_first_call=True)  # trusted code: the generous limit
        if kind == "compile":
            limits = replace(limits, first_call_s=max(limits.first_call_s, COMPILE_FIRST_CALL_S))
        baseline = Contender(self, settings, self.session(worker, limits), verify=False)
        try:
            judgement = baseline.prepare(code_path, baseline.stage_seconds)
        except (Stop, WorkerGone) as failure:
            close_contender(baseline)
            raise BaselineFailed(f"the reference judged as a submission: {failure}"[:500]) from failure
        baseline.flags = judgement.flags
        return baseline

    def time_baseline(self, baseline: Contender, partner: tuple[str, Contender] | None = None) -> BaselineEntry:
        """A baseline's timing record, timed alone or beside ``partner`` (another kind, live): then with its
        speedup over that kind from their window (``relative``). Raises ``BaselineFailed``."""
        start = time.monotonic()
        try:
            with baseline.turn() as contended:
                record, speedup = _timed(baseline, partner[1] if partner else None, baseline.flags)
            note_contention(contended, baseline.flags, [])
        except (Stop, WorkerGone, PartnerFailed) as failure:
            baseline.failed = True
            raise BaselineFailed(f"the reference judged as a submission: {failure}"[:500]) from failure
        entry = BaselineEntry(**record, flags=list(baseline.flags),
                              stage_seconds={**baseline.stage_seconds, "timing_s": time.monotonic() - start})
        if speedup is not None and partner is not None:
            entry["relative"] = RelativeRecord(to=partner[0], **speedup.to_dict())
        return entry

    def judge_reference(self, kind: str, worker: UntrustedProcess) -> BaselineEntry:
        """A baseline timed alone in ``worker``, then closed: its timing record, or ``{"error": why}``."""
        try:
            baseline = self.start_baseline(kind, worker)
            try:
                return self.time_baseline(baseline)
            finally:
                close_contender(baseline)
        except BaselineFailed as failure:
            return BaselineEntry(error=str(failure))

    def judge_with(self, worker: WorkerChannel, code_path: Path, *, settings: JudgeSettings | None = None,
                   limits: TimeLimits | None = None, partner: Partner | None = None,
                   native_calls: bool = False, checks: DeferredChecks | None = None) -> Judgement:
        """Judge through ``worker`` (any channel speaking the protocol), then close it. ``native_calls``: once it
        passed, profile one more call there for the native code the answer built and called (a CPU's flags).
        ``checks``: where the timed requests' checks go to be made later (``DeferredChecks``); else made at once."""
        stages: dict[str, float] = {}
        answer = Contender(self, settings or self.settings, self.session(worker, limits or self.time_limits))
        return self._through(worker, answer.session,
                             lambda: self._run(answer, code_path, stages, partner, native_calls, checks), stages)

    def _run(self, answer: Contender, code_path: Path, stages: dict[str, float], partner: Partner | None,
             native_calls: bool, checks: DeferredChecks | None) -> Judgement:
        code = code_path.read_text(errors="replace") if native_calls else ""  # before it can run
        # The live baseline's pings stand for the answer's, whose window subtracts one figure from both sides; an
        # answer pings its own worker only while no baseline is live, in case none can be started for its timing.
        kept = partner(start=False) if partner is not None and answer.settings.time_submissions else None
        judgement = answer.prepare(code_path, stages, kept[1].calibrated if kept is not None else None)
        if answer.settings.time_submissions:
            start = time.monotonic()
            baseline = partner() if partner is not None else None
            if partner is not None:
                stages["baseline_s"] = time.monotonic() - start  # starting the live baseline, when none was kept
            start = time.monotonic()
            judgement.timing = self._time_answer(answer, baseline, judgement, checks)
            stages["timing_s"] = time.monotonic() - start
        stages.update(answer.waits())
        if native_calls:
            start = time.monotonic()
            judgement.correctness = judgement.correctness or CorrectnessRecord()  # a passing answer's: never None
            judgement.flags.extend(observe_native_calls(answer.session, code, judgement.correctness))
            stages["profile_s"] = time.monotonic() - start
        judgement.reason = _correct_reason(judgement.correctness or CorrectnessRecord(), judgement.timing)
        return judgement

    def _time_answer(self, answer: Contender, baseline: tuple[str, Contender] | None, judgement: Judgement,
                     checks: DeferredChecks | None) -> TimingRecord:
        """The answer's timing record, its speedup over ``baseline`` (kind, live worker) from their window; its
        requests' checks made now, or handed to ``checks``."""
        with answer.turn() as contended:
            try:
                record, speedup = _timed(answer, baseline[1] if baseline else None, judgement.flags)
            except PartnerFailed as failure:
                judgement.warnings.append(f"no speedup: {failure}")
                record, speedup = _timed(answer, None, judgement.flags)
        if checks is not None:
            checks.answer = answer
        else:
            checks = DeferredChecks(self, answer)
            checks.run()
        note_contention(contended, judgement.flags, judgement.warnings)
        if speedup is not None and baseline is not None:
            record["speedup"] = WindowSpeedupRecord(vs=baseline[0], **speedup.to_dict())
        return record

    def _through(self, worker: WorkerChannel, session: Session, work: Callable[[], Judgement],
                 stages: dict[str, float]) -> Judgement:
        """``work``'s judgement, or the failure that ended it (whatever the worker did); then ``worker`` closed."""
        try:
            result = work()
        except Stop as stop:
            result = Judgement.stopped(stop)
        except WorkerGone as gone:
            finding = Finding.WORKER_TIMED_OUT if gone.kind == "timeout" else Finding.WORKER_DIED
            result = Judgement(finding, str(gone), error=ErrorRecord(kind=gone.kind, message=str(gone)))
        finally:
            start = time.monotonic()
            stdout, stderr = worker.close()
            session.release()
            stages["close_s"] = time.monotonic() - start
        result.stage_seconds.update(stages)
        if result.error is not None or result.finding in (Finding.WORKER_DIED, Finding.WORKER_TIMED_OUT):
            result.error = ErrorRecord(**(result.error or ErrorRecord()), stdout_tail=stdout[-4000:],
                                       stderr_tail=stderr[-8000:])
            if result.finding is Finding.WORKER_DIED:
                result.reason = crash_reason(result.reason, stderr)
        return result


class DeferredChecks:
    """An answer's timed requests' checks against the float64 reference (``Contender.finish_checks``), made once,
    when ``run`` is first called: ``Judge.examine`` makes them while the profile's worker sets up and loads, so the
    judge's float64 work and that worker's start overlap. They need the GPU, not to themselves (``Judge.use``); on a
    GPU no reply of the profile's worker is read before they are made (a CPU worker's setup reply is, before its
    load is asked for), and whatever it did, a wrong output they find is the verdict."""

    def __init__(self, judge: Judge, answer: Contender | None = None) -> None:
        self.judge, self.answer, self.done = judge, answer, False

    def run(self) -> None:
        if self.done or self.answer is None:
            return
        self.done = True
        with self.judge.use():
            self.answer.finish_checks()

    def seconds(self) -> dict[str, float]:
        """The answer's ``checks_s`` once they are made (``Contender.waits`` counted them before)."""
        return {"checks_s": self.answer.checks_s} if self.answer is not None and self.answer.checks_s else {}


def note_contention(contended: list[str] | None, flags: list[str], warnings: list[str]) -> None:
    """A measurement made beside other judges' work on the GPU (``quiet`` yielded their uses): flagged, and said."""
    if contended and Flag.CONTENDED_GPU.value not in flags:
        flags.append(Flag.CONTENDED_GPU.value)
        warnings.append(contention_note(contended))


def close_contender(contender: Contender) -> None:
    """Close a kept worker (a live baseline) and free the buffers lent to it."""
    contender.session.worker.close()
    contender.session.release()


def _timed(contender: Contender, partner: Contender | None, flags: list[str]) -> tuple[TimingRecord, Speedup | None]:
    """Time ``contender`` (beside ``partner``) in a window; once more if its times are noisy, flagged if still so.
    Its timing record and its speedup over the partner (or None)."""
    settings, device, rule = contender.settings, contender.ref.device, contender.settings.repetitions()
    windows = [time_window(contender, partner, rule, settings.warmup_trials)]
    per_call = contender.per_call  # the window's own pings may have measured the judge's part anew
    stats, below = net_stats([w / contender.batch for w in windows[-1].answer.walls], per_call)
    if is_noisy(stats, per_call, device):
        windows.append(time_window(contender, partner, rule, settings.warmup_trials))
        per_call = contender.per_call
        stats, below = net_stats([w / contender.batch for w in windows[-1].answer.walls], per_call)
        if is_noisy(stats, per_call, device):
            flags.append(Flag.NOISY_TIMING.value)
    last: Window = windows[-1]
    record = TimingRecord(
        **stats, clock="judge", calls_per_request=contender.batch, below_resolution=below, attempts=len(windows),
        overhead_ms=per_call.total_ms, jitter_ms=per_call.jitter_ms,
        wall_median_ms=statistics.median(last.answer.walls) / contender.batch,
        claimed_median_ms=statistics.median(last.answer.claimed) if last.answer.claimed else None,
        requests=last.count.requests, stopped_by=last.count.stopped, verified_calls=last.checked,
        overhead_requests=len(last.beyond_events) or None,  # the trusted requests the overhead came from
        samples_ms=last.answer.per_call(contender))
    if last.answer.parts:
        record["request_parts_ms"] = parts_record(last.answer.parts)
    if partner is None or last.partner is None:
        return record, None
    record["partner"] = side_stats(last.partner, partner)
    return record, last.speedup(contender, partner)


def _correct_reason(correctness: CorrectnessRecord, timing: TimingRecord | None) -> str:
    text = (f"correct on {correctness['trials']} trials (max abs err {correctness['max_abs_err']:.2g} "
            f"vs {correctness['reference_precision']} reference)")
    if timing:
        text += f"; median {timing['median_ms']:.4g} ms"
    return text
