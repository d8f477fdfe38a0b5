"""Does evalkit's own load move its timings? Prints the figures; exits 1 if a median moved more than 2%.

An honest answer (a problem's curated solution) and the eager baseline are judged on a quiet machine, then
again in a new report while a pool of real CUDA builds compiles and a hostile build spins every core
(builds import submissions, so a build is untrusted code that runs beside judging). evalkit freezes
every build while it times, so the medians should not move.

    python3 benchmarks/timing_under_load.py [--problem alexnet_conv1] [--builds 16] [--rounds 2]

Each round is a quiet run then a loaded one; a last quiet run closes the series.

Needs a CUDA GPU and nvcc (the load is real CUDA builds). Run from the repository root.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD_TEMPLATE = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# Build load {n}: a real CUDA extension of its own (a distinct build), correct for the problem's output.
CUDA = r"""
__global__ void scale_kernel_{n}(const float* x, float* y, long n) {{
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * 1.0f;
}}
torch::Tensor scale_{n}(torch::Tensor x) {{
    auto y = torch::empty_like(x);
    scale_kernel_{n}<<<(x.numel() + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
    return y;
}}
"""
ext = load_inline("evalkit_load_{n}", cpp_sources="torch::Tensor scale_{n}(torch::Tensor x);",
                  cuda_sources=CUDA, functions=["scale_{n}"])

{reference}

class ModelNew(Model):
    def forward(self, *args):
        return ext.scale_{n}(super().forward(*args).contiguous())
'''
SPINNER = '''import os
import time

# Hostile build: when imported by the build stage (no GPU visible there) it burns every core for
# 90 s of its own CPU time; as an answer it is the reference.
if os.environ.get("CUDA_VISIBLE_DEVICES") == "":
    pids = []
    for _ in range(os.cpu_count() or 2):
        pid = os.fork()
        if pid == 0:
            while time.process_time() < 90:
                pass
            os._exit(0)
        pids.append(pid)
    for pid in pids:
        os.waitpid(pid, 0)

{reference}

ModelNew = Model
'''


def score(submissions: Path, out: Path, cache: Path, trials: int) -> tuple[dict, float]:
    start = time.monotonic()
    command = [sys.executable, "-m", "evalkit", "score", str(submissions), "--problems", str(ROOT / "problems"),
               "--out", str(out), "--device", "cuda", "--baselines", "eager", "--jobs", "16",
               "--timing-trials", str(trials), "--cache-dir", str(cache),
               "--remeasure-baselines"]  # the baselines are part of what is measured: never from the cache
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    return {r["sample"]: r for r in rows}, time.monotonic() - start


def figures(rows: dict, label: str) -> dict[str, float]:
    honest = rows["a_honest"]
    eager = honest["baselines"]["eager"]
    timing = honest["timing"]
    # The worker's own claim is printed beside the judge's figure: when both move together, the kernel's time
    # moved (GPU clocks, placement), not the judge's clock.
    line = (f"{label:>7}: answer {timing['median_ms']:.4f} ms (IQR {timing['iqr_ms']:.4f}, "
            f"worker's claim {timing.get('claimed_median_ms') or float('nan'):.4f}, flags {honest['flags']}), "
            f"eager {eager['median_ms']:.4f} ms (IQR {eager['iqr_ms']:.4f}, "
            f"worker's claim {eager.get('claimed_median_ms') or float('nan'):.4f}), "
            f"speedup {honest['speedup_vs_eager']:.3f}x")
    print(line, flush=True)
    return {"answer": honest["timing"]["median_ms"], "eager": eager["median_ms"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problem", default="alexnet_conv1")
    parser.add_argument("--builds", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--timing-trials", type=int, default=50)
    args = parser.parse_args()
    problem = ROOT / "problems" / args.problem
    honest_code = next((problem / "solutions").glob("*.py")).read_text()
    reference = (problem / "reference.py").read_text()
    work = Path(tempfile.mkdtemp(prefix="evalkit-load-bench-"))
    work.chmod(0o755)  # the sandbox user must reach the build cache inside it (mkdtemp makes it private)
    cache = work / "cache"
    quiet_dir = work / "quiet" / "bench" / args.problem
    quiet_dir.mkdir(parents=True)
    (quiet_dir / "a_honest.py").write_text(honest_code)
    results = {"quiet": [], "loaded": []}
    for round_ in range(args.rounds):
        rows, _ = score(work / "quiet", work / f"quiet_report{round_}", cache, args.timing_trials)
        results["quiet"].append(figures(rows, "quiet"))
        loaded_dir = work / f"loaded{round_}" / "bench" / args.problem
        loaded_dir.mkdir(parents=True)
        (loaded_dir / "a_honest.py").write_text(honest_code)  # built already: judged first, beside the builds
        (loaded_dir / "b_spinner.py").write_text(SPINNER.format(reference=reference))
        for n in range(args.builds):
            (loaded_dir / f"c_load_{round_}_{n:02d}.py").write_text(
                BUILD_TEMPLATE.format(n=f"{round_}_{n}", reference=reference))
        rows, seconds = score(work / f"loaded{round_}", work / f"loaded_report{round_}", cache, args.timing_trials)
        builds = [r["stage_seconds"].get("build_s", 0.0) for s, r in rows.items() if s.startswith("c_load")]
        print(f"         {len(builds)} builds beside it, {statistics.median(builds):.0f} s each (median); "
              f"run {seconds:.0f} s; verdicts {sorted({r['verdict'] for r in rows.values()})}", flush=True)
        results["loaded"].append(figures(rows, "loaded"))
    rows, _ = score(work / "quiet", work / "quiet_report_last", cache, args.timing_trials)
    results["quiet"].append(figures(rows, "quiet"))
    shutil.rmtree(work, ignore_errors=True)
    worst = 0.0
    for what in ("answer", "eager"):
        quiet = statistics.median(r[what] for r in results["quiet"])
        moved = max(abs(r[what] / quiet - 1) for r in results["quiet"] + results["loaded"])
        worst = max(worst, moved)
        print(f"{what}: quiet median {quiet:.4f} ms; every measurement within {moved * 100:.2f}% of it")
    print(json.dumps(results))
    return 0 if worst <= 0.02 else 1


if __name__ == "__main__":
    sys.exit(main())
