"""Benchmark: an RL step's builds alone, through evalkit's own build stage, as many at once as `evalkit serve` builds
beside one judge: what a cold step's builds take with no judging beside them. Prints the figures.

Issue 43 asks a cold step (`benchmarks/rl_step.py` on an empty cache) to take at most 1.3x its builds alone; this is
the denominator. It takes the same answers as `rl_step.py` (`--answers`, `--group`, `--distinct`: the same texts,
so the same build keys), extracts each one's code as the server does (`evalkit.intake.triage`), and builds every
answer that builds something (`builder.build`, the build sandbox and limits of `evalkit score`) in a pool of
`--jobs` builds, by default the number evalkit takes on this machine with one judge (`JudgeOptions.build_jobs`, on
the cores the judge leaves to builds). Answers with no code, or whose code builds nothing, are counted and skipped,
as the server skips their build. The same code twice builds once: the second waits for the first and finds it
cached, as in the server.

Printed: the builds, the pool's size, the time until the last build ended (`makespan_s`, the figure to set a cold
step against), each build's seconds (median, longest) and the builds' statuses. `--json FILE` keeps them with every
build's own figures. `--cache DIR` builds into DIR (default: a new folder, removed after): run it on a cache other
than the cold step's, or the step finds every build done.

    python3 benchmarks/builds_alone.py --answers ANSWERS [--problems problems/] [--group 8] [--distinct]
        [--device cuda|cpu] [--jobs N] [--cache DIR] [--json FILE]

Run from the repository root.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import Future
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from rl_step import groups  # noqa: E402  (the answers of a step, as rl_step.py sends them)

from evalkit.intake.static_scan import builds_nothing  # noqa: E402
from evalkit.intake.triage import triage  # noqa: E402
from evalkit.judge.builder import BuildOutcome, builds_root  # noqa: E402
from evalkit.sandbox.freezer import BuildFreezer, partition_builds  # noqa: E402
from evalkit.sandbox.launcher import Limits  # noqa: E402
from evalkit.sandbox.remains import kill_group  # noqa: E402
from evalkit.schedule.backend import LocalBackend  # noqa: E402
from evalkit.schedule.options import JudgeOptions, default_limits  # noqa: E402
from evalkit.schedule.placement import PlacementError, plan  # noqa: E402
from evalkit.sources.problems import discover_problems  # noqa: E402


def build_pool(device: str, jobs: int) -> tuple[int, Limits, tuple[int, ...]]:
    """The builds at once, their limits and their cores, as `evalkit serve --device DEVICE` with one judge takes them
    here."""
    visible = 0
    if device == "cuda":
        import torch

        visible = torch.cuda.device_count()
    placement = plan(device, "all", 1, sorted(os.sched_getaffinity(0)), visible)
    count = JudgeOptions(jobs=jobs).build_jobs(len(placement.build_cpus) or None, device=device)
    return count, replace(default_limits(device, None), cpus=placement.build_cpus or None), placement.build_cpus


def codes(problems: Path, answers: Path, group: int, distinct: bool) -> tuple[list[tuple[str, str]], Counter[str]]:
    """(problem id, code) of every answer that builds something, and how many were skipped, by why."""
    found, skipped = [], Counter[str]()
    for problem, (_, texts) in groups(problems, answers, group, distinct).items():
        for text in texts:
            code = triage(text).code
            if not code:
                skipped["no_code"] += 1
            elif builds_nothing(code):
                skipped["builds_nothing"] += 1
            else:
                found.append((problem, code))
    return found, skipped


def build_all(work: list[tuple[str, str]], problems: Path, cache: Path, device: str, jobs: int) -> dict[str, Any]:
    """Build every answer of ``work`` in one pool; the figures."""
    count, limits, cores = build_pool(device, jobs)
    known = discover_problems(problems)
    backend, freezer = LocalBackend(count), BuildFreezer(limits.group)  # the engine's: no judge here freezes it
    partition_builds(freezer, device, cores)
    start = time.monotonic()
    ends: dict[int, float] = {}

    def submit(place: int, problem: str, code: str) -> Future[BuildOutcome]:
        settings = known[problem].settings
        future = backend.start_build(code, builds_root(cache), device, settings.build_timeout_s, limits,
                                     known[problem].init_inputs_or_none(), freezer)
        future.add_done_callback(lambda _: ends.setdefault(place, time.monotonic() - start))
        return future

    try:
        futures = [submit(place, problem, code) for place, (problem, code) in enumerate(work)]
        outcomes = [future.result() for future in futures]
    finally:
        backend.close()
        freezer.close()
        kill_group(limits.group)
    builds = [{"problem": problem, "status": outcome.status, "seconds": outcome.seconds, "cached": outcome.cached,
               "ended_s": ends.get(place)} for place, ((problem, _), outcome) in enumerate(zip(work, outcomes))]
    seconds = [outcome.seconds for outcome in outcomes]
    return {"jobs": count, "builds": len(builds), "makespan_s": max(ends.values(), default=0.0),
            "build_s_median": statistics.median(seconds) if seconds else 0.0,
            "build_s_longest": max(seconds, default=0.0),
            "statuses": dict(Counter(build["status"] for build in builds)), "per_build": builds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=Path, default=ROOT / "problems")
    parser.add_argument("--answers", type=Path, required=True, help="ANSWERS/<problem>/<answer files>")
    parser.add_argument("--group", type=int, default=8, help="answers a problem, as rl_step.py's --group")
    parser.add_argument("--distinct", action="store_true", help="each answer's code a text of its own (rl_step.py's)")
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--jobs", type=int, default=0, help="builds at once (default: evalkit's, with one judge)")
    parser.add_argument("--cache", type=Path, default=None, help="build into this cache (default: a new one)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    if args.group < 1 or args.jobs < 0:
        parser.error("--group must be at least 1 and --jobs at least 0 (0: evalkit's default)")
    work, skipped = codes(args.problems, args.answers, args.group, args.distinct)
    with tempfile.TemporaryDirectory(prefix="evalkit-builds-alone-") as scratch:
        try:
            figures = build_all(work, args.problems, args.cache or Path(scratch), args.device, args.jobs)
        except PlacementError as err:  # raised before any build starts
            sys.exit(f"builds_alone: {err}")
    figures["skipped"] = dict(skipped)
    print(f"builds_alone: {figures['builds']} builds, {figures['jobs']} at once: the last ended after "
          f"{figures['makespan_s']:.1f} s; a build {figures['build_s_median']:.1f} s at the median, "
          f"{figures['build_s_longest']:.1f} s at the longest; {figures['statuses']}; skipped {figures['skipped']}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
