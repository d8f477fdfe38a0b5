"""Benchmark: where a warm judge's time goes, function by function, sampled. Prints the figures.

Judges ANSWERS/<problem>/<files> (as ``rl_step.py`` takes them, each problem's reference sent as text, as an RL
dataset carries it) all at once through one ``Evaluator`` with one judge, as a trainer's step, ``--rounds`` times; the first round builds the answers and times the baselines, and the last is sampled:
every ``--interval-ms`` a thread of this process reads the stack of every thread judging an answer (one with
``device_judge`` on its stack; ``sys._current_frames``). A judging thread whose innermost frame waits for another
thread (a lock, a queue) is idle and not counted; one that waits for a worker's reply is counted, in the function
that waits. Printed: the answers'
verdicts and stage seconds, then the functions (evalkit's and the libraries' they call) that were on a busy
thread's stack in the most samples (inclusive) and innermost in the most (self), each as seconds (samples times
the interval) and as a share of the busy samples. With one judge the judging runs in this process, so that is
where a warm answer's time goes between stages, e.g. how much of a timed request is the judge's own work.

    python3 benchmarks/judge_samples.py --answers ANSWERS [--problems problems] [--device cuda]
        [--extra-setting timing_trials=30] [--rounds 2] [--interval-ms 2] [--top 40] [--json FILE]

Run from the repository root.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
JUDGING_FILE = "device_judge.py"
IDLE_FILES = ("threading.py", "queue.py")


def answers_of(folder: Path) -> list[tuple[str, str, str]]:
    """(problem, answer name, text) for every answer file under ``folder``/<problem>/."""
    found = []
    for problem in sorted(p for p in folder.iterdir() if p.is_dir()):
        for file in sorted(f for f in problem.iterdir() if f.suffix in (".py", ".md", ".txt")):
            found.append((problem.name, file.name, file.read_text()))
    return found


def where(frame: FrameType) -> str:
    code = frame.f_code
    return f"{Path(code.co_filename).name}:{code.co_name}"


def stack_of(frame: FrameType) -> list[str]:
    """The stack's functions, innermost first."""
    names = []
    current: FrameType | None = frame
    while current is not None:
        names.append(where(current))
        current = current.f_back
    return names


class Sampler:
    """Samples every other thread's stack every ``interval_s`` while on."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s, self.inclusive, self.innermost, self.busy = interval_s, Counter[str](), Counter[str](), 0
        self.on = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        me = threading.get_ident()
        while True:
            self.on.wait()
            for ident, frame in sys._current_frames().items():
                stack = stack_of(frame) if ident != me else []
                if not any(name.startswith(JUDGING_FILE) for name in stack) or \
                        frame.f_code.co_filename.endswith(IDLE_FILES):
                    continue
                self.busy += 1
                self.innermost[stack[0]] += 1
                self.inclusive.update(set(stack))
            time.sleep(self.interval_s)

    def table(self, counts: Counter[str], top: int) -> list[dict[str, Any]]:
        return [{"function": name, "s": round(n * self.interval_s, 2), "share": round(n / max(self.busy, 1), 3)}
                for name, n in counts.most_common(top)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=Path, required=True)
    parser.add_argument("--problems", type=Path, default=ROOT / "problems")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--extra-setting", action="append", default=[], help="NAME=VALUE, an Evaluator setting")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--interval-ms", type=float, default=2.0)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--cache", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    from evalkit import Evaluator, Problem

    settings: dict[str, Any] = {"baselines": "eager"}
    for item in args.extra_setting:
        name, value = item.split("=", 1)
        settings[name] = int(value) if value.isdigit() else value
    sampler = Sampler(args.interval_ms / 1e3)
    answers, rows = answers_of(args.answers), []
    problems = {name: Problem.from_source((args.problems / name / "reference.py").read_text(), name)
                for name in {problem for problem, _, _ in answers}}
    cache = args.cache or Path(tempfile.mkdtemp(prefix="evalkit-judge-samples-"))
    with Evaluator(device=args.device, cache_dir=cache, judges=1, **settings) as ev:
        for round_ in range(args.rounds):
            last = round_ == args.rounds - 1
            if last:
                sampler.on.set()
            began = time.monotonic()
            pairs = [(problems[problem], text, f"{problem}/{name}") for problem, name, text in answers]
            for row in ev.judge_many(pairs):
                if last:
                    rows.append({"answer": row["sample"], "verdict": row["verdict"],
                                 "stage_seconds": {k: round(v, 2) for k, v in row["stage_seconds"].items()}})
            print(f"round {round_ + 1}: {len(answers)} answers in {time.monotonic() - began:.1f} s", flush=True)
        sampler.on.clear()
    for row in rows:
        print(f"{row['answer']:<60} {row['verdict']:<14} {json.dumps(row['stage_seconds'])}")
    figures = {"busy_samples": sampler.busy, "interval_ms": args.interval_ms, "answers": rows,
               "inclusive": sampler.table(sampler.inclusive, args.top),
               "innermost": sampler.table(sampler.innermost, args.top)}
    for kind in ("inclusive", "innermost"):
        print(f"\n{kind} (busy samples {sampler.busy}, {args.interval_ms:g} ms each)")
        for entry in figures[kind]:
            print(f"  {entry['s']:8.2f} s  {entry['share']:6.1%}  {entry['function']}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
