"""evalkit: judge LLM-written custom-kernel ModelNew submissions against KernelBench-style references.

``from evalkit import Evaluator`` is the Python API (``evalkit.schedule.evaluator``); it is imported on first use, so
``import evalkit`` stays light (the report side needs no torch).
"""

from typing import Any

from evalkit.version import __version__

__all__ = ["Evaluator", "__version__"]


def __getattr__(name: str) -> Any:
    if name == "Evaluator":
        from evalkit.schedule.evaluator import Evaluator

        return Evaluator
    raise AttributeError(f"module 'evalkit' has no attribute {name!r}")
