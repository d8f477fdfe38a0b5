"""Benchmark: whether one ``Evaluator``'s memory stays flat over many answers. Prints the figures.

Pushes ``--no-judge`` answers that need no judge (no code block, a syntax error: answered at once) through one
``Evaluator`` in batches of ``--batch``, then ``--judged`` copies of one trivial correct CPU answer (built once, then
from the build cache), and prints every so often the resident memory (RSS) of this process and of its child
processes (judge processes, sandboxed workers), with the sizes of the engine's internal containers.

    python3 benchmarks/memory.py [--no-judge 100000] [--judged 40] [--batch 1000] [--every 10000] [--cache DIR]

CPU only; run from the repository root (``PYTHONPATH=.``).
"""

from __future__ import annotations

import argparse
import gc
import os
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
ANSWER = FIXTURES / "judge_submissions" / "fixtures" / "linear_relu" / "correct_cpp.py"
NO_JUDGE = ("I could not write this kernel.", "```python\ndef forward(x:\n    return x\n```")


def rss_mib(pid: int) -> float:
    """A process's resident memory in MiB (0 once it is gone)."""
    from evalkit.sandbox.processes import resident_bytes

    return resident_bytes(pid) / 2**20


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (``/proc/PID/task/*/children``)."""
    found, queue = [], [pid]
    while queue:
        parent = queue.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                children = [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                continue
            found.extend(children)
            queue.extend(children)
    return found


def report(label: str, done: int, started: float, ev: Any) -> None:
    gc.collect()
    children = descendants(os.getpid())
    print(f"{label:>8} {done:>7} answers  {time.monotonic() - started:7.1f} s  driver RSS {rss_mib(os.getpid()):7.1f} MiB"
          f"  children {len(children)}: {sum(rss_mib(pid) for pid in children):7.1f} MiB  {_sizes(ev)}",
          flush=True)


def settle(ev: Any, limit_s: float = 300.0) -> None:
    """Wait until the evaluator's background work (its judges' start, baselines timed ahead) is done."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline and (ev._engine._busy or _sizes(ev).get("idle")):
        time.sleep(0.5)
    time.sleep(1.0)


def _sizes(ev: Any) -> dict[str, int]:
    """The engine's container sizes (an evalkit older than ``Engine.sizes``: the build futures it keeps)."""
    engine = ev._engine
    return engine.sizes if hasattr(engine, "sizes") else {"builds": len(engine.backend._builds)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-judge", type=int, default=100_000)
    parser.add_argument("--judged", type=int, default=40)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--every", type=int, default=10_000, help="print after this many no-judge answers")
    parser.add_argument("--cache", type=Path, help="the cache folder (default: a new one)")
    args = parser.parse_args()
    from evalkit import Evaluator

    cache = args.cache or Path(tempfile.mkdtemp(prefix="evalkit-memory-"))
    started = time.monotonic()
    with Evaluator(problems=FIXTURES / "judge_problems", device="cpu", cache_dir=cache, baselines="eager",
                   timing_trials=5, warmup=1, seed=3) as ev:
        settle(ev)  # the baselines of the problems it knows, timed in the background: not the answers' memory
        report("start", 0, started, ev)
        done = 0
        while done < args.no_judge:
            size = min(args.batch, args.no_judge - done)
            rows = list(ev.judge_many([("linear_relu", NO_JUDGE[n % 2]) for n in range(size)]))
            assert {row["verdict"] for row in rows} <= {"no_code", "syntax_error"}, {row["verdict"] for row in rows}
            done += size
            if done % args.every < size or done == args.no_judge:
                report("no-judge", done, started, ev)
        text = ANSWER.read_text()
        for n in range(args.judged):
            verdict = ev.judge("linear_relu", text)["verdict"]
            assert verdict == "correct", verdict
            if n in (0, 1) or (n + 1) % 10 == 0 or n + 1 == args.judged:
                report("judged", n + 1, started, ev)


if __name__ == "__main__":
    main()
