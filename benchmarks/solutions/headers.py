"""Header comments of the curated solutions. Numbers: evalkit on an NVIDIA H100 80GB HBM3 (torch 2.11.0+cu130),
2026-11-21, 5 correctness trials against the float64 reference, 50 timed calls; see
benchmarks/solutions/results-2026-11-21.md (final run) and docs/solutions-notes.md (all variants)."""

HEADERS = {
    "alexnet_conv1/tf32_implicit_gemm.py": '''\
# Curated solution: alexnet_conv1 (KernelBench L1/50), Conv2d 3->96, 11x11, stride 4, padding 2, on 256x3x224x224.
# Idea: implicit GEMM on tensor cores. M = 96 output channels, N = output pixels (a tile is 2 output rows x 56
#   columns of one image), K = 3*11*11 = 363 (padded to 368, taps fastest). A small kernel packs the weights into
#   mma fragment order each call (TF32-rounded); they stay resident in shared memory (141 KB) while a persistent
#   block streams input patches (3 ch x 15 rows x 236 cols, padding zero-filled by cp.async, double-buffered).
#   6 warps, each 32 channels x 56 pixels; the k loop gathers the im2col operand straight from the patch.
# Precision: TF32 on tensor cores (mma.sync m16n8k8; weights rounded to TF32, inputs truncated by the tensor
#   core), float32 accumulation. Error vs float64 (evalkit): max abs 7.9e-4, rel L2 4.4e-4 (tolerance 1e-2).
# Measured: 0.705 ms median (evalkit); eager 2.27 ms (3.22x), torch.compile 1.83 ms (2.60x). Goal <= 1.5 ms: met.
# Bound: the TF32 MMA issue rate. 54 GFLOP in 0.705 ms is 77 TFLOP/s, against ~200 TFLOP/s that the same kernel
#   family reaches on larger K; the floors are 0.13 ms (bytes) and ~0.27 ms (TF32 at 200 TFLOP/s). The 226 KB of
#   shared memory leaves one block of 6 warps per SM, so latency is poorly hidden; next step: stream the weights
#   per input channel to fit two blocks per SM (variant conv50_tf32_t4 in the notes: 0.68 ms).
''',
    "conv2d_gelu_globalavgpool/tf32_fused_conv_fastgelu_mean.py": '''\
# Curated solution: conv2d_gelu_globalavgpool (KernelBench L2/67), Conv2d 8->64 3x3 -> GELU -> global mean,
#   on 128x8x256x256.
# Idea: one kernel, so the 2.1 GB conv output is never written. TF32 implicit GEMM (tile: 64 channels x 2 rows x
#   128 columns, K = 8*9 = 72, weights resident); the epilogue adds the bias, applies GELU and sums per channel
#   in registers; each block walks a contiguous range of tiles and flushes its sums with one atomicAdd per
#   channel when the image changes (into an output zeroed first), pre-scaled by 1/(254*254). GELU is the exact
#   erf form, with erf from Abramowitz-Stegun 7.1.26 written without cancellation (max |error| 4e-7 on
#   [-12, 12]); with CUDA's erff the kernel ran 1.051 ms.
# Precision: TF32 on tensor cores (mma.sync m16n8k8), float32 accumulation and sums. Error vs float64 (evalkit):
#   max abs 2.0e-4, rel L2 3.9e-4 (PyTorch's own float32 result is exact here: cuDNN does not use TF32 for it).
# Measured: 0.990 ms median (evalkit); eager 6.59 ms (6.66x), torch.compile 2.63 ms (2.65x). Goal <= 1.5 ms: met.
# Bound: arithmetic. 76 GFLOP of MMA (~0.4 ms at 200 TFLOP/s) plus 528 M GELUs on the CUDA cores; the byte floor
#   is 0.08 ms. Next step: overlap the GELU epilogue of one tile with the MMAs of the next (warp specialization).
''',
    "conv2d_asymmetric_input_asymmetric_kernel/fp16_implicit_gemm.py": '''\
# Curated solution: conv2d_asymmetric_input_asymmetric_kernel (KernelBench L1/56), Conv2d 64->128, 5x7, no bias,
#   on 8x64x512x256.
# Idea: implicit GEMM on tensor cores with FP16 operands. A first kernel converts the input to half2 channel pairs
#   (0.27 GB read, 0.13 GB written); the main kernel (M = 128 channels, N = 2 rows x 128 columns, 8 warps of
#   64x64) streams K in chunks of 8 channels x 35 taps (padded to 36) with weights and patch double-buffered by
#   cp.async; the epilogue stages 32 channels at a time in shared memory and writes whole rows coalesced.
# Precision: FP16 operands on tensor cores (mma.sync m16n8k16), float32 accumulation. This is neither float32 on
#   CUDA cores nor TF32: FP16 keeps the same 10-bit mantissa as TF32 (inputs in [0,1] and weights |w| < 0.03 are
#   far inside its range), and the error equals PyTorch's own TF32 result: max abs 5.4e-4, rel L2 2.7e-4 vs
#   float64 (evalkit; PyTorch default 2.9e-4). The same kernel in TF32 runs 2.87 ms, slower than eager.
# Measured: 1.716 ms median (evalkit); eager 2.79 ms (1.63x), torch.compile 3.78 ms (2.20x). Goal <= 2.5 ms: met.
# Bound: MMA issue rate. 583 GFLOP in 1.716 ms is 340 TFLOP/s; TF32 mma.sync topped out near 200 TFLOP/s, below
#   the 495 TFLOP/s TF32 dense peak that only wgmma reaches. Next step: a wgmma (sm_90a) TF32 version.
''',
    "conv2d_square_input_square_kernel/tf32_implicit_gemm.py": '''\
# Curated solution: conv2d_square_input_square_kernel (KernelBench L1/63), Conv2d 16->128, 3x3, no bias,
#   on 16x16x1024x1024 (output 16x128x1022x1022, 8.56 GB).
# Idea: TF32 implicit GEMM; all weights (128 x 144) resident in shared memory; a persistent block computes a tile
#   of 1 output row x 128 columns x all 128 channels (8 warps of 64x32, K = 144 in 18 k-steps) while cp.async
#   loads the next tile's patch. The epilogue is what matters here: the finished tile waits in shared memory and
#   its stores (whole channel rows, consecutive lanes on consecutive addresses) are issued two per thread after
#   each k-step of the next tile, so the 8.56 GB output stream overlaps the MMAs. Storing the fragments straight
#   from registers ran 11.3 ms; staging them first, 6.8 ms; deferring the staged stores, 6.2 ms.
# Precision: TF32 on tensor cores (mma.sync m16n8k8), float32 accumulation. Error vs float64 (evalkit): max abs
#   7.8e-4, rel L2 4.0e-4 (PyTorch's own TF32 result: 3.0e-4).
# Measured: 6.20 ms median by evalkit's CUDA events (reported_median_ms); eager 7.13 ms (1.15x), torch.compile
#   12.75 ms (2.06x). evalkit's row says 12.18 ms, flag timing_mismatch: its outside wall clock also covers the
#   worker copying the 8.56 GB output into the judge's buffer (5.7 ms), see benchmarks/solutions/
#   results-2026-11-21.md. By that figure no kernel can beat eager on this problem.
# Goal <= 6 ms: missed. Bound: the output write overlapped with the MMAs. A plain 8.56 GB fill takes 2.6 ms here
#   (3.27 TB/s) and the MMAs alone 3.0 ms (205 TFLOP/s); the same kernel with the MMAs removed still takes
#   5.35 ms: one block per SM alternates patch-load waits, barriers and store bursts, so DRAM sees ~1.8 TB/s.
#   Next step: warp-specialized loader / MMA / store warps so the store stream never pauses. FP16 operands
#   halve the MMA time: fp16_implicit_gemm.py beside this file, 5.73 ms.
''',
    "conv2d_square_input_square_kernel/fp16_implicit_gemm.py": '''\
# Curated solution (FP16 variant): conv2d_square_input_square_kernel (KernelBench L1/63), Conv2d 16->128, 3x3,
#   no bias, on 16x16x1024x1024 (output 16x128x1022x1022, 8.56 GB).
# Idea: as tf32_implicit_gemm.py but with FP16 operands: a first kernel converts the input to half2 channel pairs
#   (1.07 GB read, 0.54 GB written), then an implicit GEMM with mma.sync m16n8k16 (tile 1 row x 256 columns x
#   128 channels, 8 warps of 64x64, K = 144 in 9 k-steps, weights resident) whose epilogue stages 32 channels at
#   a time in shared memory and writes whole channel rows coalesced.
# Precision: FP16 operands on tensor cores, float32 accumulation: neither float32 on CUDA cores nor TF32. FP16
#   has TF32's 10-bit mantissa (inputs in [0,1], |w| < 0.09 are far inside its range) and rounds to nearest, so
#   the error is PyTorch's own TF32 error: max abs 6.1e-4, rel L2 2.8e-4 vs float64 (evalkit; PyTorch 3.0e-4).
# Measured: 5.73 ms median by evalkit's CUDA events (reported_median_ms); eager 7.13 ms (1.24x), torch.compile
#   12.75 ms (2.22x). evalkit's row says 11.72 ms, flag timing_mismatch (it times the 5.7 ms copy of the output
#   into the judge's buffer too; see results-2026-11-21.md).
# Goal <= 6 ms: met by event time. Bound: the output stream. MMAs take half the TF32 time, so the kernel is close
#   to its own store pattern without MMAs (5.35 ms, ~1.8 TB/s of DRAM traffic against 3.27 TB/s for a plain
#   fill). Next step: warp-specialized load / MMA / store warps so the stores stream continuously.
''',
    "convtranspose2d_gelu_groupnorm/tf32_fused_fastgelu_groupnorm.py": '''\
# Curated solution (faster GELU variant): convtranspose2d_gelu_groupnorm (KernelBench L2/19), ConvTranspose2d
#   64->64 k3 s1 -> GELU -> GroupNorm(8), on 128x64x256x256 (output 128x64x258x258).
# Idea: as tf32_fused_gelu_groupnorm.py (conv with padding 2 on transposed, flipped weights; TF32 implicit GEMM,
#   2 blocks per SM; epilogue: bias, GELU, store y, per-(image, group) sums; then normalize in place), with the
#   GELU's erf from Abramowitz-Stegun 7.1.26 written without cancellation (max |error| 4e-7) instead of erff.
# Precision: TF32 on tensor cores (mma.sync m16n8k8), float32 accumulation, statistics in double. Error vs
#   float64 (evalkit): max abs 4.4e-3 on outputs up to ~7.5, rel L2 3.4e-4 (PyTorch's own TF32: 3.3e-4).
# Measured: 5.99 ms median by evalkit's CUDA events (reported_median_ms); eager 12.34 ms (2.06x), torch.compile
#   8.23 ms (1.37x). Goal <= 6 ms: met by event time. evalkit's row says 7.94 ms, flag timing_mismatch: its wall
#   clock also times the worker's 1.45 ms copy of the 2.18 GB output, which crosses its 20%-plus-0.3 ms allowance
#   for this kernel but not for the 0.1 ms slower erff one (results-2026-11-21.md).
# Bound: the convolution's MMA rate (a 32x88 warp tile reads more shared memory per MMA than the 64x64 tiles
#   that reach 205 TFLOP/s) plus the normalize pass over 2.18 GB (~1.45 ms). Next step: 64x64 warp tiles over a
#   pixel tiling that covers 258 columns without waste, or wgmma.
''',
    "convtranspose2d_gelu_groupnorm/tf32_fused_gelu_groupnorm.py": '''\
# Curated solution: convtranspose2d_gelu_groupnorm (KernelBench L2/19), ConvTranspose2d 64->64 k3 s1 -> GELU ->
#   GroupNorm(8), on 128x64x256x256 (output 128x64x258x258).
# Idea: a stride-1 transposed convolution is a convolution with padding 2 and the weights transposed and flipped,
#   which the weight-packing kernel does. Pass 1: TF32 implicit GEMM (2 blocks per SM, 4 warps, tile 64 channels
#   x 2 rows x 88 columns, K streamed in chunks of 8 channels); its epilogue adds the bias, applies the exact GELU,
#   writes y and accumulates per-(image, group) sum and sum of squares (warp shuffles, then double atomics).
#   Pass 2: normalizes y in place with gamma/beta (one read, one write). No library kernel runs.
# Precision: TF32 on tensor cores (mma.sync m16n8k8), float32 accumulation, statistics in double. Error vs float64
#   (evalkit): max abs 4.4e-3 on outputs up to ~7.5, rel L2 3.4e-4 (PyTorch's own TF32 result: 3.3e-4).
# Measured: 6.10 ms median (evalkit); eager 12.34 ms (2.02x), torch.compile 8.23 ms (1.35x). Goal <= 6 ms: just
#   missed here; the variant with a cheaper erf, tf32_fused_fastgelu_groupnorm.py, runs 5.99 ms.
# Bound: the convolution's MMA rate (about 4.2 ms; 627 GFLOP at ~150 TFLOP/s: a 32x88 warp tile reads more shared
#   memory per MMA than the 64x64 tiles that reach 205 TFLOP/s) plus the normalize pass over 2.18 GB (~1.45 ms).
#   Next step: 64x64 warp tiles over a pixel tiling that covers 258 columns without waste, or wgmma.
''',
    "convtranspose2d_gelu_groupnorm/cudnn_convT_fused_gelu_groupnorm.py": '''\
# Curated solution (library conv variant): convtranspose2d_gelu_groupnorm (KernelBench L2/19).
# Idea: the transposed convolution runs in cuDNN through PyTorch (defaults: TF32); two custom kernels do the rest
#   in place on its output: GELU + per-(image, group) sum and sum of squares (one read, double atomics), then
#   GELU + normalize with gamma/beta (one read, one write). Kept as the example of a library conv with a custom
#   fused epilogue; tf32_fused_gelu_groupnorm.py (all custom) is 1.6x faster.
# Precision: the convolution is cuDNN's TF32 (tensor cores); GELU and GroupNorm in float32 on CUDA cores,
#   statistics in double. Error vs float64 (evalkit): max abs 4.0e-3, rel L2 3.3e-4.
# Measured: 10.35 ms median (evalkit); eager 12.34 ms (1.19x), torch.compile 8.23 ms (0.80x).
# Bound: cuDNN's dgrad kernel (with its NCHW<->NHWC transposes) is ~8 ms of it; the two passes move 6.5 GB.
''',
}
