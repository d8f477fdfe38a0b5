"""Benchmark (GPU, runs on CPU too): where the judge's float64 work on one call goes, by problem.

An answer's correctness trials and its timed requests' checks each need the float64 reference of one call's inputs;
on the H200 they were most of a warm reward step on the two largest shipped problems (about 1 s and 0.6-1.2 s of
each correct answer: ``docs/gpu-runs/2026-12-01-build-order-h200/``). This script times the parts of one such call
as the judge makes them, for each problem given as a folder, both ways the judge holds a reference:

- ``in_process``: a trusted problem's reference in this process (``judge.reference.ReferenceProblem``):
  ``inputs`` (``make_inputs``), ``float64`` (``expected``: the float64 model on them, synchronized), ``compare``
  (PyTorch's own float32 output against it, whole: a correctness call's comparison) and ``sample`` (a timed check's:
  ``take_sample`` and ``compare_taken``);
- ``sandboxed``: a problem given as text, its reference in a sandboxed worker (``judge.sandboxed_reference``), as the
  reward service holds it: ``inputs`` and ``float64`` are then requests to that worker (woken, asked, frozen again),
  so beside the in-process figures they show what the requests add to the computing.

Each part's median milliseconds over CALLS calls (after one warm-up call), each call on inputs of its own seed.

    python3 benchmarks/float64_costs.py problems/convtranspose2d_gelu_groupnorm [...] [--calls 5] [--json FILE]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import secrets
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import torch

from evalkit.judge.reference import ReferenceProblem, input_seed
from evalkit.judge.sandboxed_reference import SandboxedReference
from evalkit.judge.tensor_check import compare_outputs, compare_taken, take_sample
from evalkit.sandbox.launcher import UntrustedProcess
from evalkit.sandbox.programs import REFERENCE_WORKER
from evalkit.sandbox.remains import kill_group
from evalkit.schedule.options import default_limits
from evalkit.sources.problems import Problem, ProblemError, load_problem

TOLERANCE = 1e-2  # the comparisons' own cost hardly depends on it
PARTS = ("inputs", "float64", "compare", "sample")


def timed_ms(device: str, work: Callable[[], Any]) -> tuple[float, Any]:
    """``work()``'s milliseconds, the device's queued work finished before the clock stops; and its result."""
    start = time.perf_counter()
    result = work()
    if device == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - start) * 1e3, result


def call_parts(ref: ReferenceProblem, seed: int) -> dict[str, float]:
    """One call's parts, in milliseconds: its inputs drawn, their float64 reference, a whole and a sampled check."""
    device, parts = ref.device, {}
    parts["inputs"], inputs = timed_ms(device, lambda: ref.make_inputs(seed))
    own = ref.pytorch_own(inputs)
    parts["float64"], expected = timed_ms(device, lambda: ref.expected_read_at_once(inputs))
    parts["compare"], whole = timed_ms(device, lambda: [
        compare_outputs(o, e, atol=TOLERANCE, rtol=TOLERANCE, expected_dtype=o.dtype) for o, e in zip(own, expected)])
    parts["sample"], sampled = timed_ms(device, lambda: [
        compare_taken(take_sample(o, secrets.randbits(62)), e, atol=TOLERANCE, rtol=TOLERANCE, expected_dtype=o.dtype)
        for o, e in zip(own, expected)])
    failed = [c.reason for c in whole + sampled if not c.ok]  # a comparison cut short would time nothing
    assert not failed, f"{ref.problem.id}: PyTorch's own output failed its check: {failed[0]}"
    return parts


def medians(ref: ReferenceProblem, calls: int) -> dict[str, float]:
    """Each part's median over ``calls`` calls after a warm-up call, and the float64 backend the reference chose."""
    secret = secrets.randbelow(2**62)
    call_parts(ref, input_seed(secret, 0))
    samples = [call_parts(ref, input_seed(secret, call)) for call in range(1, calls + 1)]
    return {part: round(statistics.median(s[part] for s in samples), 3) for part in PARTS}


def in_process(problem: Problem, device: str, calls: int) -> dict[str, Any]:
    ref = ReferenceProblem(problem, device, init_seed=0, precision="fp32")
    try:
        ref.pick_float64_backend(ref.make_inputs(input_seed(1, 0)))
        return {**medians(ref, calls), "float64_cudnn": ref.float64_cudnn, "precision": ref.precision}
    finally:
        ref.close()


def sandboxed(problem: Problem, device: str, calls: int) -> dict[str, Any]:
    limits = default_limits(device, None)
    worker = UntrustedProcess(Path(tempfile.mkdtemp(prefix="evalkit-float64-")), limits, {},
                              program=REFERENCE_WORKER)
    try:
        ref = SandboxedReference(dataclasses.replace(problem, trusted=False), device, 0, "fp32", worker,
                                 limits.memory_bytes)  # it ends its worker, folder too, on close or a failed load
        try:
            return {**medians(ref, calls), "precision": ref.precision}
        finally:
            ref.close()
    finally:
        kill_group(limits.group)


def positive(text: str) -> int:
    number = int(text)
    if number < 1:
        raise argparse.ArgumentTypeError(f"{text}: at least one call is needed for a median")
    return number


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("problems", type=Path, nargs="+", help="problem folders")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--calls", type=positive, default=5)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    try:  # every folder checked before anything slow
        problems = [load_problem(folder) for folder in args.problems]
    except ProblemError as err:
        parser.error(str(err))
    results: dict[str, Any] = {}
    for problem in problems:
        figures = {"in_process": in_process(problem, args.device, args.calls),
                   "sandboxed": sandboxed(problem, args.device, args.calls)}
        results[problem.id] = figures
        added = figures["sandboxed"]["float64"] - figures["in_process"]["float64"]
        print(f"{problem.id}: ms a call, medians of {args.calls}")
        for way in ("in_process", "sandboxed"):
            print(f"  {way:10}  " + "  ".join(f"{part} {figures[way][part]:9.3f}" for part in PARTS))
        print(f"  the sandboxed float64 request adds {added:.3f} ms to the computing "
              f"({figures['sandboxed']['float64'] / max(figures['in_process']['float64'], 1e-3):.2f}x)", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"device": args.device, "calls": args.calls, "problems": results}, indent=2))


if __name__ == "__main__":
    main()
