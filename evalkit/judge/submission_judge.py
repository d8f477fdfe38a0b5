"""Trusted side: judging one submission's worker: load, correctness trials, kernels, timing.

The judge owns the inputs, the output buffers, the reference and the comparison. The worker only
ever receives copies of inputs and writes into buffers the judge poisons before every call; what the
judge concludes comes from what it observes itself, reported as a ``verdicts.Judgement``.
"""

from __future__ import annotations

import logging
import math
import random
import secrets
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from evalkit.judge.plausibility import custom_kernels, kernel_flags, precision_class, reduced_precision
from evalkit.judge.reference import OutputSpec, ReferenceProblem, correctness_seed, timing_seed
from evalkit.judge.session import Session, WorkerChannel
from evalkit.judge.tensor_check import Comparison, compare_outputs
from evalkit.judge.time_limits import time_limits
from evalkit.judge.timing import L2Flusher, TimingStats, measure
from evalkit.judge.verdicts import Finding, Judgement, Stop
from evalkit.records import Flag, to_jsonable
from evalkit.sandbox import protocol
from evalkit.sandbox.clock import Clock
from evalkit.sandbox.launcher import Limits, UntrustedProcess, WorkerGone

logger = logging.getLogger(__name__)

VERIFIED_SHARE = 0.2  # of the timed calls, at least MIN_VERIFIED, re-checked against the reference
MIN_VERIFIED = 3
SIGNAL_SCOPING_ABI = 6  # Landlock scopes signals and abstract sockets from this ABI on
# The most per-call overhead (IPC, harness Python) the judge will excuse between the time a
# worker reports and the wall time it observes; a worker slowing its own pings gains no more.
OVERHEAD_CAP_MS = {"cuda": 1.0, "cpu": 5.0}
# How much of the judge's observed wall time may go unexplained by the reported time before the
# row is flagged (fraction of observed, plus milliseconds). Host clocks on a loaded CPU are noisy.
UNEXPLAINED_TIME_TOLERANCE = {"cuda": (0.2, 0.3), "cpu": (0.5, 1.0)}
COPY_PROBE_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class JudgeSettings:
    atol: float
    rtol: float
    correctness_trials: int
    timing_trials: int
    warmup_trials: int
    run_timeout_s: float | None  # every step's limit; None: derived from the reference's time
    seed: int
    time_submissions: bool = True


