"""Does evalkit's own load move its timings? Prints the figures; exits 1 if load moved a median more than 2%.

An honest answer (a problem's curated solution) and the eager baseline are judged on a quiet machine, then
again in a new report while a pool of real CUDA builds compiles and a hostile build spins every core
(builds import submissions, so a build is untrusted code that runs beside judging). evalkit keeps every
build off a timing (on a GPU, by confining builds to their own cores, which they cannot undo; elsewhere by
freezing them: each loaded run prints which), so the medians should not move.

    python3 benchmarks/timing_under_load.py [--problem alexnet_conv1] [--builds 16] [--rounds 3]
    python3 benchmarks/timing_under_load.py --verdict FILE   # the criterion again, on a series printed before

The series alternates quiet and loaded runs, quiet first and last (Q L Q L ... Q). A GPU's own speed
drifts between reports by a few percent (the H200 moved 3-6% between two quiet runs, by the worker's own
CUDA events as much as by the judge's clock), so a loaded median is compared with the mean of the two
quiet runs bracketing it: drift that is slow against one run cancels, and what is left is the load's
effect. The criterion: each loaded median (answer and eager) within 2% of its bracket. The quiet runs'
own spread is printed beside it, as the scale the GPU itself varies on.

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


LIMIT = 0.02  # the largest move of a median, relative to its quiet bracket, that passes
MEASURES = ("answer", "eager")


def load_effects(series: list[dict]) -> list[dict[str, float]]:
    """For each loaded run of ``series`` (runs in order, each ``{"kind": "quiet"|"loaded", "answer": ms,
    "eager": ms}``), its medians relative to the mean of the quiet runs just before and after it, minus 1."""
    effects = []
    for i, run in enumerate(series):
        if run["kind"] != "loaded":
            continue
        before = next((r for r in reversed(series[:i]) if r["kind"] == "quiet"), None)
        after = next((r for r in series[i + 1:] if r["kind"] == "quiet"), None)
        bracket = [r for r in (before, after) if r is not None]
        if not bracket:
            raise ValueError(f"loaded run {i} has no quiet run beside it: a series starts and ends quiet")
        effects.append({what: run[what] / statistics.mean(r[what] for r in bracket) - 1 for what in MEASURES})
    return effects


def quiet_drift(series: list[dict]) -> dict[str, float]:
    """How far apart the quiet runs are (largest / smallest - 1): the GPU's own variation between reports."""
    quiet = [r for r in series if r["kind"] == "quiet"]
    return {what: max(r[what] for r in quiet) / min(r[what] for r in quiet) - 1 for what in MEASURES}


def verdict(series: list[dict]) -> tuple[bool, list[str]]:
    """Whether every loaded median is within ``LIMIT`` of its quiet bracket, and the lines that say so."""
    effects = load_effects(series)
    if not effects:
        raise ValueError("the series holds no loaded run")
    lines = []
    for what in MEASURES:
        moves = ", ".join(f"{e[what] * 100:+.2f}%" for e in effects)
        lines.append(f"{what}: loaded vs its quiet bracket {moves}; quiet runs spread "
                     f"{quiet_drift(series)[what] * 100:.2f}% among themselves")
    worst = max(abs(e[what]) for e in effects for what in MEASURES)
    met = worst <= LIMIT
    lines.append(f"load moved a median by at most {worst * 100:.2f}% (limit {LIMIT * 100:g}%): "
                 f"{'met' if met else 'MISSED'}")
    return met, lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problem", default="alexnet_conv1")
    parser.add_argument("--builds", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3, help="loaded runs, each between two quiet ones")
    parser.add_argument("--timing-trials", type=int, default=50)
    parser.add_argument("--verdict", type=Path, metavar="FILE",
                        help="judge a series printed by an earlier run (its last line, JSON) and run nothing")
    args = parser.parse_args()
    series = read_series(args.verdict, parser) if args.verdict is not None else measure(args)
    try:
        met, lines = verdict(series)
    except ValueError as err:
        parser.error(f"{args.verdict or 'the series measured'}: {err}")
    print("\n".join(lines))
    print(json.dumps({"series": series}))
    return 0 if met else 1


def read_series(path: Path, parser: argparse.ArgumentParser) -> list[dict]:
    """The series in the last line of a log this script printed (``{"series": [...]}``); a clear error otherwise."""
    try:
        lines = path.read_text().strip().splitlines()
        series = json.loads(lines[-1])["series"] if lines else None
    except OSError as err:
        parser.error(f"--verdict {path}: cannot read it ({err.strerror})")
    except (ValueError, KeyError, TypeError):
        series = None
    if not isinstance(series, list) or not all(isinstance(r, dict) and {"kind", *MEASURES} <= r.keys() for r in series):
        parser.error(f"--verdict {path}: its last line is not the JSON series this script prints "
                     '({"series": [{"kind": "quiet", "answer": ms, "eager": ms}, ...]}); give the log of a run')
    return series


def measure(args: argparse.Namespace) -> list[dict]:
    """Run the series (Q L Q ... L Q) and return each run's medians in order."""
    problem = ROOT / "problems" / args.problem
    honest_code = next((problem / "solutions").glob("*.py")).read_text()
    reference = (problem / "reference.py").read_text()
    work = Path(tempfile.mkdtemp(prefix="evalkit-load-bench-"))
    work.chmod(0o755)  # the sandbox user must reach the build cache inside it (mkdtemp makes it private)
    cache = work / "cache"
    quiet_dir = work / "quiet" / "bench" / args.problem
    quiet_dir.mkdir(parents=True)
    (quiet_dir / "a_honest.py").write_text(honest_code)
    series = []
    try:
        for round_ in range(args.rounds + 1):
            rows, _ = score(work / "quiet", work / f"quiet_report{round_}", cache, args.timing_trials)
            series.append({"kind": "quiet", **figures(rows, "quiet")})
            if round_ == args.rounds:
                break
            loaded = work / f"loaded{round_}"
            _write_load(loaded / "bench" / args.problem, honest_code, reference, round_, args.builds)
            rows, seconds = score(loaded, work / f"loaded_report{round_}", cache, args.timing_trials)
            builds = [r["stage_seconds"].get("build_s", 0.0) for s, r in rows.items() if s.startswith("c_load")]
            isolation = json.loads((work / f"loaded_report{round_}" / "environment.json").read_text()).get(
                "build_isolation", "not recorded")
            print(f"         {len(builds)} builds beside it, {statistics.median(builds):.0f} s each (median); "
                  f"run {seconds:.0f} s; verdicts {sorted({r['verdict'] for r in rows.values()})}; "
                  f"builds kept off by {isolation}", flush=True)
            series.append({"kind": "loaded", **figures(rows, "loaded")})
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return series


def _write_load(folder: Path, honest_code: str, reference: str, round_: int, builds: int) -> None:
    folder.mkdir(parents=True)
    (folder / "a_honest.py").write_text(honest_code)  # built already: judged first, beside the builds
    (folder / "b_spinner.py").write_text(SPINNER.format(reference=reference))
    for n in range(builds):
        (folder / f"c_load_{round_}_{n:02d}.py").write_text(BUILD_TEMPLATE.format(n=f"{round_}_{n}", reference=reference))


if __name__ == "__main__":
    sys.exit(main())
