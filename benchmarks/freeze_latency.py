"""Benchmark (CPU or GPU host, as root or with a delegated cgroup): what stopping a worker sandbox costs the judge.

The judge freezes the answer's worker after every request and thaws it before the next (``UntrustedProcess.freeze``,
``thaw``), inside the timed span of each request, so both must be fast. This starts real sandboxed workers, idle as
the judge leaves them between requests (and, with ``--busy``, with a child that left the worker's process group and
spins), and times ``freeze()`` (which returns once every process of the sandbox is stopped) and ``thaw()``, ROUNDS
times per way of freezing this host offers:

- ``cgroup2`` / ``cgroup1``: the sandbox's cgroup freezer (v2 ``cgroup.freeze``, v1 ``freezer.state``);
- ``signals``: the fallback where no cgroup can be made (SIGSTOP to the group and to every process of the sandbox
  found in /proc, looked for until none is new, then waited for);
- ``killpg``: what the judge did before, for comparison: SIGSTOP to the worker's process group, not waited for (a
  child that left the group runs on), and ``killpg+wait``, the same waited for until the worker shows stopped.

It prints each one's median, 90th percentile and max in microseconds, and each median's ratio to ``killpg``'s.

    PYTHONPATH=. python benchmarks/freeze_latency.py [--rounds 300] [--busy]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Callable

BUSY_CHILD = """
import os
if os.fork() == 0:
    os.setpgid(0, 0)
    while True:
        pass
import torch
class ModelNew(torch.nn.Module):
    def forward(self):
        return torch.zeros(1)
"""
IDLE = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self):\n        return torch.zeros(1)\n"


def _worker(folder: Path, answer: str):
    from evalkit.sandbox.launcher import Limits, UntrustedProcess
    from evalkit.sandbox.protocol import Op, ReadyClaim, setup_request, simple_request

    limits = Limits(group=f"bench-freeze-{uuid.uuid4().hex[:8]}")
    folder.mkdir()
    (folder / "answer.py").write_text(answer)
    worker = UntrustedProcess(folder, limits)
    worker.send(setup_request("judge", str(folder / "answer.py"), "cpu", limits.to_dict(), init_inputs=[]))
    worker.send(simple_request(Op.LOAD))
    if not isinstance(worker.receive(120, "load"), ReadyClaim):
        raise SystemExit("the benchmark's worker did not load")
    return worker


def _killpg_pair(worker, wait: bool) -> tuple[Callable[[], object], Callable[[], object]]:
    from evalkit.sandbox.processes import until_stopped

    def freeze() -> None:
        os.killpg(worker.pid, signal.SIGSTOP)
        if wait:
            until_stopped([worker.pid], 5.0)
    return freeze, lambda: os.killpg(worker.pid, signal.SIGCONT)


def _time(freeze: Callable[[], object], thaw: Callable[[], object], rounds: int) -> tuple[list[float], list[float]]:
    frozen, thawed = [], []
    for _ in range(rounds):
        start = time.perf_counter()
        freeze()
        middle = time.perf_counter()
        thaw()
        frozen.append((middle - start) * 1e6)
        thawed.append((time.perf_counter() - middle) * 1e6)
        time.sleep(0.002)  # the worker's request, between a thaw and the next freeze
    return frozen, thawed


def _ways() -> list[str]:
    from evalkit.sandbox import cgroup

    kinds = [kind for kind, root in cgroup.FREEZER_ROOTS
             if (root / "cgroup.procs").exists() and os.access(root, os.W_OK)]
    return sorted(set(kinds), reverse=True) + ["signals", "killpg", "killpg+wait"]


def _measure(way: str, rounds: int, answer: str, scratch: Path) -> tuple[list[float], list[float]]:
    from evalkit.sandbox import cgroup, launcher

    roots, create = cgroup.FREEZER_ROOTS, launcher.SandboxCgroup.create
    if way in ("cgroup2", "cgroup1"):  # this way only, where the host has both
        cgroup.FREEZER_ROOTS = tuple(r for r in roots if r[0] == way)
    elif way == "signals":
        launcher.SandboxCgroup.create = classmethod(lambda cls, *args, **kwargs: None)  # type: ignore[assignment]
    try:
        worker = _worker(scratch / way, answer)
    finally:
        cgroup.FREEZER_ROOTS, launcher.SandboxCgroup.create = roots, create  # type: ignore[assignment]
    try:
        if way.startswith("cgroup") and worker.freezing != way:
            raise SystemExit(f"{way}: the sandbox got {worker.freezing}")
        pair = _killpg_pair(worker, way == "killpg+wait") if way.startswith("killpg") else (worker.freeze, worker.thaw)
        _time(*pair, min(rounds, 20))  # warm-up
        return _time(*pair, rounds)
    finally:
        worker.close()


def _figures(samples: list[float]) -> str:
    ordered = sorted(samples)
    return (f"median {statistics.median(ordered):7.0f}  p90 {ordered[int(0.9 * len(ordered))]:7.0f}  "
            f"max {ordered[-1]:7.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--busy", action="store_true", help="a child that left the worker's group spins beside it")
    args = parser.parse_args()
    worker = "with a spinning child" if args.busy else "idle"
    print(f"load {os.getloadavg()[0]:.2f}, {os.cpu_count()} cores; worker {worker}; {args.rounds} rounds; microseconds")
    results = {}
    with tempfile.TemporaryDirectory(prefix="evalkit-bench-freeze-") as scratch:
        for way in _ways():
            results[way] = _measure(way, args.rounds, BUSY_CHILD if args.busy else IDLE, Path(scratch))
    base = statistics.median(results["killpg"][0]) + statistics.median(results["killpg"][1])
    for way, (frozen, thawed) in results.items():
        pair = statistics.median(frozen) + statistics.median(thawed)
        print(f"{way:12s} freeze {_figures(frozen)} | thaw {_figures(thawed)} | "
              f"freeze+thaw {pair / base:5.1f}x killpg's")


if __name__ == "__main__":
    main()
