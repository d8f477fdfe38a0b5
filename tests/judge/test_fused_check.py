"""The one-pass comparison of a passing output (``judge.fused_check``): the figures of PyTorch's chunked pass, on
CUDA; the long way everywhere else and for every output that does not pass."""

import pytest
import torch

from evalkit.judge import fused_check
from evalkit.judge.fused_check import FUSED_MIN_ELEMENTS, passing_figures
from evalkit.judge.tensor_check import _passing_chunk, compare_outputs


def test_off_cuda_the_comparison_takes_the_long_way():
    e = torch.randn(FUSED_MIN_ELEMENTS, dtype=torch.float64)
    assert passing_figures(e.float(), e, 1e-2, 1e-2) is None
    result = compare_outputs(e.float(), e, atol=1e-2, rtol=1e-2, expected_dtype=torch.float32)
    assert result.ok and result.max_abs_err < 1e-6


def test_a_kernel_that_cannot_run_here_is_not_used():
    assert not fused_check._usable(torch.float32, torch.float64, torch.device("cpu"))


def test_small_or_unusual_tensors_take_the_long_way():
    e = torch.zeros(16, dtype=torch.float64)
    assert not fused_check._applies(e.float(), e)  # small, and on the CPU


@pytest.mark.cuda
def test_small_or_integer_outputs_on_cuda_take_the_long_way():
    e = torch.zeros(FUSED_MIN_ELEMENTS, dtype=torch.float64, device="cuda")
    assert fused_check._applies(e.float(), e)
    assert not fused_check._applies(e[:-1].float(), e[:-1])
    assert not fused_check._applies(e.to(torch.int32), e)


def _pair(dtype: torch.dtype, n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator(device="cuda").manual_seed(seed)
    e = torch.randn(n, generator=generator, dtype=torch.float64, device="cuda") * 3
    e[:1000] = 0.0  # exact zeros: their relative error does not count
    e[1000:2000] *= 1e-4  # within atol: neither does theirs
    return (e + 1e-3 * torch.randn(n, generator=generator, dtype=torch.float64, device="cuda")).to(dtype), e


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_the_one_pass_gives_the_chunked_passs_figures(dtype):
    n = FUSED_MIN_ELEMENTS + 12345  # a last block only partly inside
    a, e = _pair(dtype, n)
    atol = rtol = 1e-2 if dtype in (torch.float32, torch.float64) else 5e-2
    fused = passing_figures(a, e, atol, rtol)
    chunked = _passing_chunk(a.to(torch.float64), e, atol, rtol)
    assert fused is not None and chunked is not None
    assert fused[:4] == chunked[:4]  # the largest errors exactly
    assert fused[4:] == pytest.approx(chunked[4:], rel=1e-9)  # the square sums, summed in another order


@pytest.mark.cuda
@pytest.mark.parametrize("where", [0, FUSED_MIN_ELEMENTS // 2, FUSED_MIN_ELEMENTS + 12344])
@pytest.mark.parametrize("damage", [float("nan"), float("inf"), -float("inf"), 1.0])
def test_one_element_wrong_or_not_finite_sends_it_the_long_way(where, damage):
    a, e = _pair(torch.float32, FUSED_MIN_ELEMENTS + 12345)
    a[where] += damage
    assert passing_figures(a, e, 1e-2, 1e-2) is None
    result = compare_outputs(a, e, atol=1e-2, rtol=1e-2, expected_dtype=a.dtype)
    assert not result.ok and result.bad_count == 1 and result.first_bad_index == [where]


@pytest.mark.cuda
def test_a_reference_not_finite_sends_it_the_long_way():
    a, e = _pair(torch.float32, FUSED_MIN_ELEMENTS)
    e[7] = a[7] = float("inf")  # matching infinities pass, but the long way decides
    assert passing_figures(a, e, 1e-2, 1e-2) is None
    assert compare_outputs(a, e, atol=1e-2, rtol=1e-2, expected_dtype=a.dtype).ok


@pytest.mark.cuda
def test_the_tolerances_apply_in_float64():
    a, e = _pair(torch.float64, FUSED_MIN_ELEMENTS)
    e[5000] = 0.0
    a[5000] = 1e-2 + 3e-10  # just outside atol=1e-2 (rtol 0)
    assert passing_figures(a, e, 1e-2, 0.0) is None
    a[5000] = 1e-2 - 1e-11  # just inside: float32 bounds (atol 0.00999999978) would reject it
    assert passing_figures(a, e, 1e-2, 0.0) is not None


@pytest.mark.cuda
def test_a_whole_comparison_reads_the_same_figures_either_way(monkeypatch):
    a, e = _pair(torch.float32, FUSED_MIN_ELEMENTS * 2)
    fused = compare_outputs(a.view(-1, 1024), e.view(-1, 1024), atol=1e-2, rtol=1e-2,
                           expected_dtype=a.dtype)
    monkeypatch.setattr(fused_check, "FUSED_MIN_ELEMENTS", 2**62)
    chunked = compare_outputs(a.view(-1, 1024), e.view(-1, 1024), atol=1e-2, rtol=1e-2,
                              expected_dtype=a.dtype)
    assert fused.ok and chunked.ok
    assert (fused.max_abs_err, fused.max_rel_err) == (chunked.max_abs_err, chunked.max_rel_err)
    assert fused.rel_l2_err == pytest.approx(chunked.rel_l2_err, rel=1e-9)


@pytest.mark.cuda
def test_a_broken_triton_costs_the_comparison_its_speed_not_its_verdict(monkeypatch):
    def broken() -> object:
        raise RuntimeError("no compiler here")

    fused_check._usable.cache_clear()
    monkeypatch.setattr(fused_check, "_kernel", broken)
    try:
        a, e = _pair(torch.float32, FUSED_MIN_ELEMENTS)
        assert passing_figures(a, e, 1e-2, 1e-2) is None
        assert compare_outputs(a, e, atol=1e-2, rtol=1e-2, expected_dtype=a.dtype).ok
        a[9] += 1.0
        assert not compare_outputs(a, e, atol=1e-2, rtol=1e-2, expected_dtype=a.dtype).ok
    finally:
        fused_check._usable.cache_clear()
