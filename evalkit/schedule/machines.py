"""Trusted side: which machines a run uses: the device, its judges and cores (``placement``), and where
builds and judges run (``backend.LocalBackend`` on this machine, or a Ray cluster through ``ray_backend``)."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import torch

from evalkit.sandbox.identity import unprivileged_identity
from evalkit.sandbox.launcher import Limits
from evalkit.schedule.backend import Machines
from evalkit.schedule.options import JudgeOptions, ScoreError, default_limits
from evalkit.schedule.placement import Placement, PlacementError, plan


def resolve_device(device: str) -> str:
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ScoreError("--device cuda was asked for, but torch sees no CUDA GPU on this machine "
                           f"(torch {torch.__version__}); use --device cpu or auto")
    return device


def plan_judges(options: JudgeOptions, device: str) -> Placement:
    """The run's judges on this machine (one per GPU of ``--gpus``, or ``--judges`` CPU judges) and their cores."""
    visible = torch.cuda.device_count() if device == "cuda" else 0
    try:
        return plan(device, options.gpus, options.judges, sorted(os.sched_getaffinity(0)), visible)
    except PlacementError as err:
        raise ScoreError(str(err)) from None


def machines(options: JudgeOptions) -> Machines:
    """The machines ``options`` ask for; ``ScoreError`` when they cannot be had (no Ray, no such GPU)."""
    if options.backend == "ray":
        from evalkit.schedule.ray_backend import connect  # evalkit[ray]; imported only when asked for

        return connect(options)
    if options.ray_address:
        raise ScoreError(f"--ray-address {options.ray_address} applies to --backend ray only; add --backend ray "
                         f"to judge on that cluster, or drop --ray-address")
    device = resolve_device(options.device)
    return Machines(device, plan_judges(options, device))


# The sandbox user's probes that passed on this cache's machines (``identity.unprivileged_identity``).
IDENTITY_PROBES_FILE = "sandbox-identity.json"


def machines_and_limits(options: JudgeOptions) -> tuple[Machines, Limits]:
    """The machines of one run and its sandboxes' limits. The sandbox user's probe (it imports torch as that
    user: a second or two) runs while ``machines`` starts CUDA, where the cache does not remember it passed."""
    with ThreadPoolExecutor(1, thread_name_prefix="evalkit-identity") as pool:
        identity = pool.submit(unprivileged_identity, options.cache_dir / IDENTITY_PROBES_FILE)
        where = machines(options)
        return where, default_limits(where.device, options.memory_gib, identity=identity)
