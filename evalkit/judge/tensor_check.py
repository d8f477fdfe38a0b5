"""Trusted side: pure comparison of a candidate output against the high-precision reference.

Runs only in the trusted judge. Works in chunks so an 8.6 GB output does not need
another 17 GB of temporaries; on CUDA a large output that passes is compared in one pass (``fused_check``), and
only one that does not takes the chunks. ``compare_sampled`` checks a secret random sample of a large output.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from evalkit.judge.fused_check import passing_figures
from evalkit.judge.wrong_values import WrongValues, constant_change, unravel
from evalkit.row_parts import CorrectnessRecord, WorstElementRecord

CHUNK_ELEMENTS = 1 << 25
# A timed call that skips a share f of its work leaves about that share of its elements wrong, and passes a check
# of this many random positions with probability (1 - f) ** SAMPLED_ELEMENTS: under 3e-5 for f = 1e-5, while
# skipping less than that saves nothing measurable.
SAMPLED_ELEMENTS = 1 << 20


@dataclass
class Comparison:
    """Errors of ``actual`` against ``expected`` under ``|a - e| <= atol + rtol * |e|``."""

    ok: bool
    reason: str
    shape: list[int] = field(default_factory=list)
    expected_shape: list[int] = field(default_factory=list)
    dtype: str = ""
    expected_dtype: str = ""
    n_elements: int = 0
    bad_count: int = 0
    bad_fraction: float = 0.0
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
    rel_l2_err: float = 0.0
    first_bad_index: list[int] | None = None
    unexpected_nonfinite: int = 0
    mean_abs_err: float | None = None  # over at most ``HINT_ELEMENTS`` elements, when outside the tolerance
    pattern: str = ""  # what the error looks like when it is clear (``error_pattern``), for the model's feedback
    worst: list[WorstElementRecord] = field(default_factory=list)  # the worst wrong elements (``wrong_values``)

    def to_record(self) -> CorrectnessRecord:
        """The comparison as a failing row's ``correctness`` record holds it (its figures as they are: a row is
        made JSON-safe, NaN and Inf null, where it is written: ``records.ResultRow.to_dict``)."""
        return CorrectnessRecord(
            ok=self.ok, reason=self.reason, shape=list(self.shape), expected_shape=list(self.expected_shape),
            dtype=self.dtype, expected_dtype=self.expected_dtype, n_elements=self.n_elements,
            bad_count=self.bad_count, bad_fraction=self.bad_fraction, max_abs_err=self.max_abs_err,
            max_rel_err=self.max_rel_err, rel_l2_err=self.rel_l2_err,
            first_bad_index=list(self.first_bad_index) if self.first_bad_index is not None else None,
            unexpected_nonfinite=self.unexpected_nonfinite, mean_abs_err=self.mean_abs_err, pattern=self.pattern,
            worst=[element.copy() for element in self.worst])


def _shape_problem(actual: torch.Tensor, expected: torch.Tensor, expected_dtype: torch.dtype) -> str:
    if tuple(actual.shape) != tuple(expected.shape):
        return f"shape mismatch: got {list(actual.shape)}, expected {list(expected.shape)}"
    if actual.dtype != expected_dtype:
        return f"dtype mismatch: got {actual.dtype}, expected {expected_dtype}"
    return ""


def compare_outputs(
    actual: torch.Tensor,
    expected: torch.Tensor,
    *,
    atol: float,
    rtol: float,
    expected_dtype: torch.dtype | None = None,
    localize: bool = True,
) -> Comparison:
    """Compare two tensors elementwise; ``expected`` may be float64 while ``actual`` is float32.

    A NaN or Inf in ``actual`` where ``expected`` is finite counts as bad; matching
    non-finite values (same NaN/Inf position and sign) count as equal. When some are bad, the comparison holds
    hints for the model: the worst elements and, ``localize`` (the tensors are whole outputs, not samples), the
    slice that holds them (``wrong_values``).
    """
    expected_dtype = expected_dtype or expected.dtype
    base = Comparison(
        ok=False,
        reason="",
        shape=list(actual.shape),
        expected_shape=list(expected.shape),
        dtype=str(actual.dtype).replace("torch.", ""),
        expected_dtype=str(expected_dtype).replace("torch.", ""),
        n_elements=expected.numel(),
    )
    problem = _shape_problem(actual, expected, expected_dtype)
    if problem:
        base.reason = problem
        return base
    wrong = WrongValues(list(expected.shape))
    _accumulate(base, actual.reshape(-1), expected.reshape(-1), atol, rtol, wrong)
    if base.first_bad_index:
        base.first_bad_index = unravel(base.first_bad_index[0], list(expected.shape))
    if base.bad_count:
        base.mean_abs_err, base.pattern = error_pattern(actual, expected)
        base.pattern = (wrong.where(actual, expected) if localize else "") or base.pattern
        base.worst = wrong.worst_elements()
    return _concluded(base, atol, rtol)


HINT_ELEMENTS = 1 << 20  # what the hint reads of a wrong output: a pattern shows in any part of it


def error_pattern(actual: torch.Tensor, expected: torch.Tensor) -> tuple[float | None, str]:
    """The mean absolute difference over the first ``HINT_ELEMENTS`` elements, and what the error looks like when
    one pattern is clear: NaN where the reference has none, all zeros, off by a constant, scaled by a constant,
    or the last two dimensions transposed; "" otherwise. A hint for the model, never part of the verdict."""
    a = actual.detach().reshape(-1)[:HINT_ELEMENTS].to(torch.float64)
    e = expected.detach().reshape(-1)[:HINT_ELEMENTS].to(torch.float64)
    finite = torch.isfinite(a) & torch.isfinite(e)
    mean = float((a[finite] - e[finite]).abs().mean()) if bool(finite.any()) else None
    if bool(torch.isnan(a).any()) and not bool(torch.isnan(e).any()):
        return mean, "NaN where the reference has none"
    if not bool(finite.all()) or a.numel() < 2:
        return mean, ""
    if not bool(a.any()) and bool(e.any()):
        return mean, "all zeros"
    change = constant_change(a, e)
    if change:
        return mean, change
    if _transposed(actual, expected):
        return mean, "the last two dimensions transposed"
    return mean, ""


def _transposed(actual: torch.Tensor, expected: torch.Tensor) -> bool:
    if actual.dim() < 2 or actual.shape[-1] != actual.shape[-2] or actual.numel() > HINT_ELEMENTS:
        return False
    swapped = actual.detach().transpose(-1, -2).to(torch.float64)
    return bool(torch.allclose(swapped, expected.detach().to(torch.float64), rtol=1e-4, atol=1e-6))


def _concluded(base: Comparison, atol: float, rtol: float, which: str = "elements",
               bad_index: str = "first") -> Comparison:
    """``base`` with its verdict and reason, once its figures are in."""
    if base.bad_count:
        base.reason = (
            f"{base.bad_count} of {base.n_elements} {which} ({base.bad_fraction:.3%}) outside atol={atol:g} "
            f"rtol={rtol:g}; max abs err {base.max_abs_err:.3g}, {bad_index} bad index {base.first_bad_index}"
        )
        if base.unexpected_nonfinite:
            base.reason += f"; {base.unexpected_nonfinite} NaN/Inf where the reference is finite"
        return base
    base.ok = True
    base.reason = f"within atol={atol:g} rtol={rtol:g} (max abs err {base.max_abs_err:.3g})"
    return base


def sample_positions(numel: int, seed: int, device: str | torch.device) -> torch.Tensor | None:
    """``SAMPLED_ELEMENTS`` flat positions drawn uniformly from ``seed``, or None when the tensor has no more
    elements than that (it is then compared, or taken by the judge, whole)."""
    if numel <= SAMPLED_ELEMENTS:
        return None
    generator = torch.Generator(device=device)
    generator.manual_seed(seed)
    return torch.randint(numel, (SAMPLED_ELEMENTS,), generator=generator, device=device)


def compare_sampled(actual: torch.Tensor, expected: torch.Tensor, *, atol: float, rtol: float, seed: int,
                    expected_dtype: torch.dtype | None = None) -> Comparison:
    """``compare_outputs`` on ``SAMPLED_ELEMENTS`` positions drawn uniformly from ``seed``, or on every position
    when there are no more. Its counts and errors are the sample's; a bad index is the full tensor's. For the
    judge's checks of timed calls, with a secret seed: nothing the worker saw predicts the positions. The same as
    ``take_sample`` now and ``compare_taken`` later, which a check of a timed call does."""
    expected_dtype = expected_dtype or expected.dtype
    if _shape_problem(actual, expected, expected_dtype):
        return compare_outputs(actual, expected, atol=atol, rtol=rtol, expected_dtype=expected_dtype)
    return compare_taken(take_sample(actual, seed), expected, atol=atol, rtol=rtol, expected_dtype=expected_dtype)


Taken = tuple[torch.Tensor, torch.Tensor | None]  # an output's values at the positions drawn, and the positions


def take_sample(actual: torch.Tensor, seed: int) -> Taken:
    """What a sampled check keeps of ``actual``: its elements at the positions drawn from ``seed``, or a copy of
    all of it when it has no more than ``SAMPLED_ELEMENTS``; with the positions (None for all)."""
    positions = sample_positions(actual.numel(), seed, actual.device)
    return (actual.clone() if positions is None else values_at(actual, positions)), positions


def compare_taken(taken: Taken, expected: torch.Tensor, *, atol: float, rtol: float,
                  expected_dtype: torch.dtype | None = None) -> Comparison:
    """An output's values kept by ``take_sample`` against ``expected``, the output of the same inputs."""
    values, positions = taken
    if positions is None:
        return compare_outputs(values, expected, atol=atol, rtol=rtol, expected_dtype=expected_dtype)
    return compare_at(values, expected, positions, atol=atol, rtol=rtol, expected_dtype=expected_dtype,
                      actual_dtype=values.dtype)


