"""Which kernels an answer's own sources define: an answer's kernel counts as its own whatever its name, a kernel
its sources do not define (PyTorch's, cuBLAS's, Inductor's, even pasted) never does."""

from __future__ import annotations

from evalkit.judge.kernel_origin import own_kernels
from evalkit.judge.plausibility import custom_kernels, kernel_flags, kernel_shares

CUDA = '''
from torch.utils.cpp_extension import load_inline
source = r"""
namespace ops {
template <typename T>
__global__ void __launch_bounds__(256) gemm_kernel(const T* a, T* c, int n) { }
}
__global__ void elementwise_kernel(float* x) { }
"""
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
