"""The trusted judge: runs one submission's sandboxed worker and decides its verdict.

The judge owns the inputs, the output buffers, the reference and the comparison. The
worker only ever receives copies of inputs and writes into buffers the judge poisons
before every call; every verdict comes from what the judge observes itself.
"""

from __future__ import annotations

import logging
import random
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from evalkit.judge.tensor_check import Comparison, compare_outputs, tensors_equal
from evalkit.judge.plausibility import custom_kernels, kernel_flags, reduced_precision
from evalkit.records import Verdict, to_jsonable
from evalkit.judge.reference import OutputSpec, ReferenceProblem
from evalkit.sandbox.launcher import Limits, UntrustedProcess, WorkerGone
from evalkit.judge.timing import L2Flusher, TimingStats, measure
from evalkit.sandbox.clock import Clock

logger = logging.getLogger(__name__)

VERIFIED_TIMED_CALLS = 3
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
    run_timeout_s: float
    seed: int
    time_submissions: bool = True


@dataclass
class Judgement:
    verdict: Verdict
    reason: str
    flags: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    error: dict[str, Any] | None = None
    correctness: dict[str, Any] | None = None
    timing: dict[str, Any] | None = None
    stage_seconds: dict[str, float] = field(default_factory=dict)


class Rejected(Exception):
    """Raised inside the judge when a trial shows the submission is wrong."""

    def __init__(self, verdict: Verdict, reason: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(reason)
        self.verdict, self.reason, self.details = verdict, reason, details or {}


def _shared_like(spec_or_tensor: Any, device: str) -> Any:
    if isinstance(spec_or_tensor, OutputSpec):
        buf = torch.empty(spec_or_tensor.shape, dtype=spec_or_tensor.dtype, device=device)
    elif isinstance(spec_or_tensor, torch.Tensor):
        buf = torch.empty_like(spec_or_tensor, device=device)
    else:
        return spec_or_tensor
    return buf.share_memory_() if device == "cpu" else buf


def _poison(buffers: list[torch.Tensor]) -> None:
    for buf in buffers:
        buf.fill_(float("nan") if buf.is_floating_point() else -1)


class Session:
    """One submission's worker, with the judge-owned input and output buffers bound to it."""

    def __init__(self, worker: UntrustedProcess, ref: ReferenceProblem, settings: JudgeSettings) -> None:
        self.worker, self.ref, self.settings = worker, ref, settings
        self.inputs: list[Any] = []
        self.outputs: list[torch.Tensor] = []
        self.originals: list[Any] = []

    def bind(self, specs: list[OutputSpec], sample_inputs: list[Any]) -> None:
        self.inputs = [_shared_like(v, self.ref.device) for v in sample_inputs]
        self.outputs = [_shared_like(s, self.ref.device) for s in specs]
        self.worker.send({"op": "bind", "inputs": self.inputs, "outputs": self.outputs})
        self.expect("bound", "bind")

    def load_inputs(self, originals: list[Any]) -> None:
        """Copy freshly drawn inputs into the shared buffers and poison the output buffers."""
        self.originals = originals
        for shared, original in zip(self.inputs, self.originals):
            if isinstance(shared, torch.Tensor):
                shared.copy_(original)
        _poison(self.outputs)

    def call(self, timed: bool = False) -> dict[str, Any]:
        if self.ref.device == "cuda":
            torch.cuda.synchronize()
        self.worker.send({"op": "call", "timed": timed})
        return self.expect("called", "forward")

    def ping(self) -> None:
        self.worker.send({"op": "ping"})
        self.expect("pong", "ping")

    def expect(self, op: str, stage: str) -> dict[str, Any]:
        reply = self.worker.receive(self.settings.run_timeout_s, stage)
        if reply.get("op") == "error":
            raise Rejected(_error_verdict(reply), _error_reason(reply), {"error": reply})
        if reply.get("op") != op:
            raise Rejected(Verdict.RUNTIME_ERROR, f"protocol violation: expected '{op}', got {reply.get('op')!r}")
        return reply

    def check_delivery(self, reply: dict[str, Any], specs: list[OutputSpec]) -> None:
        """Reject outputs of the wrong form, mutated inputs and unwritten buffers."""
        if not reply.get("delivered"):
            expected = [[list(s.shape), str(s.dtype)] for s in specs]
            got = list(zip(reply.get("shapes") or [], reply.get("dtypes") or [], reply.get("types") or []))
            raise Rejected(Verdict.INCORRECT, f"output has the wrong form: got (shape, dtype, type) {got}, "
                                              f"expected (shape, dtype) {expected}", {"output_form": got})
        subclass = [t for t in reply.get("types", []) if t not in ("torch.Tensor", "torch.nn.parameter.Parameter")]
        if subclass:
            raise Rejected(Verdict.INCORRECT, f"output is a tensor subclass {subclass}; a plain torch.Tensor is required")
        mutated = [i for i, (s, o) in enumerate(zip(self.inputs, self.originals))
                   if isinstance(s, torch.Tensor) and not tensors_equal(s, o)]
        if mutated:
            raise Rejected(Verdict.INCORRECT, f"forward modified its input(s) {mutated} in place", {"flags": ["mutates_inputs"]})


def _error_verdict(reply: dict[str, Any]) -> Verdict:
    kind = reply.get("kind", "runtime_error")
    allowed = {Verdict.COMPILE_ERROR.value, Verdict.INTERFACE_ERROR.value, Verdict.RUNTIME_ERROR.value}
    return Verdict(kind) if kind in allowed else Verdict.RUNTIME_ERROR


def _error_reason(reply: dict[str, Any]) -> str:
    first_line = str(reply.get("message", "")).strip().splitlines()[:1]
    return f"{reply.get('stage', '?')}: {first_line[0] if first_line else 'error'}"[:300]


class Judge:
    """Judges submissions of one problem on one device; reuse it for all of that problem's submissions."""

    def __init__(self, ref: ReferenceProblem, settings: JudgeSettings, limits: Limits) -> None:
        # Shared CPU tensors must travel by name: the worker is not our multiprocessing child,
        # so the default strategy (passing file descriptors) cannot reach it.
        torch.multiprocessing.set_sharing_strategy("file_system")
        self.ref, self.settings, self.limits = ref, settings, limits
        self.clock = Clock(ref.device)
        self.flusher = L2Flusher(ref.device)
        self._pytorch_error: dict[str, Any] | None = None

    def judge(self, code_path: Path, workdir: Path, env: dict[str, str]) -> Judgement:
        worker = UntrustedProcess(workdir, self.limits, env)
        stages: dict[str, float] = {}
        result: Judgement
        try:
            result = self._judge_with(worker, code_path, stages)
        except Rejected as rejected:
            result = _rejection(rejected)
        except WorkerGone as gone:
            verdict = Verdict.TIMEOUT if gone.kind == "timeout" else Verdict.CRASH
            result = Judgement(verdict, str(gone), error={"kind": gone.kind, "message": str(gone)})
        finally:
            stdout, stderr = worker.close()
        result.stage_seconds.update(stages)
        if result.error is not None or result.verdict in (Verdict.CRASH, Verdict.TIMEOUT):
            result.error = dict(result.error or {}, stdout_tail=stdout[-4000:], stderr_tail=stderr[-8000:])
            if result.verdict is Verdict.CRASH:
                result.reason = _crash_reason(result.reason, stderr)
        return result

    def _judge_with(self, worker: UntrustedProcess, code_path: Path, stages: dict[str, float]) -> Judgement:
        session = Session(worker, self.ref, self.settings)
        start = time.monotonic()
        worker.send({"op": "setup", "mode": "judge", "code_path": str(code_path), "device": self.ref.device,
                     "init_inputs": self.ref.init_inputs, "init_seed": self.ref.init_seed,
                     "n_inputs": self.ref.n_inputs, "state_dict": self.ref.state_dict,
                     "limits": self.limits.to_dict()})
        ready = session.expect("ready", "load")
        stages["load_s"] = time.monotonic() - start
        start = time.monotonic()
        correctness = self._check_correctness(session)
        correctness["weights"] = ready.get("weights")
        stages["correctness_s"] = time.monotonic() - start
        judgement = Judgement(Verdict.CORRECT, "", correctness=correctness)
        if reduced_precision(correctness):
            judgement.flags.append("reduced_precision")
        if self.ref.device == "cuda":
            judgement.flags.extend(self._observe_kernels(session, code_path, correctness))
        if not ready.get("landlock"):
            judgement.warnings.append("this kernel has no Landlock: the submission's file writes were not confined")
        if ready.get("weights") == "seeded":
            judgement.warnings.append("ModelNew's parameters differ from Model's in names or shapes: "
                                      "weights come from seeding the RNG identically, not from the state_dict")
        if self.settings.time_submissions:
            start = time.monotonic()
            judgement.timing = self._time(session, judgement.flags)
            stages["timing_s"] = time.monotonic() - start
        judgement.reason = _correct_reason(correctness, judgement.timing)
        return judgement

    def _check_correctness(self, session: Session) -> dict[str, Any]:
        worst: Comparison | None = None
        specs: list[OutputSpec] = []
        for trial in range(self.settings.correctness_trials):
            seed = self.settings.seed + 1000 * (trial + 1)
            originals = self.ref.make_inputs(seed)
            pytorch_output: list[torch.Tensor] | None = None
            if trial == 0:
                pytorch_output = self.ref.pytorch_float32(originals)
                specs = self.ref.output_specs(pytorch_output)
                session.bind(specs, originals)
            session.load_inputs(originals)
            reply = session.call()
            session.check_delivery(reply, specs)
            expected = self.ref.expected(originals)
            if pytorch_output is not None and self._pytorch_error is None:
                self._pytorch_error = self._pytorch_error_of(pytorch_output, expected, specs)
            del pytorch_output
            for index, (out, exp, spec) in enumerate(zip(session.outputs, expected, specs)):
                result = compare_outputs(out, exp, atol=self.settings.atol, rtol=self.settings.rtol,
                                         expected_dtype=spec.dtype)
                if not result.ok:
                    raise Rejected(Verdict.INCORRECT, f"trial {trial + 1}, output {index}: {result.reason}",
                                   {"correctness": {"failed_trial": trial + 1, "output_index": index,
                                                    "seed": seed, **to_jsonable(result)}})
                if worst is None or result.max_abs_err > worst.max_abs_err:
                    worst = result
            del expected
        return {"trials": self.settings.correctness_trials, "atol": self.settings.atol, "rtol": self.settings.rtol,
                "reference_precision": self.ref.precision, "max_abs_err": worst.max_abs_err if worst else 0.0,
                "max_rel_err": worst.max_rel_err if worst else 0.0, "rel_l2_err": worst.rel_l2_err if worst else 0.0,
                "pytorch_float32": self._pytorch_error, "seed": self.settings.seed}

    def _observe_kernels(self, session: Session, code_path: Path, correctness: dict[str, Any]) -> list[str]:
        """Which kernels one forward call launches (the worker's profiler; cross-checked by the static scan)."""
        session.worker.send({"op": "profile"})
        reply = session.expect("profiled", "profile")
        kernels = [str(k) for k in reply.get("kernels") or []]
        correctness["kernels"] = kernels[:50]
        correctness["custom_kernels"] = custom_kernels(kernels)[:50]
        return kernel_flags(kernels, "load_inline" in code_path.read_text(errors="replace"))

    def _pytorch_error_of(self, own: list[torch.Tensor], expected: list[torch.Tensor],
                          specs: list[OutputSpec]) -> dict[str, Any]:
        result = compare_outputs(own[0], expected[0], atol=self.settings.atol, rtol=self.settings.rtol,
                                 expected_dtype=specs[0].dtype)
        return {"max_abs_err": result.max_abs_err, "max_rel_err": result.max_rel_err,
                "rel_l2_err": result.rel_l2_err}

    def _time(self, session: Session, flags: list[str]) -> dict[str, Any]:
        """Time in lockstep: the judge refills inputs and flushes L2 before each call, and re-checks a random sample."""
        settings = self.settings
        rng = random.Random(settings.seed)
        total = settings.warmup_trials + settings.timing_trials
        verify = set(rng.sample(range(settings.warmup_trials, total), min(VERIFIED_TIMED_CALLS, settings.timing_trials)))
        walls: list[float] = []
        ping_ms = self._ping_ms(session)
        copy_ms = self._copy_ms(session.outputs)

        def prepare(i: int) -> None:
            session.load_inputs(self.ref.make_inputs(settings.seed + 7919 * (i + 1)))
            self.flusher.flush()
            self.clock.synchronize()

        def timed_call(i: int) -> float:
            wall, reply = self.clock.wall_ms(lambda: session.call(timed=True))
            session.check_delivery(reply, self.ref.output_specs(session.outputs))
            walls.append(wall)
            if i in verify:
                self._verify_timed_call(session, i)
            return _reported_ms(reply)

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
            flags.append("timing_mismatch")
            timing["reported_median_ms"] = stats.median_ms
            timing["median_ms"] = observed
        return timing

    def _verify_timed_call(self, session: Session, i: int) -> None:
        expected = self.ref.expected(session.originals)
        for out, exp in zip(session.outputs, expected):
            result = compare_outputs(out, exp, atol=self.settings.atol, rtol=self.settings.rtol, expected_dtype=out.dtype)
            if not result.ok:
                raise Rejected(Verdict.INCORRECT, f"an output produced during timing (call {i + 1}) is wrong: "
                                                  f"{result.reason}", {"flags": ["wrong_during_timing"]})

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



def _reported_ms(reply: dict[str, Any]) -> float:
    value = reply.get("ms")
    if not isinstance(value, (int, float)) or value != value or value < 0:
        raise Rejected(Verdict.RUNTIME_ERROR, f"the worker reported an invalid time {value!r}")
    return float(value)


def _rejection(rejected: Rejected) -> Judgement:
    details = rejected.details
    return Judgement(rejected.verdict, rejected.reason, flags=list(details.get("flags", [])),
                     error=details.get("error"), correctness=details.get("correctness"))


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

