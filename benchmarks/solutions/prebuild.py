"""Build the curated solutions ahead of judging, through evalkit's own build stage (same cache keys).

    EVALKIT_CACHE=/tmp/evalkit-cache python3 benchmarks/solutions/prebuild.py [--jobs 8]

Run in the background on the GPU machine while something else uses the GPU: builds see no GPU
(evalkit's build sandbox hides it) and a later `evalkit score problems/` finds them cached. The builds run as
`benchmarks/builds_alone.py` runs them (one pool, the engine's limits and freezer).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from builds_alone import build_all  # noqa: E402  (evalkit's build stage, in one pool)

from evalkit.intake.triage import triage  # noqa: E402
from evalkit.schedule.local import default_cache_dir  # noqa: E402
from evalkit.sources.problems import discover_problems  # noqa: E402
from evalkit.sources.submissions import discover  # noqa: E402


def main() -> None:
    jobs = int(sys.argv[sys.argv.index("--jobs") + 1]) if "--jobs" in sys.argv else 8
    problems = Path("problems")
    found = discover(problems, discover_problems(problems))
    work = [(sub.problem, code) for sub in found.submissions if (code := triage(sub.text).code)]
    figures = build_all(work, problems, default_cache_dir(), "cuda", jobs)
    for build in figures["per_build"]:
        print(f"[prebuild {build['ended_s']:5.0f} s] {build['problem']}: {build['status']} in {build['seconds']:.0f} s",
              flush=True)


if __name__ == "__main__":
    main()
