"""Trusted side: the workers a device judge keeps started ahead (``evalkit.sandbox.spare``): the answers' own, the
profilers' (CUDA), and the sandboxed references' (problems given as text), and how many of each.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from evalkit.judge.builder import builds_root, extension_env
from evalkit.judge.torch_headers import header_env
from evalkit.sandbox.launcher import Limits
from evalkit.sandbox.programs import REFERENCE_WORKER
from evalkit.sandbox.protocol import PRELOAD_CUDA_VARIABLE, PRELOAD_PROFILER_VARIABLE
from evalkit.sandbox.spare import SpareWorker

# Workers a judge keeps started ahead. A GPU judge's worker takes 1.5-2 s to start (torch, CUDA, cuDNN,
# cuBLAS), paused whenever the judge measures: on the H200 a single spare was still starting for one answer in
# six, mostly when built answers queued up at a corpus's end. A CPU judge's start is cheaper, and CI has 2 cores.
# Each passing answer takes one for itself and, at a switch of problems, one for its live baseline, and one
# profiler's worker (below): 3 spares with 4 profilers took a warm RL step on the H200 from 60-65 s to 49-54 s, and
# a fourth spare gained nothing (docs/gpu-runs/2026-11-30-spare-pools-h200).
SPARE_WORKERS = {"cuda": 3}
# Workers that started the profiler ahead, for passing answers only (CUDA): with 2, 3-5 of a warm RL step's 11
# passing answers waited 1-3 s for one (their profile 0.45-0.75 s otherwise); with 4 (and 3 spares), none did.
# More profilers with 2 spares only moved the wait to the spares
# (docs/gpu-runs/2026-11-27-final-tree-rescore-first-answer-h200).
PROFILING_WORKERS = 4

# Workers started ahead for the references of problems given as text, once one came: an RL step's problems all come
# as text, and a problem's load started its reference's worker on the judge's critical path (on the H200, loading a
# problem again was a fifth of a warm step's judging: benchmarks/judge_samples.py).
REFERENCE_SPARES = 1


@dataclass
class WorkerPools:
    """A device judge's pools of workers started ahead; ``profilers`` None off CUDA."""

    spare: SpareWorker
    profilers: SpareWorker | None
    references: SpareWorker

    @classmethod
    def start(cls, limits: Limits, device: str, cache_dir: Path, start_cpus: tuple[int, ...] | None) -> "WorkerPools":
        """The pools of a judge on ``device`` whose workers have ``limits`` and start on ``start_cpus`` (None: on
        their own cores), building into ``cache_dir``: the answers' and the profilers' starting now."""
        cuda_started = {PRELOAD_CUDA_VARIABLE: "1"} if device == "cuda" else {}  # in every worker started ahead
        env = {**extension_env(device), **header_env(builds_root(cache_dir), device), **pinned_threads(limits),
               **cuda_started}
        spare = SpareWorker(limits, env, count=SPARE_WORKERS.get(device, 1), start_cpus=start_cpus)
        spare.fill()  # a judge starts for an answer on its way (or ahead of one): its worker starts now
        # On CUDA a passing answer's kernels are profiled in a worker of their own (``evalkit.judge.kernel_profile``).
        # They start with the judge, after its spares: started for the first passing answer instead, their start was
        # that answer's, on the judge's critical path, on every GPU (3-5 s on a quiet H200; a corpus's passing
        # answers spent 14.7 s each in the profile stage beside its builds on a 4-GPU host: docs/judge.md). Starting
        # beside the first spare did not slow it (docs/gpu-runs/2026-11-27-settle-ab-corpus-rescore-h200/).
        # Never timed, they stay on the cores they start on.
        profilers = SpareWorker(replace(limits, cpus=start_cpus or limits.cpus),
                                {**env, PRELOAD_PROFILER_VARIABLE: "1"},
                                count=PROFILING_WORKERS) if device == "cuda" else None
        if profilers is not None:
            profilers.fill()
        # The workers of untrusted references (problems given as text: ``sandboxed_reference``), by a thread of their
        # own (they die with the thread that started them): none ahead until a problem comes as text, then
        # ``REFERENCE_SPARES``, CUDA started in them as in the answers' (``DeviceJudge._reference``).
        references = SpareWorker(limits, {**pinned_threads(limits), **cuda_started}, count=0, program=REFERENCE_WORKER)
        return cls(spare, profilers, references)


def pinned_threads(limits: Limits) -> dict[str, str]:
    """A worker pinned to a few cores runs as many CPU threads as it has cores, not one per core of the host."""
    return {"OMP_NUM_THREADS": str(len(limits.cpus))} if limits.cpus else {}
