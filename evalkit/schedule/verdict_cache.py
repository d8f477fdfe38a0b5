"""Trusted side: rows of answers already judged by one ``Evaluator``, for an RL loop that sends the same text to the
same problem again (``reuse_verdicts=True``): the row judged first, timing included, under the new sample's name.

Keyed by the problem's content (reference and problem.toml: its settings) and the answer's exact text; the
evaluator's own settings are the same for every call. Only rows the judge decided are kept, never a failure of
evalkit's own; at most ``MAX_ROWS``, the least recently used going first.
"""

from __future__ import annotations

import copy
import threading
from collections import OrderedDict

from evalkit.records import ResultRow, Submission, sha256_text

MAX_ROWS = 20_000
REUSED = "reused the row of an identical answer to this problem judged earlier (reuse_verdicts=True): sample {}"


class VerdictCache:
    def __init__(self, max_rows: int = MAX_ROWS) -> None:
        self._rows: OrderedDict[tuple[str, str], ResultRow] = OrderedDict()
        self._max_rows = max_rows
        self._lock = threading.Lock()

    def get(self, problem_sha256: str, submission: Submission) -> ResultRow | None:
        """A copy of the row kept for this answer, named as ``submission``; None when there is none."""
        with self._lock:
            kept = self._rows.get((problem_sha256, sha256_text(submission.text)))
            if kept is None:
                return None
            self._rows.move_to_end((problem_sha256, sha256_text(submission.text)))
        row = copy.deepcopy(kept)
        row.warnings = [*row.warnings, REUSED.format(kept.sample)]
        row.run, row.sample, row.path = submission.run, submission.sample, submission.path
        return row

    def put(self, problem_sha256: str, text: str, row: ResultRow) -> None:
        if row.error and row.error.get("kind") in ("judge_failed", "caller_error"):
            return  # evalkit's own failure, or the caller's: the next call judges it afresh
        with self._lock:
            self._rows[(problem_sha256, sha256_text(text))] = copy.deepcopy(row)
            self._rows.move_to_end((problem_sha256, sha256_text(text)))
            while len(self._rows) > self._max_rows:
                self._rows.popitem(last=False)
