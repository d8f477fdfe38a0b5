"""Trusted side: facts about the machine a run was judged on, recorded in every summary."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import torch

from evalkit.host_facts import report_host_facts

MODULE_VERSION_FILE = Path("/sys/module/nvidia/version")
DRIVER_VERSION_FILE = Path("/proc/driver/nvidia/version")
_VERSION = re.compile(r"\d+\.\d+(?:\.\d+)?")
_PROC_DRIVER = re.compile(r"Kernel Module\b[^\n]*?\s(\d+\.\d+(?:\.\d+)?)\s")


def environment() -> dict[str, Any]:
    """This machine's facts as the judge sees them: evalkit, Python, platform, torch, CUDA, GPU, driver."""
    cuda = torch.cuda.is_available()
    return {
        **report_host_facts(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if cuda else None,
        "gpu": torch.cuda.get_device_name() if cuda else None,
        "gpu_capability": ".".join(map(str, torch.cuda.get_device_capability())) if cuda else None,
        "driver": _driver_version() if cuda else None,
    }


def _driver_version() -> str | None:
    """The NVIDIA driver's version: from the kernel module's own files (instant; NVIDIA's advice is
    ``/sys/module/nvidia/version``), else from nvidia-smi (which can take seconds to start)."""
    for path, parse in ((MODULE_VERSION_FILE, _bare_version), (DRIVER_VERSION_FILE, driver_from_proc)):
        try:
            found = parse(path.read_text())
        except OSError:
            continue
        if found:
            return found
    return _driver_from_nvidia_smi()


def _bare_version(text: str) -> str | None:
    return text.strip() if _VERSION.fullmatch(text.strip()) else None


def driver_from_proc(text: str) -> str | None:
    """The version in ``/proc/driver/nvidia/version`` ("NVRM version: NVIDIA UNIX ... Kernel Module  580.159.04 ...")."""
    match = _PROC_DRIVER.search(text)
    return match.group(1) if match else None


def _driver_from_nvidia_smi() -> str | None:
    try:
        import subprocess

        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    except (OSError, subprocess.SubprocessError, IndexError):
        return None
