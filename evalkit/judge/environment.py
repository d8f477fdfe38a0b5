"""Trusted side: facts about the machine a run was judged on, recorded in every summary."""

from __future__ import annotations

from typing import Any

import torch

from evalkit.host_facts import report_host_facts


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
    try:
        import subprocess

        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    except (OSError, subprocess.SubprocessError, IndexError):
        return None
