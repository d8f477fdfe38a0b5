"""The command line: a thin client of the library (``evalkit --help``); ``evalkit.cli.main:main`` is the
console script."""