def values_at(tensor: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """``tensor``'s elements at the flat ``positions`` (row-major), gathered without copying the whole of a
    tensor that is not contiguous (an output in a worker's memory may have any strides)."""
    if tensor.is_contiguous():
        return tensor.reshape(-1)[positions]
    return tensor[torch.unravel_index(positions, tensor.shape)]


def compare_at(values: torch.Tensor, expected: torch.Tensor, positions: torch.Tensor, *, atol: float, rtol: float,
               expected_dtype: torch.dtype | None = None, actual_dtype: torch.dtype | None = None) -> Comparison:
    """``values``, an output's elements at the flat ``positions`` (gathered by the judge), against ``expected``
    there: the figures are the sample's, a bad index is the full tensor's."""
    expected_dtype = expected_dtype or expected.dtype
    result = compare_outputs(values, expected.reshape(-1)[positions], atol=atol, rtol=rtol,
                             expected_dtype=expected_dtype, localize=False)
    shape = result.shape = result.expected_shape = list(expected.shape)
    result.dtype = str(actual_dtype or values.dtype).replace("torch.", "")
    if result.first_bad_index is not None:
        result.first_bad_index = unravel(int(positions[result.first_bad_index[0]]), shape)
    result.worst = [WorstElementRecord(index=unravel(int(positions[w["index"][0]]), shape), expected=w["expected"],
                                       got=w["got"]) for w in result.worst]
    return _concluded(result, atol, rtol, which="sampled elements", bad_index="a")


def _accumulate(result: Comparison, actual: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float,
                wrong: WrongValues) -> None:
    """Chunk by chunk, with the chunk's figures gathered into one tensor and read back at once: a read back per
    figure made comparing an 8.6 GB output take 0.4 s on the H200, a hundred times its memory traffic. Each chunk's
    wrong elements go to ``wrong``."""
    n = expected.numel()
    whole = passing_figures(actual, expected, atol, rtol)  # one pass on CUDA, for an output that passes
    if whole is not None:
        _, _, result.max_abs_err, result.max_rel_err, sq_err, sq_ref = whole
        result.rel_l2_err = _relative_l2(sq_err, sq_ref)
        return
    sq_err, sq_ref = 0.0, 0.0
    for start in range(0, n, CHUNK_ELEMENTS):
        a = actual[start : start + CHUNK_ELEMENTS].to(torch.float64)
        e = expected[start : start + CHUNK_ELEMENTS].to(torch.float64)
        bad = None
        figures = _passing_chunk(a, e, atol, rtol)
        if figures is None:  # a value outside the tolerance or not finite: every figure, the long way
            figures, bad = _any_chunk(a, e, atol, rtol)
        count, nonfinite, max_abs, max_rel, chunk_sq_err, chunk_sq_ref = figures
        if count and bad is not None:
            wrong.add(start, bad, a, e)
            if result.first_bad_index is None:
                result.first_bad_index = [wrong.first]
        result.bad_count += int(count)
        result.unexpected_nonfinite += int(nonfinite)
        result.max_abs_err = max(result.max_abs_err, max_abs)
        result.max_rel_err = max(result.max_rel_err, max_rel)
        sq_err += chunk_sq_err
        sq_ref += chunk_sq_ref
    result.bad_fraction = result.bad_count / n if n else 0.0
    result.rel_l2_err = _relative_l2(sq_err, sq_ref)


def _relative_l2(sq_err: float, sq_ref: float) -> float:
    """``||a - e|| / ||e||`` from the two square sums (0 for two zero tensors, inf for an error on a zero one)."""
    return (sq_err / sq_ref) ** 0.5 if sq_ref > 0 else (0.0 if sq_err == 0 else float("inf"))


def _passing_chunk(a: torch.Tensor, e: torch.Tensor, atol: float, rtol: float) -> list[float] | None:
    """The figures of a chunk whose values are all finite and within the tolerance (an answer's usual case), in
    under half the memory passes of ``_any_chunk``; None for any other chunk. A NaN or Inf in either tensor
    makes the largest difference or the reference's square sum non-finite, which sends the chunk the long way."""
    diff = (a - e).abs_()
    magnitude = e.abs()
    worst_excess = torch.add(diff, magnitude, alpha=-rtol).max()  # within: |a - e| - rtol * |e| <= atol
    relative = diff / magnitude.masked_fill_(magnitude <= atol, math.inf)  # 0 where |e| is within atol
    max_abs, excess, max_rel, chunk_sq_err, chunk_sq_ref = torch.stack(
        [diff.max(), worst_excess, relative.max(), torch.dot(diff, diff), torch.dot(e, e)]).tolist()
    if not (math.isfinite(max_abs) and math.isfinite(chunk_sq_ref) and excess <= atol):
        return None
    return [0.0, 0.0, max_abs, max_rel, chunk_sq_err, chunk_sq_ref]


def _any_chunk(a: torch.Tensor, e: torch.Tensor, atol: float, rtol: float) -> tuple[list[float], torch.Tensor]:
    """Bad and unexpectedly non-finite counts, largest absolute and relative errors, square sums of the error
    and of the reference, for a chunk with any values at all; and which elements are bad."""
    bad, diff, magnitude, both_finite = _bad_elements(a, e, atol, rtol)
    e_finite = torch.isfinite(e)
    significant = both_finite & (magnitude > atol)
    relative = torch.where(significant, diff / magnitude.clamp_min(atol), 0.0)
    reference_sq = torch.where(e_finite, e * e, 0.0)
    figures = torch.stack([bad.sum().to(torch.float64), (e_finite & ~torch.isfinite(a)).sum().to(torch.float64),
                           diff.max(), relative.max(), (diff * diff).sum(), reference_sq.sum()]).tolist()
    return figures, bad


def _bad_elements(a: torch.Tensor, e: torch.Tensor, atol: float,
                  rtol: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Which elements fail ``|a - e| <= atol + rtol * |e|`` (matching NaN or Inf pass), with the differences
    (0 where either is not finite), ``|e|`` and where both are finite."""
    a_finite, e_finite = torch.isfinite(a), torch.isfinite(e)
    both_finite = a_finite & e_finite
    magnitude = e.abs()
    diff = (a - e).abs_().masked_fill_(~both_finite, 0.0)
    within = both_finite & (diff <= magnitude * rtol + atol)
    same_nonfinite = ~e_finite & ((a == e) | (torch.isnan(a) & torch.isnan(e)))
    return ~(within | same_nonfinite), diff, magnitude, both_finite


def tensors_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise-ish equality used to detect in-place mutation of inputs (NaN equals NaN)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point() or a.is_complex():
        return bool(torch.equal(a, b) or torch.all((a == b) | (torch.isnan(a) & torch.isnan(b))))
    return bool(torch.equal(a, b))
