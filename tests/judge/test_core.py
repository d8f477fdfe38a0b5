"""The pure core of the judge: comparison, timing statistics and plausibility checks."""

from __future__ import annotations

import math

import pytest
import torch

from evalkit.judge import tensor_check
from evalkit.judge.tensor_check import compare_outputs, compare_sampled, tensors_equal
from evalkit.judge.plausibility import custom_kernels, floor_ms, kernel_flags, precision_class, reduced_precision
from evalkit.judge.timing import CALIBRATION_PINGS, PingBudget, measure, timing_stats
from evalkit.row_parts import TimingRecord, TimingStats


def test_identical_outputs_pass_with_zero_error():
    x = torch.randn(4, 5, dtype=torch.float64)
    result = compare_outputs(x.float(), x, atol=1e-2, rtol=1e-2, expected_dtype=torch.float32)
    assert result.ok and result.bad_count == 0 and result.max_abs_err < 1e-6


def test_errors_report_count_fraction_and_first_bad_index():
    expected = torch.zeros(3, 4, dtype=torch.float64)
    actual = torch.zeros(3, 4)
    actual[1, 2] = 0.5
    actual[2, 3] = -0.25
    result = compare_outputs(actual, expected, atol=0.01, rtol=0.01, expected_dtype=torch.float32)
    assert not result.ok
    assert result.bad_count == 2 and result.bad_fraction == pytest.approx(2 / 12)
    assert result.first_bad_index == [1, 2]
    assert result.max_abs_err == pytest.approx(0.5)


def test_tolerance_is_atol_plus_rtol_times_reference():
    expected = torch.full((10,), 100.0, dtype=torch.float64)
    assert compare_outputs(expected.float() + 1.0, expected, atol=0.01, rtol=0.011, expected_dtype=torch.float32).ok
    assert not compare_outputs(expected.float() + 1.2, expected, atol=0.01, rtol=0.011, expected_dtype=torch.float32).ok


def test_nan_or_inf_where_the_reference_is_finite_fails():
    expected = torch.ones(4, dtype=torch.float64)
    for bad in (float("nan"), float("inf")):
        actual = torch.ones(4)
        actual[3] = bad
        result = compare_outputs(actual, expected, atol=1.0, rtol=1.0, expected_dtype=torch.float32)
        assert not result.ok and result.unexpected_nonfinite == 1 and result.first_bad_index == [3]


def test_matching_nonfinite_values_are_equal():
    expected = torch.tensor([float("nan"), float("inf"), 1.0], dtype=torch.float64)
    actual = torch.tensor([float("nan"), float("inf"), 1.0])
    assert compare_outputs(actual, expected, atol=0, rtol=0, expected_dtype=torch.float32).ok


def test_shape_and_dtype_mismatches_are_named():
    expected = torch.zeros(2, 3, dtype=torch.float64)
    shape = compare_outputs(torch.zeros(3, 2), expected, atol=1, rtol=1, expected_dtype=torch.float32)
    dtype = compare_outputs(torch.zeros(2, 3, dtype=torch.float16), expected, atol=1, rtol=1,
                            expected_dtype=torch.float32)
    assert not shape.ok and "shape mismatch" in shape.reason
    assert not dtype.ok and "dtype mismatch" in dtype.reason


def test_comparison_in_chunks_matches_whole(monkeypatch):
    import evalkit.judge.tensor_check as compare

    expected = torch.randn(1000, dtype=torch.float64)
    actual = (expected + 0.02 * torch.randn(1000, dtype=torch.float64)).float()
    whole = compare_outputs(actual, expected, atol=0.01, rtol=0.01, expected_dtype=torch.float32)
    monkeypatch.setattr(compare, "CHUNK_ELEMENTS", 97)
    chunked = compare_outputs(actual, expected, atol=0.01, rtol=0.01, expected_dtype=torch.float32)
    assert (whole.bad_count, whole.first_bad_index) == (chunked.bad_count, chunked.first_bad_index)
    assert whole.rel_l2_err == pytest.approx(chunked.rel_l2_err)


def test_the_short_way_for_passing_chunks_gives_the_long_ways_figures_and_nothing_else():
    from evalkit.judge.tensor_check import _any_chunk, _passing_chunk

    generator = torch.Generator().manual_seed(0)
    e = torch.randn(10_000, generator=generator, dtype=torch.float64) * 3
    e[:100] = 0.0  # exact zeros: their relative error does not count
    e[100:200] *= 1e-4  # within atol: neither does theirs
    noise = torch.randn(10_000, generator=generator, dtype=torch.float64)
    a = e + 1e-3 * noise  # small inputs get large relative errors, which count only above atol
    for answer, atol, rtol in ((a, 1e-2, 1e-2), (a, 1e-2, 0.0), (e * (1 + 1e-3 * noise), 0.0, 1e-2)):
        short, full = _passing_chunk(answer, e, atol, rtol), _any_chunk(answer, e, atol, rtol)[0]
        assert short is not None and full[:2] == [0.0, 0.0]
        assert short == pytest.approx(full, rel=1e-12, abs=1e-300)
    for damage in (float("nan"), float("inf"), 1.0):  # not finite, or outside the tolerance
        broken = a.clone()
        broken[5000] += damage
        assert _passing_chunk(broken, e, 1e-2, 1e-2) is None
    infinite = e.clone()
    infinite[7] = float("inf")
    assert _passing_chunk(infinite.clone(), infinite, 1e-2, 1e-2) is None  # matching Inf: the long way decides


