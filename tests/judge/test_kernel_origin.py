"""Which kernels an answer's own sources define: an answer's kernel counts as its own whatever its name, a kernel
its sources do not define (PyTorch's, cuBLAS's, Inductor's, even pasted) never does."""

from __future__ import annotations

import pytest

from conftest import FIXTURES
from evalkit.judge.kernel_origin import own_kernels
from evalkit.judge.plausibility import custom_kernels, kernel_flags, kernel_shares
from intake.time_bounds import MAX_GROWTH, QUICK_S, growth, timed

CUDA = '''
from torch.utils.cpp_extension import load_inline
source = r"""
namespace ops {
template <typename T>
__global__ void __launch_bounds__(256) gemm_kernel(const T* a, T* c, int n) { }
}
__global__ void elementwise_kernel(float* x) { }
"""
module = load_inline(name="ops", cpp_sources="", cuda_sources=source, functions=[])
'''
TRITON = '''
import triton
import triton.language as tl

@triton.autotune(configs=[], key=["n"])
@triton.jit
def triton_softmax_kernel(x_ptr, n, BLOCK: tl.constexpr):
    pass

def launch(x):
    triton_softmax_kernel[(1,)](x, 1, BLOCK=128)
'''
PASTED_INDUCTOR = '''
import triton
from torch._inductor.runtime import triton_heuristics

@triton_heuristics.pointwise(size_hints=[1024], filename=__file__)
@triton.jit
def triton_poi_fused_gelu_0(in_ptr0, out_ptr0, xnumel, XBLOCK: tl.constexpr):
    pass
'''
CUTE = '''
import cutlass.cute as cute

class Add:
    @cute.jit
    def __call__(self, x):
        self.add_one(x).launch(grid=(1, 1, 1), block=(32, 1, 1))

    @cute.kernel
    def add_one(self, x):
        pass
'''
TILELANG = '''
import tilelang
import tilelang.language as T

def matmul(M, N, K):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16")):
        pass
    return main
'''


def test_a_cuda_kernel_counts_as_the_answers_whatever_its_name_and_namespace():
    own = own_kernels(CUDA)
    assert own.defines("void ops::gemm_kernel<float>(float const*, float*, int)")
    assert own.defines("elementwise_kernel(float*)")
    # PyTorch's kernel of the same last name, in a namespace the answer never declared, stays PyTorch's.
    assert not own.defines("void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl<...>>(int, ...)")
    assert not own.defines("sm90_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x32_execute_kernel__5x_cublas")


def test_a_triton_kernel_named_like_inductors_is_still_the_answers():
    kernels = ["triton_softmax_kernel", "triton_poi_fused_gelu_0"]
    own = own_kernels(TRITON)
    assert custom_kernels(kernels, own) == ["triton_softmax_kernel"]
    assert kernel_flags(kernels, uses_load_inline=False, own=own) == []
    # Without its sources, a name alone would have called it Inductor's (the old rule).
    assert kernel_flags(["triton_softmax_kernel"], uses_load_inline=False) == ["no_custom_kernel"]


def test_inductors_code_pasted_into_an_answer_is_still_inductors():
    own = own_kernels(PASTED_INDUCTOR)
    assert not own.defines("triton_poi_fused_gelu_0")
    assert kernel_flags(["triton_poi_fused_gelu_0"], uses_load_inline=False, own=own) == ["no_custom_kernel"]


def test_cute_dsl_and_tilelang_kernels_are_found_by_their_decorators():
    assert own_kernels(CUTE).defines("kernel_cutlass_add_one_0")
    assert not own_kernels(CUTE).defines("kernel_cutlass_other_0")
    assert own_kernels(TILELANG).defines("main_kernel")
    assert not own_kernels(TILELANG).defines("matmul_kernel")


def test_cublas_hopper_kernels_are_library_work():
    # In bf16 on an H200 cuBLAS runs kernels named nvjet_*: they were counted as the answer's own.
    kernel = "nvjet_sm90_tst_128x64_64x8_1x2_h_bz_coopA_NNT"
    assert custom_kernels([kernel]) == [] and custom_kernels([kernel], own_kernels(TRITON)) == []


def test_a_library_dominated_answer_is_told_by_origin():
    own = own_kernels(TRITON)
    kernels, us = ["triton_softmax_kernel", "void at::native::reduce_kernel<...>(...)"], [10.0, 90.0]
    share = kernel_shares(kernels, us, own)["custom_time_share"]
    assert share == 0.1
    assert kernel_flags(kernels, uses_load_inline=False, custom_time_share=share, own=own) == ["library_dominated"]


# Issue 42, G: plain PyTorch judged with no flag on an H200 because its text named PyTorch's own kernel, or held an
# unused Triton stub named like Inductor's.
PYTORCHS_KERNEL = ("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::"
                   "launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::"
                   "ClampLimits)::{lambda()#1}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul> >"
                   "(int, ..., std::array<char*, 2ul>)")
CUDA_ANSWERS = FIXTURES / "cuda_submissions" / "cuda" / "linear_relu"  # the answers test_cuda.py judges on a GPU
NAMES_PYTORCHS_KERNEL = "namespace at { namespace native { __global__ void vectorized_elementwise_kernel("
PLAIN_PYTORCH = '''
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
'''


