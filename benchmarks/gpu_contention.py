"""What does a judge see of another process's GPU work? Prints a tiny probe's latency, idle and contended.

A GPU runs one process's context at a time (time slices, no MPS), so work an answer's worker leaves queued
after its reply delays whatever the judge times next. The judge tells by a probe of its own: one tiny kernel
on a one-element tensor and a synchronize of its own device, timed on its own clock. This script measures
that probe while the GPU is idle, and while a second process keeps it busy with kernels of a given length
(`torch.cuda._sleep`), and how long the probe takes to come back once that process has stopped launching
(SIGSTOP) with work still queued: the figures the judge's drain threshold (`evalkit/judge/timing.py`) rests on.

    python3 benchmarks/gpu_contention.py [--probes 200] [--kernel-us 20,200,2000,20000]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time

import torch


def probe_us(flag: torch.Tensor) -> float:
    start = time.perf_counter()
    flag.add_(1)
    torch.cuda.synchronize()
    return (time.perf_counter() - start) * 1e6


def cycles_per_us() -> float:
    torch.cuda._sleep(1000)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(10_000_000)
    end.record()
    end.synchronize()
    return 10_000_000 / (start.elapsed_time(end) * 1e3)


def busy(kernel_us: float, queued: int) -> None:
    """The second process: keeps ``queued`` kernels of ``kernel_us`` in flight until killed."""
    cycles = int(kernel_us * cycles_per_us())
    torch.cuda._sleep(cycles)
    torch.cuda.synchronize()
    print("ready", flush=True)
    while True:
        for _ in range(queued):
            torch.cuda._sleep(cycles)
        torch.cuda.synchronize()


def handoff(kernel_us: float, rounds: int) -> None:
    """The second process, in turns: on each byte from the judge, run one kernel of ``kernel_us`` (0: no GPU work,
    a bare echo) and synchronize, then answer with a byte."""
    cycles = int(kernel_us * cycles_per_us()) if kernel_us > 0 else 0
    torch.cuda.synchronize()
    print("ready", flush=True)
    for _ in range(rounds):
        sys.stdin.buffer.read(1)
        if kernel_us > 0:
            torch.cuda._sleep(cycles)
            torch.cuda.synchronize()
        sys.stdout.buffer.write(b"x")
        sys.stdout.buffer.flush()


def turns(flag: torch.Tensor, kernel_us: float, rounds: int) -> tuple[list[float], list[float]]:
    """The judge's side of ``handoff``: each turn's round trip and the probe right after it, in microseconds."""
    child = subprocess.Popen([sys.executable, __file__, "--handoff", str(kernel_us), str(rounds)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    child.stdout.readline()
    trips, probes = [], []
    for _ in range(rounds):
        start = time.perf_counter()
        child.stdin.write(b"x")
        child.stdin.flush()
        child.stdout.read(1)
        trips.append((time.perf_counter() - start) * 1e6)
        probes.append(probe_us(flag))
    child.wait()
    return trips, probes


def summary(samples: list[float]) -> str:
    ordered = sorted(samples)
    return (f"median {statistics.median(ordered):9.1f} us  p90 {ordered[int(0.9 * (len(ordered) - 1))]:9.1f}  "
            f"max {ordered[-1]:9.1f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--probes", type=int, default=200)
    parser.add_argument("--kernel-us", default="20,200,2000,20000")
    parser.add_argument("--busy", nargs=2, type=float, help=argparse.SUPPRESS)
    parser.add_argument("--handoff", nargs=2, type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.busy:
        busy(args.busy[0], int(args.busy[1]))
        return
    if args.handoff:
        handoff(args.handoff[0], int(args.handoff[1]))
        return
    flag = torch.zeros(1, device="cuda")
    for _ in range(20):
        probe_us(flag)
    print(f"idle                 {summary([probe_us(flag) for _ in range(args.probes)])}")
    for kernel_us in (0.0, 5.0, 1000.0):  # turns: the other process echoes, or runs a kernel then echoes
        trips, probes = turns(flag, kernel_us, args.probes)
        print(f"turns, {kernel_us:6.0f} us kernel  round trip {summary(trips)}  | probe after: {summary(probes)}")
    for kernel_us in (float(v) for v in args.kernel_us.split(",")):
        queued = max(2, int(20_000 / kernel_us))  # about 20 ms of work in flight
        child = subprocess.Popen([sys.executable, __file__, "--busy", str(kernel_us), str(queued)],
                                 stdout=subprocess.PIPE, text=True)
        child.stdout.readline()
        contended = [probe_us(flag) for _ in range(args.probes)]
        os.kill(child.pid, signal.SIGSTOP)  # it launches nothing more; what it queued still runs
        start = time.perf_counter()
        drain = []
        while len(drain) < 3 or drain[-1] > 50:
            drain.append(probe_us(flag))
        drained_ms = (time.perf_counter() - start) * 1e3
        child.kill()
        child.wait()
        print(f"busy, {kernel_us:7.0f} us kernels  {summary(contended)}  | after SIGSTOP: "
              f"{len(drain)} probes, {drained_ms:.1f} ms until a probe under 50 us (first {drain[0]:.0f} us)")


if __name__ == "__main__":
    main()
