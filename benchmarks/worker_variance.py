"""Benchmark (GPU): what moves a fresh worker's kernel times, the process or where its tensors lie.

Across fresh workers the curated solutions' own CUDA events move 3-4% (docs/gpu-runs/, issue 26). This script
tells two causes apart without evalkit's judge: it starts PROCESSES fresh processes one after another; each builds
the model (the reference's ``Model`` or a solution's ``ModelNew``), then times it at PLACEMENTS placements: every
parameter and input (or only those ``--replace`` names) copied into fresh allocations after a spacer of random size, so each placement's tensors lie
at other addresses (and other physical pages). Each placement's figure is the median of CALLS calls timed by CUDA
events, each after an L2 flush, as the judge times them.

If the spread between placements inside one process is as wide as the spread between processes, where tensors lie
decides the time, and averaging placements inside one worker narrows a speedup's spread; if placements agree
inside a process but processes differ, the process itself (its context, its code's load) decides.

    python benchmarks/worker_variance.py problems/conv2d_asymmetric_input_asymmetric_kernel \
        [--solution fp16_implicit_gemm | --solution eager] [--processes 6] [--placements 5] [--calls 100]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import statistics
import subprocess
import sys
from pathlib import Path

FLUSH_BYTES = 256 * 1024**2  # well above an H200's L2


def _load_module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _child(problem: Path, solution: str, placements: int, calls: int, replace: str, seed: int) -> None:
    import torch

    reference = _load_module(problem / "reference.py", "variance_reference")
    torch.manual_seed(seed)
    init = reference.get_init_inputs()
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in reference.get_inputs()]
    if solution == "eager":
        model = reference.Model(*init).cuda()
    else:
        answer = _load_module(problem / "solutions" / f"{solution}.py", "variance_answer")
        model = answer.ModelNew(*init).cuda()
    flush = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    rng = random.Random()
    figures, spacers = [], []
    with torch.no_grad():
        for _ in range(placements):
            spacers.append(torch.empty(rng.randrange(1, 64) * 1024**2 + rng.randrange(4096), dtype=torch.uint8,
                                       device="cuda"))
            if replace in ("all", "params"):
                for parameter in list(model.parameters()) + list(model.buffers()):
                    parameter.data = parameter.data.clone()
            if replace in ("all", "inputs") or not figures:
                placed = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
            for _ in range(10):
                model(*placed)
            times = []
            for _ in range(calls):
                flush.zero_()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                model(*placed)
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end))
            figures.append(statistics.median(times))
    print(json.dumps(figures))


def _spread(values: list[float]) -> float:
    return (max(values) - min(values)) / statistics.median(values) * 100


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problem", type=Path)
    parser.add_argument("--solution", default="eager", help="a file stem under solutions/, or eager")
    parser.add_argument("--processes", type=int, default=6)
    parser.add_argument("--placements", type=int, default=5)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--replace", choices=("all", "inputs", "params"), default="all",
                        help="what each placement copies to fresh allocations")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.problem, args.solution, args.placements, args.calls, args.replace, seed=0)
        return
    rows = []
    for _ in range(args.processes):
        done = subprocess.run([sys.executable, __file__, str(args.problem), "--solution", args.solution,
                               "--placements", str(args.placements), "--calls", str(args.calls), "--replace", args.replace, "--child"],
                              capture_output=True, text=True, check=False)
        if done.returncode != 0:
            sys.exit(f"worker_variance: a process failed:\n{done.stderr[-2000:]}")
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    within = [_spread(row) for row in rows]
    between = _spread([statistics.median(row) for row in rows])
    print(f"{args.problem.name} {args.solution}, placements of {args.replace}: median ms per placement, one line per fresh process")
    for row in rows:
        print("  " + " ".join(f"{value:.4f}" for value in row) + f"   spread {_spread(row):.1f}%")
    print(f"  within a process (placements): {min(within):.1f}-{max(within):.1f}% "
          f"(median {statistics.median(within):.1f}%); between processes (their medians): {between:.1f}%")


if __name__ == "__main__":
    main()
