"""What `evalkit serve` keeps of its batches: a batch lets go of its answers once decided, and finished batches are
kept within a bound in bytes and in count, the oldest finished forgotten first, never an unfinished one nor one that
finished less than a poller's grace ago. No server is started: the records alone."""

from __future__ import annotations

import json

from evalkit.server.batches import Batch, KeptBatches
from evalkit.server.bodies import Item


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _batch(name: str, size: int = 2) -> Batch:
    items = [Item(answer="x" * 5000, reference_code="ref", id=f"{name}{n}" if n else None) for n in range(size)]
    return Batch(items, ["p"] * size, [f"{name}-{n}" for n in range(size)])


def _decide(batch: Batch, clock: Clock, note: str = "") -> None:
    for index, _ in list(batch.undecided()):
        batch.add({"sample": batch.samples[index], "verdict": "correct", "feedback": note}, now=clock)


def _finish(kept: KeptBatches, clock: Clock, names: str, every_s: float, note: str = "") -> None:
    """A batch of two answers for each of ``names``, held by ``kept`` and decided, ``every_s`` apart."""
    for name in names:
        batch = _batch(name)
        kept.add(name, batch)
        _decide(batch, clock, note)
        clock.now += every_s


def test_a_decided_batch_keeps_its_rows_as_a_poll_sends_them_and_lets_go_of_its_answers() -> None:
    clock, batch = Clock(), _batch("b", size=3)
    batch.add({"sample": "b-2", "verdict": "incorrect", "feedback": "ünïcode"}, now=clock)
    assert json.loads(batch.poll_body()) == {"done": False, "size": 3, "rows": [
        {"sample": "b-2", "verdict": "incorrect", "feedback": "ünïcode", "item": "b2"}]}
    _decide(batch, clock)
    polled = json.loads(batch.poll_body())
    assert polled["done"] and polled["size"] == 3
    assert [row["item"] for row in polled["rows"]] == ["b2", 0, "b1"]  # the order decided; no id: the index
    assert batch.items == [] and batch.finished_at == clock.now and batch.rows_bytes < 400  # no answer text kept


def test_finished_batches_past_the_byte_bound_are_forgotten_oldest_first_after_their_grace() -> None:
    clock = Clock()
    kept = KeptBatches(max_bytes=3000, keep_at_least_s=300, now=clock)
    _finish(kept, clock, "abc", every_s=100, note="n" * 600)  # each two rows of some 650 bytes
    running = _batch("r")
    kept.add("r", running)  # 3 finished batches, ~3,900 bytes: over the bound, but "a" finished 300 s ago only now
    assert [key for key in ("a", "b", "c", "r") if kept.get(key)] == ["b", "c", "r"]
    assert kept.kept_bytes() <= 3000
    clock.now += 1000
    kept.max_bytes = 0
    kept.forget_old()
    assert kept.get("r") is running and len(kept) == 1  # unfinished: its answers are being judged


def test_a_finished_batch_is_kept_for_its_grace_even_past_both_bounds() -> None:
    clock = Clock()
    kept = KeptBatches(max_bytes=0, max_count=1, keep_at_least_s=300, now=clock)
    _finish(kept, clock, "ab", every_s=0)
    kept.forget_old()
    assert len(kept) == 2  # both just finished: a poller may not have read them yet
    clock.now += 301
    kept.max_bytes = 10**6
    kept.forget_old()
    assert len(kept) == 1 and kept.get("b") is not None and kept.get("a") is None  # count bound; "a" was first


def test_the_count_bound_alone_forgets_the_oldest_finished() -> None:
    clock = Clock()
    kept = KeptBatches(max_count=2, keep_at_least_s=0, now=clock)
    _finish(kept, clock, "abc", every_s=1)
    kept.forget_old()
    assert [key for key in ("a", "b", "c") if kept.get(key)] == ["b", "c"]


def test_serve_refuses_a_negative_kept_mib_before_anything_starts() -> None:
    from click.testing import CliRunner

    from evalkit.cli.main import main

    result = CliRunner().invoke(main, ["serve", "--kept-mib", "-1"])
    assert result.exit_code == 2 and "--kept-mib" in result.output, result.output
    assert "--kept-mib" in CliRunner().invoke(main, ["serve", "--help"]).output
