"""evalkit: judge LLM-written custom-kernel ModelNew submissions against KernelBench-style references."""

__version__ = "0.2.0"
