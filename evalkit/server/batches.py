"""Trusted side: the batches ``evalkit serve`` holds for their pollers (``POST /v1/batch``, ``GET /v1/batch/ID``).

A batch keeps its answers only while they are judged; each row is kept as the JSON a poll sends, so what a batch
holds is counted in bytes. Finished batches are kept for their pollers within a bound, in count and in bytes
(``KeptBatches``): past it the oldest finished ones are forgotten first, though never one finished less than
``KEEP_AT_LEAST_S`` ago, so a server that judges for days holds a bounded amount of past results.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from evalkit.server.bodies import Item

MAX_BATCHES_KEPT = 1024  # finished batches kept for polling at most
KEPT_MIB = 64  # their rows' bytes at most (``--kept-mib``): a row is 1-10 KiB, so some 10,000 rows
KEEP_AT_LEAST_S = 300.0  # a finished batch's poller has this long to read it, whatever the bounds


@dataclass
class Batch:
    """One ``POST /v1/batch``: its items until they are all decided, then only its rows (as JSON)."""

    items: list[Item]
    problems: list[str]
    samples: list[str]  # the name each item is judged under: unique, whatever the client named its samples
    rows: list[bytes] = field(default_factory=list)
    decided: set[int] = field(default_factory=set)
    task: Any = None  # the asyncio task judging it
    finished_at: float | None = None  # ``time.monotonic()`` once its last row came
    size: int = 0

    def __post_init__(self) -> None:
        self.size = len(self.items)

    @property
    def done(self) -> bool:
        return len(self.rows) >= self.size

    @property
    def rows_bytes(self) -> int:
        return sum(len(row) for row in self.rows)

    def add(self, row: dict[str, Any], now: Callable[[], float] = time.monotonic) -> None:
        """A row of this batch, given back its item (the client's id, else its index) and the client's sample.
        Once the last row came, the batch lets go of its answers."""
        index = int(row["sample"].rsplit("-", 1)[1])  # named ``<batch>-<index>`` (``app.submit_batch``)
        item = self.items[index]
        row.update(item=item.id if item.id is not None else index, sample=item.sample or row["sample"])
        self.rows.append(json.dumps(row, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode())
        self.decided.add(index)
        if self.done:
            self.items, self.problems, self.samples, self.finished_at = [], [], [], now()

    def undecided(self) -> Iterator[tuple[int, Item]]:
        """The items without a row yet, with their index."""
        return ((index, item) for index, item in enumerate(self.items) if index not in self.decided)

    def poll_body(self) -> bytes:
        """``GET /v1/batch/ID``'s answer: ``{"done", "size", "rows"}``, the rows decided so far in their order."""
        return b'{"done":%s,"size":%d,"rows":[%s]}' % (b"true" if self.done else b"false", self.size,
                                                       b",".join(self.rows))


@dataclass
class KeptBatches:
    """The server's batches by id: every unfinished one, and finished ones within ``max_count`` and ``max_bytes``
    (each kept at least ``keep_at_least_s`` after it finished)."""

    max_bytes: int = KEPT_MIB * 2**20
    max_count: int = MAX_BATCHES_KEPT
    keep_at_least_s: float = KEEP_AT_LEAST_S
    now: Callable[[], float] = time.monotonic
    by_id: dict[str, Batch] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.by_id)

    def get(self, batch_id: str) -> Batch | None:
        return self.by_id.get(batch_id)

    def add(self, batch_id: str, batch: Batch) -> None:
        self.by_id[batch_id] = batch
        self.forget_old()

    def kept_bytes(self) -> int:
        """The rows' bytes every batch held holds."""
        return sum(batch.rows_bytes for batch in self.by_id.values())

    def forget_old(self) -> None:
        """Past either bound, the finished batches in the order they finished, each once old enough, until both
        bounds hold again (unfinished ones are never forgotten: their answers are being judged)."""
        finished = sorted((batch.finished_at, key) for key, batch in self.by_id.items()
                          if batch.finished_at is not None)
        count, held = len(self.by_id), self.kept_bytes()
        for finished_at, key in finished:
            if count <= self.max_count and held <= self.max_bytes:
                return
            if self.now() - finished_at < self.keep_at_least_s:
                return
            held -= self.by_id.pop(key).rows_bytes
            count -= 1
