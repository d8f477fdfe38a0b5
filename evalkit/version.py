"""evalkit's version (no side of the trust boundary; imports nothing): what every row, cache key and report names."""

__version__ = "0.4.0"
