"""Build the curated solutions ahead of judging, through evalkit's own build stage (same cache keys).

    EVALKIT_CACHE=/tmp/evalkit-cache python3 benchmarks/solutions/prebuild.py [--jobs 8]

Run in the background on the GPU machine while something else uses the GPU: builds see no GPU
(evalkit's build sandbox hides it) and a later `evalkit score problems/` finds them cached.
"""

from __future__ import annotations

import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from evalkit.judge.builder import build
from evalkit.sources.problems import discover_problems
from evalkit.schedule.local import default_cache_dir, default_limits
from evalkit.sources.submissions import discover
from evalkit.intake.triage import triage


def main() -> None:
    jobs = int(sys.argv[sys.argv.index("--jobs") + 1]) if "--jobs" in sys.argv else 8
    problems = discover_problems(Path("problems"))
    found = discover(Path("problems"), problems)
    limits = default_limits("cuda", None)
    root = default_cache_dir() / "builds"
    start = time.time()

    def one(sub):
        early = triage(sub, "cuda")
        if early.verdict is not None:
            return f"{sub.problem}/{sub.sample}: triage {early.verdict}"
        outcome = build(early.code, root, "cuda", problems[sub.problem].settings.build_timeout_s, limits,
                        problems[sub.problem].init_inputs_or_none())
        return f"{sub.problem}/{sub.sample}: {outcome.status} in {outcome.seconds:.0f} s {outcome.message[:300]}"

    with ThreadPoolExecutor(jobs) as pool:
        for line in pool.map(one, found.submissions):
            print(f"[prebuild {time.time() - start:5.0f} s] {line}", flush=True)


if __name__ == "__main__":
    main()
