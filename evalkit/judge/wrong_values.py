"""Trusted side: where a wrong output is wrong, for the model's feedback: its worst elements (expected against got)
and, when one exists, the slice that holds its wrong elements and what it holds ("columns 8192-16383
(out[:, 8192:16384]) are all zero; every other element matches").

Runs in the judge's own process, on the judge's own copy of the output: ``tensor_check`` hands each chunk's wrong
elements to ``WrongValues.add`` as it compares, then asks ``where`` with the whole output. Nothing the worker says
reaches it. A hint, never part of a verdict.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from evalkit.row_parts import WorstElementRecord

WORST_SHOWN = 4  # the worst elements the feedback quotes; an output with no more wrong ones needs no slice named
MAX_RUNS = 3  # index ranges named one by one along a dimension
BINNED_SIZE = 1 << 16  # dimensions up to this long record which indices hold a wrong element, longer ones the range
VALUES_READ = 1 << 20  # elements read to say what a slice, or the wrong elements, hold
UNIFORM = 1e-3  # a difference (or ratio) this uniform, relative to its size, is "a constant"
FILLED = 0.5  # a part only partly wrong is named when at least this share of it is wrong, and at most this share
MOST = 0.9  # of the output; a part whose elements all hold one thing, when at most this share of the output


@dataclass
class _Dim:
    """Which indices along one dimension hold a wrong element: counted for a short dimension, a range for a long one."""

    size: int
    stride: int
    counts: torch.Tensor | None = None
    low: int = -1
    high: int = -1

    def add(self, flat: torch.Tensor) -> None:
        index = (flat // self.stride) % self.size
        if self.size <= BINNED_SIZE:
            counts = torch.bincount(index, minlength=self.size)
            self.counts = counts if self.counts is None else self.counts + counts
        low, high = (int(v) for v in torch.stack([index.min(), index.max()]).tolist())
        self.low, self.high = (low, high) if self.low < 0 else (min(self.low, low), max(self.high, high))

    def indices(self) -> list[int] | range:
        """Ascending; for a long dimension the range from the first to the last (a superset where it has gaps)."""
        if self.counts is not None:
            return self.counts.nonzero().reshape(-1).tolist()
        return range(self.low, self.high + 1)


@dataclass
class _Region:
    """A part of the output that holds every wrong element: its words, its elements (a view; None when no one slice
    selects it), how many elements it has, and whether its words name one row, column or index."""

    words: str
    cut: tuple[Any, ...] | None
    size: int
    singular: bool = False


@dataclass
class WrongValues:
    """What ``tensor_check`` learns of a wrong output's wrong elements, chunk by chunk (flat, row-major indices)."""

    shape: list[int]
    count: int = 0
    first: int = -1
    last: int = -1
    worst: list[tuple[float, int, float, float]] = field(default_factory=list)  # (score, flat index, expected, got)
    got: list[torch.Tensor] = field(default_factory=list)  # the first wrong elements' values, and the reference's
    expected: list[torch.Tensor] = field(default_factory=list)
    dims: list[_Dim] = field(default_factory=list)

    def __post_init__(self) -> None:
        strides = [math.prod(self.shape[d + 1:]) for d in range(len(self.shape))]
        self.dims = [_Dim(size, stride) for size, stride in zip(self.shape, strides)]

    def add(self, start: int, bad: torch.Tensor, actual: torch.Tensor, expected: torch.Tensor) -> None:
        """The chunk of flat elements from ``start`` (float64 ``actual`` and ``expected``), ``bad`` its wrong ones."""
        where = bad.nonzero().reshape(-1)
        if not where.numel():
            return
        got, want = actual[where], expected[where]
        flat = where + start
        self.first = int(flat[0]) if self.first < 0 else self.first
        self.last, self.count = int(flat[-1]), self.count + where.numel()
        for dim in self.dims:
            dim.add(flat)
        finite = torch.isfinite(got) & torch.isfinite(want)
        score = torch.where(finite, (got - want).abs(), math.inf)
        top = score.topk(min(WORST_SHOWN, where.numel())).indices
        picked = torch.stack([score[top], flat[top].to(torch.float64), want[top], got[top]]).T.tolist()
        self.worst = sorted(self.worst + [(s, int(i), e, g) for s, i, e, g in picked], key=lambda w: -w[0])[:WORST_SHOWN]
        room = VALUES_READ - sum(t.numel() for t in self.got)
        if room > 0:
            self.got.append(got[:room])
            self.expected.append(want[:room])

    def worst_elements(self) -> list[WorstElementRecord]:
        """The worst wrong elements, worst first: ``index`` in ``shape``, ``expected`` and ``got`` ("nan", "inf" as
        text)."""
        return [WorstElementRecord(index=unravel(index, self.shape), expected=_number(e), got=_number(g))
                for _, index, e, g in self.worst]

    def where(self, actual: torch.Tensor, expected: torch.Tensor) -> str:
        """The part of ``actual`` (the whole output, against ``expected``) that holds every wrong element and what it
        holds, or "" when none says more than the worst elements do: nothing or everything wrong (the whole output's
        pattern says more), a few elements, or wrong elements scattered."""
        n = math.prod(self.shape)
        if self.count <= WORST_SHOWN or self.count == n or not self.shape:
            return ""
        for region in self._regions(n):
            if region.size > MOST * n:
                continue
            filled, wrong = self.count / region.size, _what(torch.cat(self.got), torch.cat(self.expected))
            # what the whole part holds, the elements within the tolerance there included
            held = _what(*(_values(t, region.cut) for t in (actual, expected))) if region.cut is not None else ""
            held = held or (wrong if filled == 1 else "")
            verb = "is" if region.singular else "are"
            if held or filled == 1:
                return f"{region.words} {verb} {held or 'wrong'}; the rest matches the reference"
            if filled >= FILLED and region.size <= FILLED * n:
                return (f"every wrong element lies in {region.words}, of which {filled:.1%} are wrong"
                        + (f"; the wrong ones are {wrong}" if wrong else ""))
        return ""

    def _regions(self, n: int) -> list[_Region]:
        """The parts that hold every wrong element, tightest first: the product of the indices each dimension has
        them at (where each dimension's can be named), and the run of the output in memory order from the first
        to the last."""
        regions = []
        named = {d: (indices, text) for d, dim in enumerate(self.dims)
                 if len(indices := dim.indices()) < dim.size and (text := _along(len(self.shape), d, indices))}
        if named:
            size = math.prod(len(named[d][0]) if d in named else s for d, s in enumerate(self.shape))
            regions.append(_region(self.shape, named, size))
        span = self.last - self.first + 1
        if span < n:
            start, end = unravel(self.first, self.shape), unravel(self.last, self.shape)
            regions.append(_Region(f"the elements from index {start} to {end} (out.flatten()[{self.first}:"
                                   f"{self.last + 1}], {span / n:.0%} of the output)", ("flat", self.first, span), span))
        return sorted(regions, key=lambda r: r.size)


