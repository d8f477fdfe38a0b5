"""Facts about this machine that need no torch (no side of the trust boundary; stdlib only).

The report records them for the machine that wrote it; the judge adds torch, CUDA and GPU facts to
them (``evalkit.judge.environment``) and the scoring run writes those to the report folder's
``environment.json`` (``evalkit.results_file.ENVIRONMENT_FILE``), which the summary copies.
"""

from __future__ import annotations

import platform
from typing import Any

from evalkit.version import __version__


def report_host_facts() -> dict[str, Any]:
    """The evalkit version, Python version and platform of this process."""
    return {"evalkit_version": __version__, "python": platform.python_version(), "platform": platform.platform()}
