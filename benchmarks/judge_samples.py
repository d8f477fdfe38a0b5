"""Benchmark: where a warm judge's time goes, function by function, sampled. Prints the figures.

Judges ANSWERS/<problem>/<files> (as ``rl_step.py`` takes them, each problem's reference sent as text, as an RL
dataset carries it) all at once through one ``Evaluator`` with one judge, as a trainer's step, ``--rounds`` times; the first round builds the answers and times the baselines, and the last is sampled:
every ``--interval-ms`` a thread of this process reads the stack of the judge's thread (``sys._current_frames``):
with an answer in hand (``device_judge`` on its stack), each function on it is counted, a wait in the function that
waits (a worker's reply, a spare's start, the GPU's turn); without one, the sample counts as waiting for an answer. Printed: the answers'
verdicts and stage seconds, then the functions (evalkit's and the libraries' they call) that were on a busy
thread's stack in the most samples (inclusive) and innermost in the most (self), each as seconds (samples times
the wall time a sample stands for) and as a share of the busy samples. With one judge the judging runs in this process, so that is
where a warm answer's time goes between stages, e.g. how much of a timed request is the judge's own work.

    python3 benchmarks/judge_samples.py --answers ANSWERS [--problems problems] [--device cuda]
        [--extra-setting timing_trials=30] [--rounds 2] [--interval-ms 2] [--top 40] [--json FILE]
        [--expand sandboxed_reference.py:_load ...]

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
SERVING = "engine.py:_serve"  # the judge's thread, answer after answer


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
        self.between = 0  # samples of the judge's thread with no answer in hand
        self.ticks, self.sampled_s = 0, 0.0  # sampling rounds, and the wall time they spanned (a sample's worth)
        self.callees: Counter[tuple[str, str]] = Counter()
        self.on = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        me = threading.get_ident()
        while True:
            self.on.wait()
            began = time.monotonic()
            self.ticks += 1
            for ident, frame in sys._current_frames().items():
                stack = stack_of(frame) if ident != me else []
                if SERVING not in stack:
                    continue
                if not any(name.startswith(JUDGING_FILE) for name in stack):
                    self.between += 1
                    continue
                self.busy += 1
                self.innermost[stack[0]] += 1
                self.inclusive.update(set(stack))
                self.callees.update(set(zip(stack[1:], stack[:-1])))
            time.sleep(self.interval_s)
            self.sampled_s += time.monotonic() - began

    @property
    def sample_s(self) -> float:
        """The wall time one sample stands for: reading the stacks takes time of its own beside the interval."""
        return self.sampled_s / max(self.ticks, 1)

    def table(self, counts: Counter[str], top: int) -> list[dict[str, Any]]:
        return [{"function": name, "s": round(n * self.sample_s, 2), "share": round(n / max(self.busy, 1), 3)}
                for name, n in counts.most_common(top)]

    def callees_of(self, function: str, top: int) -> list[dict[str, Any]]:
        """What ``function`` called, in the samples it was on the stack: each callee's seconds."""
        mine = Counter({callee: n for (caller, callee), n in self.callees.items() if caller == function})
        return self.table(mine, top)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=Path, required=True)
    parser.add_argument("--problems", type=Path, default=ROOT / "problems")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--extra-setting", action="append", default=[], help="NAME=VALUE, an Evaluator setting")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--interval-ms", type=float, default=2.0)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--expand", action="append", default=[], help="FILE:FUNCTION whose callees to print")
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
    print(f"\nthe judge's thread: {sampler.busy * sampler.sample_s:.2f} s with an answer in hand, "
          f"{sampler.between * sampler.sample_s:.2f} s waiting for one, over {sampler.sampled_s:.1f} s sampled "
          f"({sampler.ticks} samples, {sampler.sample_s * 1e3:.2f} ms each)")
    figures = {"busy_samples": sampler.busy, "between_samples": sampler.between, "sample_ms": sampler.sample_s * 1e3,
               "answers": rows,
               "inclusive": sampler.table(sampler.inclusive, args.top),
               "innermost": sampler.table(sampler.innermost, args.top),
               "callees": {name: sampler.callees_of(name, 12) for name in args.expand}}
    for kind in ("inclusive", "innermost"):
        print(f"\n{kind} (busy samples {sampler.busy}, {sampler.sample_s * 1e3:.2f} ms each)")
        for entry in figures[kind]:
            print(f"  {entry['s']:8.2f} s  {entry['share']:6.1%}  {entry['function']}")
    for name, entries in figures["callees"].items():
        print(f"\n{name} called")
        for entry in entries:
            print(f"  {entry['s']:8.2f} s  {entry['share']:6.1%}  {entry['function']}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
