"""No side of the trust boundary (runs nothing, imports no torch): the progress display of ``evalkit score``.

Shown only where someone watches: a bar on stderr when stderr is a terminal. ``--progress`` forces it;
where stderr is not a terminal (a pipe, a log file) it is then one plain line per step, never ``\\r``
redraws. ``--no-progress`` and ``-q`` turn it off. Whatever is shown, each step is also logged at debug
level (``-v``).
"""

from __future__ import annotations

import logging
import sys
from collections import Counter
from contextlib import ExitStack
from typing import Any

import click

logger = logging.getLogger("evalkit.progress")


def display_mode(forced: bool | None, quiet: bool, terminal: bool | None = None) -> str:
    """``bar``, ``lines`` or ``off``: ``forced`` is ``--progress`` (True), ``--no-progress`` (False) or neither."""
    terminal = sys.stderr.isatty() if terminal is None else terminal
    if quiet or forced is False or (forced is None and not terminal):
        return "off"
    return "bar" if terminal else "lines"


class Progress:
    """The ``progress`` and ``total_hook`` callbacks of ``evalkit.schedule.local.score``; a context manager."""

    def __init__(self, mode: str) -> None:
        self.mode, self.total, self.done = mode, 0, 0
        self._bar: Any = None
        self._stack = ExitStack()

    def __enter__(self) -> "Progress":
        if self.mode == "bar":
            from tqdm import tqdm
            from tqdm.contrib.logging import logging_redirect_tqdm

            self._bar = tqdm(total=0, unit="sub", desc="evalkit", dynamic_ncols=True, file=sys.stderr)
            self._stack.enter_context(logging_redirect_tqdm())  # log lines print above the bar, not through it
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()
        if self._bar is not None:
            self._bar.close()

    def on_total(self, total: int) -> None:
        self.total = total
        logger.debug("%d submission(s) to judge", total)
        if self._bar is not None:
            self._bar.total = total
            self._bar.refresh()

    def on_progress(self, stage: str, counts: Counter) -> None:
        """``counts`` is non-empty when a submission's row was just written (its verdict is in ``stage``)."""
        if counts:
            self.done += 1
        if self.mode == "lines":
            click.echo(f"[{self.done}/{self.total}] {stage}", err=True)
        else:
            logger.debug("[%d/%d] %s", self.done, self.total, stage)
        if self._bar is not None:
            if counts:
                self._bar.update(1)
                self._bar.set_postfix_str(" ".join(f"{k}={v}" for k, v in sorted(counts.items())), refresh=False)
            self._bar.set_description_str(stage[:60])