def _values(tensor: torch.Tensor, cut: tuple[Any, ...]) -> torch.Tensor:
    """At most ``VALUES_READ`` elements of ``tensor`` within ``cut`` (a flat run, or an index per dimension), float64."""
    if cut[0] == "flat":
        _, start, length = cut
        return tensor.reshape(-1)[start:start + min(length, VALUES_READ)].to(torch.float64)
    part = tensor[cut]
    rows = max(1, VALUES_READ // max(1, part[:1].numel()))  # a few leading rows: never the whole of a huge part
    return part[:rows].reshape(-1)[:VALUES_READ].to(torch.float64)


def _what(got: torch.Tensor, expected: torch.Tensor) -> str:
    """What ``got`` holds, when one thing describes it: "all zero", "all NaN", "all 7", "off by a constant 0.5",
    "scaled by a constant 2"; else ""."""
    if bool(torch.isnan(got).all()):
        return "all NaN"
    if bool(torch.isinf(got).all()):
        return "all infinite"
    if not bool((torch.isfinite(got) & torch.isfinite(expected)).all()) or got.numel() < 2:
        return ""
    if not bool(got.any()):
        return "all zero"
    if float(got.max()) == float(got.min()):
        return f"all {float(got[0]):.6g}"
    return constant_change(got, expected)


def constant_change(got: torch.Tensor, expected: torch.Tensor) -> str:
    """"off by a constant 0.5" or "scaled by a constant 2" when ``got`` (finite, float64) is ``expected`` changed so
    throughout, else ""."""
    difference = got - expected
    if float(difference.abs().max()) > 0 and float(difference.std()) <= UNIFORM * float(difference.abs().mean()):
        return f"off by a constant {float(difference.mean()):.4g}"
    nonzero = expected.abs() > 1e-12
    if int(nonzero.sum()) > 1:
        ratio = got[nonzero] / expected[nonzero]
        if float(ratio.std()) <= UNIFORM * abs(float(ratio.mean())) and abs(float(ratio.mean()) - 1) > UNIFORM:
            return f"scaled by a constant {float(ratio.mean()):.4g}"
    return ""


def _names(ndim: int, d: int) -> tuple[str, str]:
    """(plural, singular) for dimension ``d`` of ``ndim``: elements, or rows and columns, else "dim-d indices"."""
    if ndim == 1:
        return "elements", "element"
    return {ndim - 1: ("columns", "column"), ndim - 2: ("rows", "row")}.get(d, (f"dim-{d} indices", f"dim-{d} index"))


def _runs(indices: list[int] | range) -> list[tuple[int, int]]:
    """``indices`` (ascending) as runs of consecutive ones, (first, last) each."""
    if isinstance(indices, range):
        return [(indices[0], indices[-1])]
    runs: list[tuple[int, int]] = []
    for i in indices:
        if runs and i == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], i)
        else:
            runs.append((i, i))
    return runs


