"""Benchmark (GPU): what the worker's harness adds to a request beyond its calls' own events, answer against reference.

The judge subtracts from each request of an answer what the baseline's requests took beyond their own events
(``evalkit.judge.window``): that is exact only where the answer's request costs as much beyond its events as the
baseline's. This script times the harness's parts of a request in one process, for a problem's reference and each
of its curated solutions, with the harness's own code (``sandbox.clock.Clock.time_calls``,
``sandbox.untrusted.outputs.OutputPlacer.place``, ``sandbox.protocol.encode_called``), on CALLS calls a request as
the judge sizes them (``judge.timing.batch_size``), REQUESTS times after 3 warm-ups, each on fresh inputs:

- ``gaps``: the calls' loop beyond their events (the synchronize after each, the loop);
- ``place``: saying where each call's outputs lie (one driver export per allocation they lie in, per request);
- ``encode``: the reply's encoding.

Printed per model: each part's median milliseconds a request, the allocations its outputs lay in, and the answer's
sum minus the reference's: the part of a request the judge's subtraction misses for that answer.

    python3 benchmarks/request_parts.py problems/alexnet_conv1 [problems/...] [--requests 30] [--json FILE]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from evalkit.judge.timing import batch_size
from evalkit.sandbox import protocol
from evalkit.sandbox.clock import Clock
from evalkit.sandbox.untrusted.outputs import OutputPlacer

WARMUP_REQUESTS = 3


def load_module(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def request_parts(model: Any, reference: ModuleType, calls: int, requests: int) -> dict[str, Any]:
    """Median milliseconds a request of each harness part, and the allocations the outputs lay in."""
    clock = Clock("cuda")
    inputs = [[v.cuda() if isinstance(v, torch.Tensor) else v for v in reference.get_inputs()] for _ in range(calls)]
    with torch.no_grad():
        first = model(*inputs[0])
    outputs = list(first) if isinstance(first, (tuple, list)) else [first]
    placer = OutputPlacer("cuda", [{"shape": list(o.shape), "dtype": str(o.dtype).removeprefix("torch.")}
                                   for o in outputs])
    del first, outputs
    parts: dict[str, list[float]] = {"events": [], "gaps": [], "place": [], "encode": [], "segments": []}
    kept: list[Any] = []
    for request in range(WARMUP_REQUESTS + requests):
        for values in inputs:  # fresh values in the same buffers, as the judge copies them in
            for value in values:
                if isinstance(value, torch.Tensor):
                    value.uniform_()
        torch.cuda.synchronize()
        kept = []  # the last request's outputs, freed as the worker frees them
        start = time.perf_counter()
        with torch.no_grad():
            results, times = clock.time_calls(model, inputs)
        looped = time.perf_counter()
        formed, form, places, segments, kept = placer.place(results)
        placed = time.perf_counter()
        protocol.encode_called(request, formed, form, times, places, segments)
        encoded = time.perf_counter()
        if request >= WARMUP_REQUESTS:
            parts["events"].append(sum(times))
            parts["gaps"].append((looped - start) * 1e3 - sum(times))
            parts["place"].append((placed - looped) * 1e3)
            parts["encode"].append((encoded - placed) * 1e3)
            parts["segments"].append(len(segments))
        del results
    del kept
    return {name: statistics.median(values) for name, values in parts.items()}


def measure_problem(folder: Path, requests: int) -> dict[str, Any]:
    reference = load_module(folder / "reference.py", f"reference_{folder.name}")
    init = reference.get_init_inputs()
    torch.manual_seed(0)
    model = reference.Model(*init).cuda().eval()
    sample = [v.cuda() if isinstance(v, torch.Tensor) else v for v in reference.get_inputs()]
    reference_ms, _ = Clock("cuda").time_ms(lambda: model(*sample))
    reference_ms, _ = Clock("cuda").time_ms(lambda: model(*sample))
    with torch.no_grad():
        out = model(*sample)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    per_call = sum(v.numel() * v.element_size() for v in [*sample, *outs] if isinstance(v, torch.Tensor))
    calls = batch_size(reference_ms, per_call, "cuda", 20.0)
    del sample, out, outs
    found: dict[str, Any] = {"calls": calls, "reference_ms": reference_ms,
                             "models": {"reference": request_parts(model, reference, calls, requests)}}
    del model
    for path in sorted((folder / "solutions").glob("*.py")):
        solution = load_module(path, f"solution_{folder.name}_{path.stem}")
        torch.manual_seed(0)
        answer = solution.ModelNew(*init).cuda().eval()
        found["models"][path.stem] = request_parts(answer, reference, calls, requests)
        del answer
        torch.cuda.empty_cache()
    return found


def harness_sum(parts: dict[str, float]) -> float:
    return parts["gaps"] + parts["place"] + parts["encode"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problems", nargs="+", type=Path)
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    found = {}
    for folder in args.problems:
        problem = found[folder.name] = measure_problem(folder, args.requests)
        reference = problem["models"]["reference"]
        print(f"{folder.name}: {problem['calls']} calls a request (reference {problem['reference_ms']:.3f} ms a call)")
        for name, parts in problem["models"].items():
            print(f"  {name:34s} events {parts['events']:8.3f}  gaps {parts['gaps']:.3f}  place {parts['place']:.3f} "
                  f"({parts['segments']:.0f} allocations)  encode {parts['encode']:.3f}  harness - reference's "
                  f"{harness_sum(parts) - harness_sum(reference):+.3f} ms a request")
        if args.json:
            args.json.write_text(json.dumps(found, indent=1))


if __name__ == "__main__":
    main()
