"""Do evalkit's speedups reproduce? Scores one set of answers N times (on every GPU of the host) and prints the spread.

Every run is `python3 -m evalkit score SET` in a subprocess (the CLI only), into a fresh report folder, with the
baselines timed again (`--remeasure-baselines`), builds taken from one shared cache (a first, untimed run fills
it). Each round scores the set once on each GPU, the GPUs at once (`--gpus G`, one process per GPU), so the host
carries the load evalkit itself makes. Printed, per answer that every run judged correct:

- its speedup vs eager in each run, and their spread: (max - min) / median over the rounds, per GPU; and how far
  the farthest run lies from their median (issue 26's own measure: each run "within 2% of its median");
- the GPUs' agreement: the spread of the per-GPU medians of that speedup;
- the judge's median against the worker's own CUDA-event claim (`timing.claimed_median_ms`): the largest gap,
  (judge - claim) / claim, over the runs;
- where rows carry intervals (`speedup_vs_eager_ci`), how many runs' speedups lie inside every other run's
  interval of the same answer;
- how far the answer's own CUDA events (its claim) lie from their median over the rounds, per GPU: what its kernels
  did in each fresh worker, whatever the judge's clock read. Where this is as large as the speedup's distance, the
  run-to-run movement is the GPU's, not the judge's.

Every process judges the same answers at the same moments, and each judged worker holds its answer's build-cache
entry alone (`docs/hostile.md`): from one shared cache the processes take turns on every answer, waiting in their
calibrate and profile stages (168-190 s per process per round with four GPUs). `--cache-per-gpu DIR` gives each GPU's
runs a cache of its own, `DIR/gpu<N>`, filled at once by one first run per GPU.

`--json FILE` is written after every round (`runs_done` of `runs`), so a run cut short (a device call's time
limit) keeps the figures of the rounds it finished.

Targets (issue 26): every distance from the median, every GPU gap and every judge-vs-claim gap within 2% (the
spread, about twice as strict, is printed beside them); each printed "met" or
"MISSED" (`--check` makes a miss exit 1).

    python3 benchmarks/reproducibility.py [--set problems/] [--problems problems/] [--runs 3] [--gpus all|0,1]
        [--device cuda|cpu] [--baselines eager] [--extra='--timing-budget 5'] [--keep DIR] [--json FILE] [--check]
        [--fill-only | --filled]   # fill the build cache in one call, score in the next
        [--cache-per-gpu DIR]      # a build cache per GPU: no turns between the GPUs' processes

On a CPU machine (one "GPU": the CPU), `--device cpu --problems tests/fixtures/judge_problems` with a `--set` of C++
answers to its linear_relu, such as copies of `tests/fixtures/judge_submissions/fixtures/linear_relu/correct_cpp.py`
each given a comment line of its own (so each builds an entry of its own): two answers, two rounds, in under a
minute on 2 cores. The `timing_*` fixtures are GPU-sized (long_chain is 40 chained 4096 x 4096 matmuls: its
judging had not ended after four minutes on 2 cores). Run from the repository root.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TARGET = 0.02  # the spread, GPU gap and judge-vs-claim gap allowed


def gpu_indices(spec: str, device: str) -> list[str]:
    """The GPUs to score on, one process each: "all" (every visible one), or indices "0,2". On CPU: one, "cpu"."""
    if device == "cpu":
        return ["cpu"]
    if spec != "all":
        return [part.strip() for part in spec.split(",") if part.strip()]
    found = subprocess.run(["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"], capture_output=True,
                           text=True, check=False)
    indices = found.stdout.split()
    if not indices:
        sys.exit("reproducibility.py: nvidia-smi lists no GPU; pass --device cpu or --gpus")
    return indices


def score_command(args: argparse.Namespace, out: Path, gpu: str, remeasure: bool = True) -> list[str]:
    command = [sys.executable, "-m", "evalkit", "score", args.set, "--problems", args.problems, "--out", str(out),
               "--baselines", args.baselines, "--device", args.device, "--no-progress", "-q"]
    command += ["--remeasure-baselines"] if remeasure else []
    command += ["--cache-dir", str(args.cache_per_gpu / f"gpu{gpu}")] if args.cache_per_gpu else []
    return command + shlex.split(args.extra)


def environment(gpu: str) -> dict[str, str]:
    """The environment of one GPU's run: that GPU alone visible (evalkit then judges on every GPU it sees)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return env if gpu == "cpu" else {**env, "CUDA_VISIBLE_DEVICES": gpu}