def test_a_sampled_comparison_checks_secret_positions_of_a_large_output(monkeypatch):
    monkeypatch.setattr(tensor_check, "SAMPLED_ELEMENTS", 1000)
    F32 = torch.float32
    expected = torch.randn(20, 500, dtype=torch.float64)
    assert compare_sampled(expected.float(), expected, atol=1e-4, rtol=1e-4, expected_dtype=F32, seed=1).ok
    wrong = expected.float().clone()
    wrong.view(-1)[::10] += 1.0  # a tenth of the work skipped: a sample of 1000 cannot miss it
    result = compare_sampled(wrong, expected, atol=1e-4, rtol=1e-4, expected_dtype=F32, seed=2)
    assert not result.ok and result.n_elements == 1000 and 50 < result.bad_count < 150
    assert "sampled elements" in result.reason and result.shape == [20, 500]
    row, column = result.first_bad_index
    assert (row * 500 + column) % 10 == 0  # an index of the full output, and a bad one
    # the positions follow the seed: another seed, another sample
    again = compare_sampled(wrong, expected, atol=1e-4, rtol=1e-4, expected_dtype=F32, seed=2)
    other = compare_sampled(wrong, expected, atol=1e-4, rtol=1e-4, expected_dtype=F32, seed=3)
    assert again.bad_count == result.bad_count and (other.bad_count, other.first_bad_index) != (
        result.bad_count, result.first_bad_index)
    # an output no larger than a sample, or of the wrong form, is compared whole
    small = compare_sampled(wrong[:2], expected[:2], atol=1e-4, rtol=1e-4, expected_dtype=F32, seed=2)
    assert small.n_elements == 1000 and small.bad_count == 100 and "sampled" not in small.reason
    mismatched = compare_sampled(wrong[:3], expected, atol=1e-4, rtol=1e-4, expected_dtype=F32, seed=2)
    assert "shape mismatch" in mismatched.reason


def test_tensors_equal_sees_in_place_changes():
    a = torch.tensor([1.0, float("nan")])
    assert tensors_equal(a, a.clone())
    b = a.clone()
    b[0] = 2.0
    assert not tensors_equal(a, b)


def test_timing_stats_by_hand():
    stats = timing_stats([4.0, 1.0, 3.0, 2.0, 5.0])
    assert (stats["count"], stats["median_ms"], stats["min_ms"], stats["max_ms"]) == (5, 3.0, 1.0, 5.0)
    assert stats["mean_ms"] == 3.0 and stats["iqr_ms"] == pytest.approx(2.0)
    assert stats["std_ms"] == pytest.approx(math.sqrt(2.0))
    # every statistic declared (once, in row_parts) is computed, and a timing record holds each
    assert set(stats) == set(TimingStats.__annotations__) <= set(TimingRecord.__annotations__)


def test_measure_prepares_every_call_and_keeps_only_timed_ones():
    prepared: list[int] = []
    samples = measure(lambda i: float(i), prepared.append, warmup=2, trials=3)
    assert prepared == [0, 1, 2, 3, 4]
    assert samples == [2.0, 3.0, 4.0]


def test_a_calibration_phase_stops_at_its_most_pings_or_once_its_budget_is_spent_after_its_least():
    budget = PingBudget(least_pings=3, most_pings=6, budget_ms=10.0)
    assert not budget.enough([])
    assert not budget.enough([9.0, 9.0])  # over budget, but fewer than the least
    assert budget.enough([9.0, 9.0, 9.0])  # the least, and 27 ms spent
    assert not budget.enough([1.0] * 5)  # fast pings: 5 ms spent, go on
    assert budget.enough([1.0] * 6)  # the most
    # problem 63's pings on an H200 (14 ms each: they move its gigabytes) stop well before 100; fast ones do not
    assert sum(1 for n in range(1, 101) if not CALIBRATION_PINGS.enough([14.0] * n)) + 1 == 36
    assert not CALIBRATION_PINGS.enough([0.2] * 99) and CALIBRATION_PINGS.enough([0.2] * 100)


def test_floor_uses_the_larger_of_compute_and_memory_time():
    # 67: 76 GFLOP, 0.27 GB on an H100 (989 TFLOP/s, 3.35 TB/s): memory-bound at 0.081 ms.
    assert floor_ms(76e9, 0.27e9, "NVIDIA H100 80GB HBM3") == pytest.approx(0.27e9 / 3.35e12 * 1e3)
    assert floor_ms(616e9, 1e6, "NVIDIA H100 80GB HBM3") == pytest.approx(616e9 / 989e12 * 1e3)
    assert floor_ms(76e9, 0.27e9, "cpu") is None
    assert floor_ms(None, None, "NVIDIA H100 80GB HBM3") is None


