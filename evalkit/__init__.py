"""evalkit: judge LLM-written custom-kernel ModelNew submissions against KernelBench-style references.

``from evalkit import Evaluator`` is the Python API (``evalkit.schedule.evaluator``); it is imported on first use, so
``import evalkit`` stays light (the report side needs no torch).
"""

import warnings
from typing import Any

from evalkit.version import __version__

__all__ = ["Evaluator", "Problem", "__version__"]


def __getattr__(name: str) -> Any:
    if name == "Evaluator":
        # torch warns, at import and later, that NumPy (no dependency of evalkit) is missing: not the caller's
        # concern. Only that one message is silenced; catch_warnings would also undo the filters torch sets itself.
        warnings.filterwarnings("ignore", message="Failed to initialize NumPy", category=UserWarning)
        from evalkit.schedule.evaluator import Evaluator

        return Evaluator
    if name == "Problem":  # torch-free: a problem folder, or one given as text (``Problem.from_source``)
        from evalkit.sources.problems import Problem

        return Problem
    raise AttributeError(f"module 'evalkit' has no attribute {name!r}")