def run_round(args: argparse.Namespace, where: Path, name: str, gpus: list[str]) -> dict[str, Path]:
    """One round: the set scored once per GPU, all GPUs at once. The report folder of each GPU."""
    outs = {gpu: where / f"{name}-gpu{gpu}" for gpu in gpus}
    score_at_once({gpu: score_command(args, outs[gpu], gpu) for gpu in gpus}, name)
    return outs


def score_at_once(commands: dict[str, list[str]], what: str) -> None:
    """Each GPU's command run at once, in that GPU's environment; exits naming the first that fails."""
    started = [(gpu, subprocess.Popen(command, cwd=ROOT, env=environment(gpu), text=True, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT))
               for gpu, command in commands.items()]
    for gpu, process in started:
        log, _ = process.communicate()
        if process.returncode != 0:
            sys.exit(f"reproducibility.py: {what} on {gpu} exited {process.returncode}:\n{log[-3000:]}")


def read_rows(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines() if line.strip()]


def spread(values: list[float]) -> float:
    """(max - min) / median: 0 for a single value."""
    return (max(values) - min(values)) / statistics.median(values) if len(values) > 1 else 0.0


def from_median(values: list[float]) -> float:
    """The largest |value - median| / median: how far the farthest run lies from the runs' median."""
    middle = statistics.median(values)
    return max(abs(value - middle) for value in values) / middle


def inside_others(points: list[float], intervals: list[list[float] | None]) -> tuple[int, int]:
    """How many (point, other interval) pairs have the point inside the other run's interval, of how many."""
    hits = total = 0
    for i, point in enumerate(points):
        for j, interval in enumerate(intervals):
            if i != j and interval:
                total += 1
                hits += interval[0] <= point <= interval[1]
    return hits, total


def summarize(rounds: list[dict[str, Path]]) -> dict[str, Any]:
    """Per answer: speedups per GPU over the rounds, their spreads, the GPU gap and the judge-vs-claim gap."""
    runs: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for outs in rounds:
        for gpu, out in outs.items():
            for row in read_rows(out):
                runs[f"{row['run']}/{row['problem']}/{row['sample']}"][gpu].append(row)
    answers = {}
    for key, by_gpu in sorted(runs.items()):
        rows = [row for gpu_rows in by_gpu.values() for row in gpu_rows]
        if not all(row["verdict"] == "correct" and row.get("speedup_vs_eager") for row in rows):
            answers[key] = {"verdicts": sorted({row["verdict"] for row in rows})}
            continue
        speedups = {gpu: [row["speedup_vs_eager"] for row in gpu_rows] for gpu, gpu_rows in by_gpu.items()}
        claims = [(row["timing"]["median_ms"] - row["timing"]["claimed_median_ms"]) / row["timing"]["claimed_median_ms"]
                  for row in rows if row["timing"].get("claimed_median_ms")]
        hits = [inside_others(speedups[gpu], [row.get("speedup_vs_eager_ci") for row in by_gpu[gpu]])
                for gpu in speedups]
        answers[key] = {
            "speedups": speedups,
            "medians_ms": {gpu: [row["timing"]["median_ms"] for row in gpu_rows] for gpu, gpu_rows in by_gpu.items()},
            "eager_ms": {gpu: [(row.get("baselines") or {}).get("eager", {}).get("median_ms") for row in gpu_rows]
                         for gpu, gpu_rows in by_gpu.items()},
            "spread": max(spread(values) for values in speedups.values()),
            "from_median": max(from_median(values) for values in speedups.values()),
            "gpu_gap": spread([statistics.median(values) for values in speedups.values()]),
            "judge_vs_claim": max(claims, key=abs) if claims else None,
            "claim_from_median": _claim_from_median(by_gpu),
            "inside_other_intervals": [sum(h for h, _ in hits), sum(t for _, t in hits)],
        }
    return answers


def _claim_from_median(by_gpu: dict[str, list[dict[str, Any]]]) -> float | None:
    """The largest distance of the answer's own CUDA-event median from its median over the rounds, per GPU."""
    series = [[row["timing"]["claimed_median_ms"] for row in rows] for rows in by_gpu.values()]
    series = [values for values in series if values and all(values)]
    return max((from_median(values) for values in series), default=None)