def test_library_kernels_are_told_from_custom_ones():
    names = ["void at::native::vectorized_elementwise_kernel<4>(int)", "sm90_xmma_fprop_implicit_gemm_tf32",
             "cudnn::detail::implicit_convolve_sgemm", "Memcpy DtoD (Device -> Device)", "conv_gelu_pool_kernel"]
    assert custom_kernels(names) == ["conv_gelu_pool_kernel"]
    assert kernel_flags(names, uses_load_inline=True) == []
    assert kernel_flags(names[:4], uses_load_inline=False) == ["no_custom_kernel"]
    assert kernel_flags(names[:4], uses_load_inline=True) == ["fallback", "no_custom_kernel"]
    assert kernel_flags([], uses_load_inline=True) == []  # nothing observed (CPU): no claim


def test_reduced_precision_is_relative_to_pytorchs_own_error():
    fp16 = {"rel_l2_err": 6e-4, "pytorch_own": {"rel_l2_err": 5e-7}}  # below 1e-3, yet 1000x PyTorch's error
    assert reduced_precision(fp16)
    tf32_where_pytorch_uses_tf32 = {"rel_l2_err": 3e-4, "pytorch_own": {"rel_l2_err": 2.5e-4}}
    assert not reduced_precision(tf32_where_pytorch_uses_tf32)
    assert reduced_precision({"rel_l2_err": 3e-4, "pytorch_own": {"rel_l2_err": 1e-7}})  # TF32 vs exact float32
    float32_reordered = {"rel_l2_err": 2e-7, "pytorch_own": {"rel_l2_err": 1e-8}}  # 20x, but float32-level
    assert not reduced_precision(float32_reordered)


def test_every_correct_row_gets_a_precision_class():
    assert [precision_class(e) for e in (1e-7, 3e-4, 2e-3, 1e-2)] == ["float32", "tf32_or_half", "tf32_or_half",
                                                                        "lower"]


def test_static_scan_warns_about_substitutes_and_fallbacks():
    from conftest import FIXTURES
    from evalkit.intake.static_scan import scan

    fallback = scan((FIXTURES / "cuda_submissions/cuda/matmul/fallback.py").read_text()).warnings
    assert any("try/except" in w for w in fallback) and any("torch.matmul" in w for w in fallback)
    pure = scan("import torch.nn.functional as F\nclass ModelNew:\n    def forward(self, x):\n        return F.gelu(x)\n")
    assert any("no load_inline" in w for w in pure.warnings) and not pure.needs_cuda
    cuda = scan('load_inline(name="k", cpp_sources="", cuda_sources="__global__ void k() {}")\n')
    assert cuda.needs_cuda and "passes cuda_sources to load_inline" in cuda.cuda_evidence


def test_float32_outputs_stored_in_16_bits_are_seen_and_flagged():
    import torch

    from evalkit.judge.plausibility import half_storage, reduced_precision

    torch.manual_seed(0)
    exact = torch.randn(64, 64, dtype=torch.float64)
    assert half_storage([exact.float()], [exact]) is None  # float32 arithmetic: not 16-bit values
    assert half_storage([exact.half().float()], [exact]) == "float16"
    assert half_storage([exact.bfloat16().float()], [exact]) == "bfloat16"
    counts = torch.randint(1, 100, (64, 64)).double()  # integer-valued truth: 16-bit values are right
    assert half_storage([counts.float()], [counts]) is None
    pytorch = {"rel_l2_err": 2.5e-4}  # PyTorch itself in TF32: fp16's error alone is within 10x of it
    assert not reduced_precision({"rel_l2_err": 2.6e-4, "pytorch_own": pytorch, "stored_as": None})
    assert reduced_precision({"rel_l2_err": 4.0e-4, "pytorch_own": pytorch, "stored_as": "float16"})


def test_16_bit_storage_is_judged_on_a_bounded_sample_of_a_large_output(monkeypatch):
    """A 2e9-element output (conv2d_square_input_square_kernel) once made the judge ask for a 64 GiB index
    tensor: the share is taken on an evenly strided sample, flattened, never a full boolean index."""
    import torch

    from evalkit.judge import plausibility

    monkeypatch.setattr(plausibility, "HALF_STORAGE_SAMPLE", 1000)
    torch.manual_seed(0)
    exact = torch.randn(4, 8, 64, 64, dtype=torch.float64)
    assert plausibility.half_storage([exact.half().float()], [exact]) == "float16"
    assert plausibility.half_storage([exact.float()], [exact]) is None
    flat = exact.reshape(-1)
    share = plausibility._representable_share
    assert share(exact, torch.float16) == share(flat[:: flat.numel() // 1000], torch.float16)