class Judge:
    """Judges submissions of one problem on one device; reuse it for all of that problem's submissions."""

    def __init__(self, ref: ReferenceProblem, settings: JudgeSettings, limits: Limits) -> None:
        self.ref, self.settings, self.limits = ref, settings, limits
        self.clock = Clock(ref.device)
        self.flusher = L2Flusher(ref.device)
        self.time_limits = time_limits(ref, settings.run_timeout_s, settings.seed)
        self.specs, self.input_templates, self._pytorch_error = self._first_trial_facts()

    def _first_trial_facts(self) -> tuple[list[OutputSpec], list[Any], dict[str, Any]]:
        """The outputs' form, the inputs' form and PyTorch's own float32 error, from the first trial's inputs."""
        originals = self.ref.make_inputs(correctness_seed(self.settings.seed, 0))
        own = self.ref.pytorch_float32(originals)
        specs = self.ref.output_specs(own)
        expected = self.ref.expected(originals)
        result = compare_outputs(own[0], expected[0], atol=self.settings.atol, rtol=self.settings.rtol,
                                 expected_dtype=specs[0].dtype)
        templates = [torch.empty_like(v, device="meta") if isinstance(v, torch.Tensor) else v for v in originals]
        error = {"max_abs_err": result.max_abs_err, "max_rel_err": result.max_rel_err, "rel_l2_err": result.rel_l2_err}
        return specs, templates, error

    def judge(self, code_path: Path, workdir: Path, env: dict[str, str]) -> Judgement:
        """Judge the code at ``code_path`` in a fresh sandboxed worker."""
        return self.judge_with(UntrustedProcess(workdir, self.limits, env), code_path)

    def judge_with(self, worker: WorkerChannel, code_path: Path) -> Judgement:
        """Judge through ``worker`` (any channel speaking the protocol), then close it."""
        stages: dict[str, float] = {}
        try:
            result = self._judge_session(Session(worker, self.ref, self.time_limits), code_path, stages)
        except Stop as stop:
            result = Judgement.stopped(stop)
        except WorkerGone as gone:
            finding = Finding.WORKER_TIMED_OUT if gone.kind == "timeout" else Finding.WORKER_DIED
            result = Judgement(finding, str(gone), error={"kind": gone.kind, "message": str(gone)})
        finally:
            stdout, stderr = worker.close()
        result.stage_seconds.update(stages)
        if result.error is not None or result.finding in (Finding.WORKER_DIED, Finding.WORKER_TIMED_OUT):
            result.error = dict(result.error or {}, stdout_tail=stdout[-4000:], stderr_tail=stderr[-8000:])
            if result.finding is Finding.WORKER_DIED:
                result.reason = _crash_reason(result.reason, stderr)
        return result

    def _judge_session(self, session: Session, code_path: Path, stages: dict[str, float]) -> Judgement:
        start = time.monotonic()
        fields = {"mode": "judge", "code_path": str(code_path), "device": self.ref.device,
                  "limits": self.limits.to_dict(), "init_inputs": self.ref.init_inputs, "init_seed": self.ref.init_seed,
                  "n_inputs": self.ref.n_inputs, "state_dict": self.ref.state_dict}
        ready = session.start(fields, self.specs, self.input_templates)
        stages["load_s"] = time.monotonic() - start
        start = time.monotonic()
        inputs_seed = secrets.randbelow(2**62)  # secret: nothing the worker sees determines its inputs
        correctness = self._check_correctness(session, inputs_seed)
        correctness["weights"] = ready.weights
        stages["correctness_s"] = time.monotonic() - start
        correctness["precision_class"] = precision_class(correctness["rel_l2_err"])
        judgement = Judgement(Finding.PASSED, "", correctness=correctness)
        if reduced_precision(correctness):
            judgement.flags.append(Flag.REDUCED_PRECISION.value)
        if self.ref.device == "cuda":
            judgement.flags.extend(self._observe_kernels(session, code_path, correctness))
        judgement.warnings.extend(_confinement_warnings(ready))
        if ready.weights == "seeded":
            judgement.warnings.append("ModelNew's parameters differ from Model's in names or shapes: "
                                      "weights come from seeding the RNG identically, not from the state_dict")
        if self.settings.time_submissions:
            start = time.monotonic()
            judgement.timing = self._time(session, judgement.flags, inputs_seed)
            stages["timing_s"] = time.monotonic() - start
        judgement.reason = _correct_reason(correctness, judgement.timing)
        return judgement

    def _check_correctness(self, session: Session, inputs_seed: int) -> dict[str, Any]:
        worst: Comparison | None = None
        specs = self.specs
        for trial in range(self.settings.correctness_trials):
            seed = correctness_seed(inputs_seed, trial)
            originals = self.ref.make_inputs(seed)
            session.load_inputs(originals)
            reply = session.call()
            session.check_delivery(reply, specs)
            expected = self.ref.expected(originals)
            for index, (out, exp, spec) in enumerate(zip(session.outputs, expected, specs)):
                result = compare_outputs(out, exp, atol=self.settings.atol, rtol=self.settings.rtol,
                                         expected_dtype=spec.dtype)
                if not result.ok:
                    raise Stop(Finding.WRONG_VALUES, f"trial {trial + 1}, output {index}: {result.reason}",
                                   {"correctness": {"failed_trial": trial + 1, "output_index": index,
                                                    "seed": seed, **to_jsonable(result)}})
                if worst is None or result.max_abs_err > worst.max_abs_err:
                    worst = result
            del expected
        return {"trials": self.settings.correctness_trials, "atol": self.settings.atol, "rtol": self.settings.rtol,
                "reference_precision": self.ref.precision, "max_abs_err": worst.max_abs_err if worst else 0.0,
                "max_rel_err": worst.max_rel_err if worst else 0.0, "rel_l2_err": worst.rel_l2_err if worst else 0.0,
                "pytorch_float32": self._pytorch_error, "seed": self.settings.seed, "inputs_seed": inputs_seed}

    def _observe_kernels(self, session: Session, code_path: Path, correctness: dict[str, Any]) -> list[str]:
        """Which kernels one forward call launches: the worker's profiler's claim (it only ever adds a flag)."""
        kernels = session.profile().kernels
        correctness["kernels"] = kernels[:50]
        correctness["custom_kernels"] = custom_kernels(kernels)[:50]
        return kernel_flags(kernels, "load_inline" in code_path.read_text(errors="replace"))

    def _time(self, session: Session, flags: list[str], inputs_seed: int) -> dict[str, Any]:
        """Time in lockstep: the judge refills inputs and flushes L2 before each call, and re-checks a random sample."""
        settings = self.settings
        rng = random.Random(inputs_seed)  # as secret as the inputs; recorded in the row afterwards
        total = settings.warmup_trials + settings.timing_trials
        verify = set(rng.sample(range(settings.warmup_trials, total), verified_count(settings.timing_trials)))
        walls: list[float] = []
        ping_ms = self._ping_ms(session)
        copy_ms = self._copy_ms(session.outputs)

        def prepare(i: int) -> None:
            session.load_inputs(self.ref.make_inputs(timing_seed(inputs_seed, i)))
            self.flusher.flush()
            self.clock.synchronize()

        def timed_call(i: int) -> float:
            wall, claim = self.clock.wall_ms(session.call)
            session.check_delivery(claim, self.ref.output_specs(session.outputs))
            walls.append(wall)
            if i in verify:
                self._verify_timed_call(session, i)
            return _claimed_ms(claim)

        samples = measure(timed_call, prepare, warmup=settings.warmup_trials, trials=settings.timing_trials)
        stats = TimingStats.from_samples(samples)
        overhead = min(ping_ms, OVERHEAD_CAP_MS.get(self.ref.device, 1.0)) + copy_ms
        observed = statistics.median(walls[settings.warmup_trials:]) - overhead
        timing = {**to_jsonable(stats), "clock": "cuda_events" if self.ref.device == "cuda" else "host",
                  "observed_median_ms": observed, "overhead_ms": overhead, "ping_ms": ping_ms, "copy_ms": copy_ms,
                  "verified_calls": sorted(verify), "samples_ms": samples}
        relative, absolute = UNEXPLAINED_TIME_TOLERANCE[self.ref.device]
        if observed - stats.median_ms > relative * observed + absolute:
            # The worker reports less time than the judge saw pass: trust the judge's clock.
            flags.append(Flag.TIMING_MISMATCH.value)
            timing["reported_median_ms"] = stats.median_ms
            timing["median_ms"] = observed
        return timing

    def _verify_timed_call(self, session: Session, i: int) -> None:
        expected = self.ref.expected(session.originals)
        for out, exp in zip(session.outputs, expected):
            result = compare_outputs(out, exp, atol=self.settings.atol, rtol=self.settings.rtol, expected_dtype=out.dtype)
            if not result.ok:
                raise Stop(Finding.WRONG_DURING_TIMING,
                           f"an output produced during timing (call {i + 1}) is wrong: {result.reason}")

    def _copy_ms(self, buffers: list[torch.Tensor]) -> float:
        """What copying the output into the judge's buffers costs, measured by the judge itself.

        Every timed call includes that copy in the wall time the judge observes (it happens after the
        worker's clock stops), so it must be excused, or a large output would look like hidden work.
        """
        nbytes = sum(b.numel() * b.element_size() for b in buffers)
        probe = max(min(nbytes, COPY_PROBE_BYTES), 1)
        src = torch.empty(probe, dtype=torch.uint8, device=self.ref.device)
        dst = torch.empty_like(src)
        best = min(self.clock.time_ms(lambda: dst.copy_(src))[0] for _ in range(3))
        return best * nbytes / probe

    def _ping_ms(self, session: Session) -> float:
        samples = [self.clock.wall_ms(session.ping)[0] for _ in range(9)]
        return sorted(samples)[len(samples) // 2]



def verified_count(timing_trials: int) -> int:
    """How many timed calls are re-checked: a submission skipping work on a share f of calls at random is
    caught with probability 1 - (1 - f) ** count (count 10 of 50: f = 0.5 -> 99.9%, 0.25 -> 94%)."""
    return min(timing_trials, max(MIN_VERIFIED, math.ceil(VERIFIED_SHARE * timing_trials)))


def _confinement_warnings(ready: protocol.ReadyClaim) -> list[str]:
    """What the worker says its confinement lacked (a claim: a submission can only make these appear)."""
    warnings = []
    if not ready.landlock:
        warnings.append("this kernel has no Landlock: the submission's file writes were not confined")
    elif ready.landlock < SIGNAL_SCOPING_ABI:
        warnings.append(f"this kernel's Landlock (ABI {ready.landlock}) cannot scope signals: the submission "
                        f"could signal processes outside its sandbox")
    if "WITH capabilities" in ready.privileges:
        warnings.append("the worker ran as root and could not drop its capabilities")
    return warnings


def _claimed_ms(claim: protocol.CalledClaim) -> float:
    if claim.ms is None:
        raise Stop(Finding.PROTOCOL_VIOLATION, "protocol violation: a timed call's reply claims no time")
    return claim.ms


def _crash_reason(reason: str, stderr: str) -> str:
    hints = [("illegal memory access", "CUDA illegal memory access"), ("out of memory", "out of memory"),
             ("Segmentation fault", "segmentation fault"), ("device-side assert", "CUDA device-side assert")]
    found = [label for needle, label in hints if needle.lower() in stderr.lower()]
    return reason + (f" [{', '.join(found)}]" if found else "")


def _correct_reason(correctness: dict[str, Any], timing: dict[str, Any] | None) -> str:
    text = (f"correct on {correctness['trials']} trials (max abs err {correctness['max_abs_err']:.2g} "
            f"vs {correctness['reference_precision']} reference)")
    if timing:
        text += f"; median {timing['median_ms']:.4g} ms"
    return text