def verdicts_of(answers: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each target's worst figure and whether it was met."""
    timed = [a for a in answers.values() if "spread" in a]
    figures = {"from_median": max((a["from_median"] for a in timed), default=None),
               "gpu_gap": max((a["gpu_gap"] for a in timed), default=None),
               "judge_vs_claim": max((abs(a["judge_vs_claim"]) for a in timed if a["judge_vs_claim"] is not None),
                                     default=None)}
    return {name: {"worst": value, "met": value is not None and value <= TARGET} for name, value in figures.items()}


def print_report(answers: dict[str, Any], targets: dict[str, dict[str, Any]], seconds: float) -> None:
    print(f"\nreproducibility: {len(answers)} answers, {seconds:.0f} s")
    for key, answer in answers.items():
        if "spread" not in answer:
            print(f"  {key}: not correct in every run ({', '.join(answer['verdicts'])})")
            continue
        runs = "; ".join(f"{gpu}: " + ", ".join(f"{s:.3f}x" for s in values) for gpu, values in answer["speedups"].items())
        claim = answer["judge_vs_claim"]
        hits, total = answer["inside_other_intervals"]
        own = answer.get("claim_from_median")
        print(f"  {key}: {runs}  spread {answer['spread']:.1%}  from median {answer['from_median']:.1%}  gpu gap {answer['gpu_gap']:.1%}  "
              f"judge vs claim {'n/a' if claim is None else f'{claim:+.1%}'}"
              + (f"  inside others' intervals {hits}/{total}" if total else "")
              + ("" if own is None else f"  own events from median {own:.1%}"))
    for name, target in targets.items():
        worst = target["worst"]
        print(f"target {name} <= {TARGET:.0%}: worst {'n/a' if worst is None else f'{worst:.2%}'} "
              f"{'met' if target['met'] else 'MISSED'}")


def fill(args: argparse.Namespace, where: Path, gpus: list[str]) -> None:
    """A first, untimed run: it fills the build cache (and checks the set can be scored at all); with
    ``--cache-per-gpu``, one run per GPU at once, each filling its GPU's cache."""
    score_at_once({gpu: score_command(args, where / f"build-{gpu}", gpu, remeasure=False)
                   for gpu in (gpus if args.cache_per_gpu else gpus[:1])}, "the first run")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", default="problems", help="what to score (any `evalkit score` input)")
    parser.add_argument("--problems", default="problems")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--gpus", default="all")
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--baselines", default="eager")
    parser.add_argument("--extra", default="", help="further `evalkit score` options, one string")
    parser.add_argument("--keep", type=Path, help="keep the report folders here")
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--fill-only", action="store_true", help="only the first, untimed run (fills the cache)")
    parser.add_argument("--filled", action="store_true", help="no first run: the cache was filled before")
    parser.add_argument("--cache-per-gpu", type=Path, metavar="DIR",
                        help="each GPU's runs build into DIR/gpu<N> of their own (filled at once): from one shared "
                             "cache, processes judging the same answer take turns on its build's entry")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error(f"--runs {args.runs}: give at least 1 round")
    gpus = gpu_indices(args.gpus, args.device)
    where = args.keep or Path(tempfile.mkdtemp(prefix="evalkit-repro-"))
    where.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    if args.filled:
        print("builds: --filled, the cache is taken as filled", flush=True)
    else:
        fill(args, where, gpus)
        print(f"builds ready in {time.monotonic() - start:.0f} s", flush=True)
    if args.fill_only:
        return
    start = time.monotonic()
    rounds = []
    for number in range(1, args.runs + 1):
        rounds.append(run_round(args, where, f"run{number}", gpus))
        print(f"run {number} of {args.runs} done ({time.monotonic() - start:.0f} s)", flush=True)
        answers, targets = write_figures(args, gpus, rounds)  # after every round: a run cut short keeps its rounds
    print_report(answers, targets, time.monotonic() - start)
    if args.check and not all(t["met"] for t in targets.values()):
        sys.exit(1)


def write_figures(args: argparse.Namespace, gpus: list[str], rounds: list[dict[str, Path]]
                  ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The figures of the rounds done so far, written to ``--json`` (``runs_done`` of ``runs``) when it is given."""
    answers = summarize(rounds)
    targets = verdicts_of(answers)
    if args.json:
        args.json.write_text(json.dumps({"gpus": gpus, "runs": args.runs, "runs_done": len(rounds),
                                         "answers": answers, "targets": targets}, indent=2))
    return answers, targets


if __name__ == "__main__":
    main()