def _along(ndim: int, d: int, indices: list[int] | range) -> tuple[str, slice | int | None] | None:
    """Words for ``indices`` along dimension ``d`` ("columns 8192-16383") and what selects them (an index, a slice,
    or None when no one slice does); None when they are too scattered to name."""
    plural, singular = _names(ndim, d)
    runs = _runs(indices)
    if len(runs) == 1:
        low, high = runs[0]
        return (f"{singular} {low}", low) if low == high else (f"{plural} {low}-{high}", slice(low, high + 1))
    step = indices[1] - indices[0]
    steady = all(b - a == step for a, b in zip(indices, indices[1:]))
    cut = slice(indices[0], indices[-1] + 1, step) if steady else None
    if len(runs) <= MAX_RUNS:
        return f"{plural} " + ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs), cut
    if steady:
        return f"every {_ordinal(step)} {singular} from {indices[0]} to {indices[-1]}", cut
    return None


def _region(shape: list[int], named: dict[int, tuple[list[int] | range, tuple[str, Any]]], size: int) -> _Region:
    """The product of the named dimensions' indices: "columns 8192-16383 (out[:, 8192:16384])" when one slice
    selects it."""
    words = ", ".join(text for _, (text, _cut) in named.values())
    singular = len(named) == 1 and all(isinstance(cut, int) for _, (_t, cut) in named.values())
    if any(cut is None for _, (_t, cut) in named.values()):
        return _Region(words, None, size, singular)
    cut = tuple(named[d][1][1] if d in named else slice(None) for d in range(len(shape)))
    shown = [_shown(c) for c in cut]
    while len(shown) > 1 and shown[-1] == ":":
        shown.pop()
    return _Region(f"{words} (out[{', '.join(shown)}])", cut, size, singular)


def _shown(cut: slice | int) -> str:
    if isinstance(cut, int):
        return str(cut)
    text = f"{'' if cut.start is None else cut.start}:{'' if cut.stop is None else cut.stop}"
    return text + (f":{cut.step}" if cut.step not in (None, 1) else "")


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def _number(value: float) -> float | str:
    return value if math.isfinite(value) else str(value)


def unravel(flat_index: int, shape: list[int]) -> list[int]:
    """The index in ``shape`` of row-major position ``flat_index``."""
    index = []
    for size in reversed(shape):
        index.append(flat_index % size if size else 0)
        flat_index = flat_index // size if size else 0
    return list(reversed(index))
