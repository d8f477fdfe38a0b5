"""Trusted side: where a run's judges and builds go: N judges per GPU (one unless ``--judges`` says more), or N CPU
judges, each on cores of its own, and the builds on the cores left over.

Pure: it is given the GPUs and cores it may use and returns a plan; nothing here starts a process.
The cores are a start, not a wall (a sandbox may change its own affinity): while a judge times, the builds
are frozen (``evalkit.sandbox.freezer``) and every other judge's worker runs only inside its own calls.
"""

from __future__ import annotations

from dataclasses import dataclass

from evalkit.records import EvalkitError

JUDGE_CORES = 2  # the judge's own thread and its worker's
MIN_BUILD_CORES = 2  # keep at least this many for builds before pinning judges at all


class PlacementError(EvalkitError, ValueError):
    """A ``--gpus`` or ``--judges`` value that names no usable device; the message says what to give."""


@dataclass(frozen=True)
class JudgeSlot:
    """One judge: its device, the GPU it owns (an index among the GPUs this process sees), and its cores."""

    name: str  # "cuda:0" (the first judge of GPU 0), "cuda:0/1" (its second), "cpu:1": how rows and progress name it
    device: str  # "cuda" or "cpu"
    gpu: int | None
    cpus: tuple[int, ...]  # empty: not pinned
    gpu_judges: int = 1  # the judges sharing its GPU (their timings take turns: ``evalkit.sandbox.gpu_gate``)


@dataclass(frozen=True)
class Placement:
    slots: tuple[JudgeSlot, ...]
    build_cpus: tuple[int, ...]  # empty: not pinned


def parse_gpus(spec: str, visible: int) -> list[int]:
    """``--gpus``: "all", a count "N" (the first N), or a list "0,2" of indices among the ``visible`` GPUs ("1," is
    GPU 1 alone: a list of one)."""
    text = spec.strip().lower()
    if visible < 1:
        raise PlacementError(f"--gpus {spec}: torch sees no CUDA GPU on this machine; use --device cpu "
                             f"(with --judges N for several CPU judges)")
    if text == "all":
        return list(range(visible))
    if "," not in text and text.isdigit():
        count = int(text)
        if not 1 <= count <= visible:
            raise PlacementError(f"--gpus {spec}: this machine has {visible} GPU(s); give a count from 1 to "
                                 f"{visible}, a list of indices such as 0,1, or all")
        return list(range(count))
    try:
        chosen = [int(word) for word in text.split(",") if word.strip()]
    except ValueError:
        raise PlacementError(f"--gpus {spec}: give all, a count (2), or a comma-separated list of GPU indices "
                             f"(0,2)") from None
    wrong = [i for i in chosen if not 0 <= i < visible]
    if wrong or len(set(chosen)) != len(chosen):
        why = f"no GPU {wrong[0]}" if wrong else "an index is listed twice"
        raise PlacementError(f"--gpus {spec}: {why}; the GPUs this process sees are 0 to {visible - 1}")
    return chosen


def plan(device: str, gpus: str, judges: int, cpus: list[int], visible_gpus: int) -> Placement:
    """The judges of a run on ``device`` and the cores of everything, from the ``cpus`` this process may use: on
    CUDA, ``judges`` per GPU of ``gpus``."""
    if judges < 1:
        raise PlacementError(f"--judges {judges}: give at least one judge" + (" per GPU" if device == "cuda" else ""))
    if device == "cuda":
        devices = [("cuda", index) for index in parse_gpus(gpus, visible_gpus) for _ in range(judges)]
    else:
        if gpus.strip().lower() != "all":  # "all" is every GPU there is, none here; anything else names some
            raise PlacementError(f"--gpus {gpus}: asks for GPUs, but the judges run on the CPU (--device cpu, or "
                                 f"--device auto where torch sees no CUDA GPU: torch.cuda.is_available() is false); "
                                 f"leave --gpus out to judge on the CPU, or run where torch sees the GPUs")
        devices = [("cpu", None)] * judges
    cores = sorted(cpus)
    pinned = len(cores) - JUDGE_CORES * len(devices) >= MIN_BUILD_CORES
    slots = []
    for number, (kind, gpu) in enumerate(devices):
        own = tuple(cores[number * JUDGE_CORES:(number + 1) * JUDGE_CORES]) if pinned else ()
        if gpu is None:
            slots.append(JudgeSlot(f"{kind}:{number}", kind, None, own))
        else:
            nth = number % judges  # the GPU's judges are listed together
            slots.append(JudgeSlot(f"{kind}:{gpu}" + (f"/{nth}" if nth else ""), kind, gpu, own, judges))
    build_cpus = tuple(cores[JUDGE_CORES * len(devices):]) if pinned else ()
    return Placement(tuple(slots), build_cpus)


def visible_devices_entry(index: int, inherited: str | None) -> str:
    """What ``CUDA_VISIBLE_DEVICES`` a judge process of GPU ``index`` gets, given this process's own setting
    (GPU 1 of "3,5" is "5"; of an unset variable, "1")."""
    if inherited is None or not inherited.strip():
        return str(index)
    entries = [entry.strip() for entry in inherited.split(",") if entry.strip()]
    return entries[index] if index < len(entries) else str(index)


def host_device(slot: JudgeSlot, inherited: str | None) -> str | None:
    """How every evalkit process of the host names ``slot``'s GPU, given this process's ``CUDA_VISIBLE_DEVICES``
    (``inherited``): the judges of all of them take turns timing on it (``evalkit.sandbox.host_timing``). None for
    a CPU judge."""
    if slot.device != "cuda":
        return None
    return visible_devices_entry(slot.gpu or 0, inherited)
