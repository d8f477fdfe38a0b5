"""The error every problem-folder module raises (trusted side; reads problem folders / files; never runs
submission code)."""

from __future__ import annotations

from evalkit.records import EvalkitError


class ProblemError(EvalkitError):
    """A problem folder or file cannot be used; the message names it and says what to do."""