def test_a_kernel_named_in_a_comment_docstring_or_unused_string_is_nobodys():
    commented = (CUDA_ANSWERS / "j_comment_names_pytorchs_kernel.py").read_text()
    assert NAMES_PYTORCHS_KERNEL in commented and not own_kernels(commented)  # the cuda end-to-end test's answer
    for hidden in (f"# {NAMES_PYTORCHS_KERNEL}\n", f'"""{NAMES_PYTORCHS_KERNEL}"""\n',
                   f'NOTES = r"""{NAMES_PYTORCHS_KERNEL} float* x) {{}} }} }}"""\n'):
        own = own_kernels(hidden + PLAIN_PYTORCH)
        assert not own and not own.defines(PYTORCHS_KERNEL), hidden
        assert kernel_flags([PYTORCHS_KERNEL], uses_load_inline=False, own=own) == ["no_custom_kernel"], hidden


def test_in_compiled_source_only_code_counts_not_its_comments_strings_or_if_zero_blocks():
    def answer(source: str) -> str:
        return f'from torch.utils.cpp_extension import load_inline\nSRC = r"""{source}"""\n' \
               f'ext = load_inline(name="e", cpp_sources="", cuda_sources=SRC, functions=["go"])\n'
    fake = f"{NAMES_PYTORCHS_KERNEL}float* x) {{}} }} }}"
    for hidden in (f"// {fake}", f"/* {fake} */", f'const char* s = "{fake}";', f"#if 0\n{fake}\n#endif"):
        own = own_kernels(answer(hidden + "\n__global__ void go(float* x) {}\n"))
        assert own.cuda == {"go"} and not own.defines(PYTORCHS_KERNEL), hidden
    assert own_kernels(answer(fake)).defines(PYTORCHS_KERNEL)  # compiled, it would count: the name is all there is
    assert own_kernels(answer(f"#if 0\nx\n#else\n{fake}\n#endif")).defines(PYTORCHS_KERNEL)


def test_source_reaches_the_compiler_however_an_answer_writes_it():
    answer = '''
import textwrap
from torch.utils.cpp_extension import load_inline
BLOCK = 256
HEADER = "#include <cuda_runtime.h>\\n"
def kernel_source(op):
    return textwrap.dedent(f"""
    __global__ void {op}_kernel(float* x) {{ x[threadIdx.x] *= {BLOCK}; }}
    """)
parts = [HEADER]
parts.append("__global__ void appended_kernel(float* x) {}")
two = "__global__ void formatted_kernel(float* x) {{ x[0] = {}; }}".format(1.0)
def build(cuda):
    return load_inline(name="e", cpp_sources="", cuda_sources=cuda, functions=[])
class Holder:
    def __init__(self):
        self.source = "__global__ void held_kernel(float* x) {}"
        self.ext = build(["\\n".join(parts), two + kernel_source("scale"), self.source])
'''
    own = own_kernels(answer)
    assert {"appended_kernel", "formatted_kernel", "held_kernel"} <= own.cuda, own.cuda
    assert own.defines("appended_kernel(float*)") and own.defines("held_kernel(float*)")


# The cuda end-to-end test's answer: torch.compile beside unused stubs named like Inductor's kernels.
INDUCTOR_NAMED_STUB = (CUDA_ANSWERS / "k_unused_triton_stub.py").read_text()


def test_an_unused_triton_stub_named_like_inductors_kernel_is_not_the_answers():
    own = own_kernels(INDUCTOR_NAMED_STUB)
    for inductors in ("triton_poi_fused_addmm_relu_0", "triton_poi_fused_relu_0"):
        assert not own.defines(inductors)
        assert kernel_flags([inductors], uses_load_inline=False, own=own) == ["no_custom_kernel"]
    launched = INDUCTOR_NAMED_STUB.replace("return self.compiled(x)",
                                          "triton_poi_fused_addmm_relu_0[(1,)](x, x, 1, XBLOCK=1)\n        return x")
    assert own_kernels(launched).defines("triton_poi_fused_addmm_relu_0")  # launched by the answer: its own


# Answers read in the trusted process: each read takes time linear in the answer's text (the old pattern for a
# __global__ declaration took 212 s on 200 KB of "__global__ ").
ADVERSARIAL = {
    "globals": lambda n: 'load_inline(cuda_sources="' + "__global__ " * n + '")\n',
    "open comments": lambda n: 'load_inline(cuda_sources="' + "/*" * n + '")\n',
    "doubling names": lambda n: 's0 = "__global__ void k(float* x) {}"\n' + "".join(
        f"s{i} = s{i - 1} + s{i - 1}\n" for i in range(1, n // 50)) + f"load_inline(cuda_sources=s{n // 50 - 1})\n",
    "decorated functions": lambda n: "import triton\n" + "".join(
        f"@triton.jit\ndef k{i}(x):\n    pass\nk{i}[(1,)](x)\n" for i in range(n // 20)),
}


@pytest.mark.parametrize("case", sorted(ADVERSARIAL))
def test_reading_an_answers_kernels_takes_time_linear_in_its_text(case):
    make = ADVERSARIAL[case]
    _, seconds = timed(lambda: own_kernels(make(20000)))
    assert seconds < QUICK_S
    assert growth(own_kernels, make, 5000) < MAX_GROWTH
