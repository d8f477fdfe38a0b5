"""Benchmark: what a new ``Evaluator``'s first answer costs against a warm one's. Prints the figures.

Builds one ``Evaluator``, waits ``--idle`` seconds (a trainer that builds its judge, then loads its model), then
judges ``--answers`` answers one after the other: the same answer file, each with a comment of its own, so every
one is built anew (as an RL step's answers are). Printed per answer: its wall time, verdict and ``stage_seconds``;
with ``--log``, evalkit's log lines with the seconds since the start, to see where the first answer's time goes.

    python3 benchmarks/first_answer.py [--cache DIR] [--idle 0] [--answers 3] [--log] [--device cpu|cuda]
        [--problems tests/fixtures/judge_problems] [--problem linear_relu]
        [--answer tests/fixtures/judge_submissions/fixtures/linear_relu/correct_cpp.py]

Without ``--cache`` a new, empty cache folder is used (no build, no baseline, no precompiled torch header: a
trainer's first run); a ``--cache`` used before holds them (a trainer started again). Run from the
repository root. On a GPU (``--device cuda``) pass the problem and answer, e.g. ``--problems problems --problem
alexnet_conv1 --answer A`` where A is an answer that builds nothing (a Triton kernel, or plain PyTorch), so that each
answer's time is the judge's and not a build's.
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, help="the cache folder (default: a new, empty one)")
    parser.add_argument("--idle", type=float, default=0.0, help="seconds between the constructor and the first answer")
    parser.add_argument("--answers", type=int, default=3)
    parser.add_argument("--problems", type=Path, default=FIXTURES / "judge_problems")
    parser.add_argument("--problem", default="linear_relu")
    parser.add_argument("--answer", type=Path,
                        default=FIXTURES / "judge_submissions" / "fixtures" / "linear_relu" / "correct_cpp.py")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--log", action="store_true", help="print evalkit's log (INFO), with seconds since the start")
    args = parser.parse_args()
    start = time.monotonic()
    if args.log:
        logging.basicConfig(level=logging.INFO, format="%(relativeCreated)8.0f ms %(threadName)s %(name)s: %(message)s")
    from evalkit import Evaluator

    cache = args.cache or Path(tempfile.mkdtemp(prefix="evalkit-first-answer-"))
    text, nonce = args.answer.read_text(), uuid.uuid4().hex[:8]
    imported = time.monotonic()
    with Evaluator(problems=args.problems, device=args.device, cache_dir=cache, baselines="eager", timing_trials=5,
                   warmup=1, seed=3) as ev:
        built = time.monotonic()
        print(f"import {imported - start:.1f} s, constructor {built - imported:.1f} s (cache {cache})", flush=True)
        time.sleep(args.idle)
        for n in range(args.answers):
            began = time.monotonic()
            row = ev.judge(args.problem, f"{text}\n# answer {n} of run {nonce}\n")
            stages = {name: round(value, 1) for name, value in row["stage_seconds"].items()}
            print(f"answer {n}: {time.monotonic() - began:5.1f} s  {row['verdict']:<10} {json.dumps(stages)}",
                  flush=True)
    print(f"closed at {time.monotonic() - start:.1f} s", flush=True)


if __name__ == "__main__":
    main()
