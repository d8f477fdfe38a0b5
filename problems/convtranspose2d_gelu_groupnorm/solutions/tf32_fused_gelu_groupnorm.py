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

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""#include <torch/extension.h>
// convT19_tf32 variant: two blocks per SM, direct stores.
#define SOL_TWOBLOCKS
// problem convtranspose2d_gelu_groupnorm: ConvTranspose2d 64->64, k3, s1 (= Conv2d on flipped weights, padding 2)
// -> GELU -> GroupNorm(8). (128,64,256,256) -> (128,64,258,258).
// Pass 1: TF32 implicit GEMM whose epilogue adds the bias, applies GELU, writes y and accumulates per-(image, group)
// sum and sum of squares (double atomics). Pass 2: normalize y in place with gamma/beta.
// Generic implicit-GEMM convolution on tensor cores (mma.sync), shared by the curated solutions.
//
// GEMM view: M = output channels (A = weights, pre-packed in mma fragment order),
//            N = output pixels of one image (B = the input patch in shared memory, gathered on the fly),
//            K = (input channel word, kh, kw).
// A "word" is 32 bits: one float32 channel (TF32 path, m16n8k8) or a pair of float16 channels
// (FP16 path, m16n8k16, input converted to half2 planes first). In words both fragment layouts are
// identical: a0 (row g, word t), a1 (g+8, t), a2 (g, t+4), a3 (g+8, t+4); b0 (word t, col g), b1 (t+4, g).
// A block owns all output channels and a tile of TH output rows x TWP output columns of one image; it is
// persistent and walks its tiles, streaming the input patch (and the weights, unless they fit resident)
// through a two-stage cp.async pipeline. Accumulation is always float32.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <stdint.h>

#define DEVI __device__ __forceinline__

namespace ck {

DEVI uint32_t smem_u32(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

DEVI void cp_async16(uint32_t dst, const void* src, bool valid) {
  int sz = valid ? 16 : 0;  // src-size 0: the 16 bytes are zero-filled (padding / out of bounds)
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(sz) : "memory");
}
DEVI void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
DEVI void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

DEVI uint32_t to_tf32(float f) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(f));
  return r;
}

template <bool F16>
DEVI void mma(float (&d)[4], const uint4& a, uint32_t b0, uint32_t b1) {
  if constexpr (F16) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b0), "r"(b1));
  } else {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b0), "r"(b1));
  }
}

template <bool CS>
DEVI void st2(float* p, float a, float b) {
  if constexpr (CS) __stcs(reinterpret_cast<float2*>(p), make_float2(a, b));
  else *reinterpret_cast<float2*>(p) = make_float2(a, b);
}
template <bool CS>
DEVI void st1(float* p, float a) {
  if constexpr (CS) __stcs(p, a);
  else *p = a;
}

DEVI float gelu_erf(float v) { return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f)); }

// The same GELU, 0.5 v (1 + erf(v / sqrt 2)), with erf from Abramowitz & Stegun 7.1.26 (|error| <= 1.5e-7;
// max |error| of the result 4e-7 on [-12, 12] in float32). Written so that 1 + erf(z) never cancels: with
// q = poly(t) exp(-z^2), z = |v| / sqrt 2, it is 2 - q for v >= 0 and q itself for v < 0. Two MUFU ops, no branch.
DEVI float gelu_fast(float v) {
  const float z = fabsf(v) * 0.70710678118654752f;
  const float t = __fdividef(1.0f, fmaf(0.3275911f, z, 1.0f));
  float p = fmaf(1.061405429f, t, -1.453152027f);
  p = fmaf(p, t, 1.421413741f);
  p = fmaf(p, t, -0.284496736f);
  p = fmaf(p, t, 0.254829592f);
  const float q = p * t * __expf(-z * z);
  return 0.5f * v * (v >= 0.f ? 2.0f - q : q);
}
template <bool FAST>
DEVI float gelu(float v) {
  if constexpr (FAST) return gelu_fast(v);
  else return gelu_erf(v);
}

enum { MODE_STORE = 0, MODE_GELU_MEAN = 1, MODE_GELU_STATS = 2 };

// NB: batch. CW: input channel words (channels for TF32, channel pairs for FP16). H, W: input size.
// KH, KW, S, P: kernel, stride, padding. COUT: output channels (all owned by one block).
// TH x TWP: output tile (TWP % 8 == 0). WM x WN warps, each MT m-tiles (16 ch) x NT n-tiles (8 px).
// CKW: channel words per K chunk. TAPFAST: K order (word, tap) with taps fastest, else (tap, word).
// FLIP: weights come from a ConvTranspose2d ([CIN][COUT][KH][KW], spatially flipped).
template <int NB_, int CW_, int H_, int W_, int KH_, int KW_, int S_, int P_, int COUT_, int TH_, int TWP_,
          int WM_, int WN_, int MT_, int NT_, int CKW_, bool TAPFAST_, bool F16_, int MODE_, bool CONTIG_,
          int MINB_, bool ROUNDB_ = false, bool FLIP_ = false, int EPI_ = 0, int RCH_ = 32, bool STCS_ = true,
          bool FG_ = false>
struct Cfg {
  static constexpr int NB = NB_, CW = CW_, H = H_, W = W_, KH = KH_, KW = KW_, S = S_, P = P_, COUT = COUT_;
  static constexpr int OH = (H + 2 * P - KH) / S + 1, OW = (W + 2 * P - KW) / S + 1;
  static constexpr int TH = TH_, TWP = TWP_, WM = WM_, WN = WN_, MT = MT_, NT = NT_, CKW = CKW_;
  static constexpr bool TAPFAST = TAPFAST_, F16 = F16_, CONTIG = CONTIG_, ROUNDB = ROUNDB_, FLIP = FLIP_;
  static constexpr int MODE = MODE_, MINB = MINB_;
  // EPI: 0 = each thread stores its fragments directly; 1 = fragments are staged in shared memory, RCH output
  // channels at a time, and whole tile rows are stored coalesced (float2); 2 = no stores (diagnostic only);
  // 3 = the staged stores of EPI 1 without the MMA work (diagnostic: the store pattern's own time);
  // 4 = deferred: the whole tile is staged in shared memory and its coalesced stores are issued a few at a time
  //     between the k-steps of the next tile, so the output stream overlaps the MMAs.
  static constexpr int EPI = EPI_, RCH = RCH_;
  static constexpr bool STCS = STCS_;  // streaming (evict-first) stores
  static constexpr bool FG = FG_;      // GELU through gelu_fast (A&S erf) instead of erff
  static constexpr int NTHREADS = WM * WN * 32;
  static constexpr int MTOT = COUT / 16;
  static constexpr int BN = TH * TWP;
  static constexpr int TAPS = KH * KW;
  static constexpr int KCW = CKW * TAPS;
  static constexpr int KC = (KCW + 7) / 8 * 8;
  static constexpr int KSTEPS = KC / 8;
  static constexpr int NCHUNK = CW / CKW;
  static constexpr bool RESIDENT = (NCHUNK == 1);
  static constexpr int IH = (TH - 1) * S + KH;
  static constexpr int P4 = (P + 3) / 4 * 4;
  static constexpr int SHIFT = P4 - P;
  static constexpr int IWL = (SHIFT + (TWP - 1) * S + KW + 3) / 4 * 4;
  static constexpr int IWS = IWL;
  static constexpr int PLANE0 = IH * IWS;
  static constexpr int PLANE = PLANE0 + ((8 - PLANE0 % 32) + 32) % 32;  // == 8 (mod 32): conflict-free B loads
  static constexpr int PATCHW = CKW * PLANE;
  static constexpr int WCHUNKW = KC * COUT;
  static constexpr int TX = (OW + TWP - 1) / TWP, TY = (OH + TH - 1) / TH;
  static constexpr int NTILES = NB * TY * TX;
  static constexpr int SM_W = TAPFAST ? KC : 0;  // koff table first (TAPFAST only)
  static constexpr int SM_P = SM_W + (RESIDENT ? 1 : 2) * WCHUNKW;
  static constexpr int SM_S = SM_P + 2 * PATCHW;  // staging (EPI 1)
  static constexpr int LDS0 = BN;
  static constexpr int LDS = LDS0 + ((8 - LDS0 % 32) + 32) % 32;  // == 8 (mod 32): conflict-free float2 staging
  static constexpr int SM_WORDS = SM_S + ((EPI == 1 || EPI == 3) ? RCH * LDS : EPI == 4 ? COUT * LDS : 0);
  static constexpr size_t SMEM_BYTES = (size_t)SM_WORDS * 4;
  static constexpr size_t WPACK_WORDS = (size_t)NCHUNK * WCHUNKW;
  static constexpr int UNROLL = TAPFAST ? 2 : KSTEPS;  // tap-major offsets are compile-time only when unrolled
  static_assert(COUT % 16 == 0, "COUT");
  static_assert(WM * MT == MTOT, "warp M tiling");
  static_assert(WN * NT * 8 == BN, "warp N tiling");
  static_assert(TWP % 8 == 0, "TWP");
  static_assert(CW % CKW == 0, "chunks");
  static_assert(W % 4 == 0 && (TWP * S) % 4 == 0, "16-byte patch loads");
  static_assert(TAPFAST || CKW % 4 == 0, "tap-major K order needs CKW % 4 == 0");
  static_assert(SMEM_BYTES <= 232448, "shared memory");
  static_assert(MODE != MODE_GELU_STATS || COUT % 16 == 0, "stats");
  static_assert((EPI != 1 && EPI != 3 && EPI != 4) || (OW % 2 == 0 && TWP % 2 == 0 && RCH % 16 == 0 && COUT % RCH == 0), "staged epilogue");
  static_assert(EPI == 0 || MODE != MODE_GELU_MEAN, "EPI applies to stored outputs");
};

// ---------------------------------------------------------------- weight packing (per forward call)
// Output word e = ((chunk*KSTEPS + ks)*MTOT + m)*128 + lane*4 + r.
template <class C>
__global__ void pack_weights_kernel(const float* __restrict__ w, uint32_t* __restrict__ wp) {
  const size_t total = C::WPACK_WORDS;
  for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += (size_t)gridDim.x * blockDim.x) {
    int r = (int)(e & 3), lane = (int)((e >> 2) & 31);
    size_t rest = e >> 7;
    int m = (int)(rest % C::MTOT);
    rest /= C::MTOT;
    int ks = (int)(rest % C::KSTEPS);
    int ch = (int)(rest / C::KSTEPS);
    int g = lane >> 2, t = lane & 3;
    int co = m * 16 + g + (r & 1) * 8;
    int j = ks * 8 + t + (r >> 1) * 4;
    uint32_t val = 0u;
    if (j < C::KCW) {
      int wd, tap;
      if (C::TAPFAST) { wd = j / C::TAPS; tap = j % C::TAPS; }
      else { tap = j / C::CKW; wd = j % C::CKW; }
      int kh = tap / C::KW, kw = tap % C::KW;
      int ciw = ch * C::CKW + wd;
      constexpr int CIN = C::F16 ? 2 * C::CW : C::CW;
      auto wval = [&](int ci) -> float {
        if (C::FLIP)  // ConvTranspose2d weight [CIN][COUT][KH][KW], flipped: conv with padding K-1
          return w[(((size_t)ci * C::COUT + co) * C::KH + (C::KH - 1 - kh)) * C::KW + (C::KW - 1 - kw)];
        return w[(((size_t)co * CIN + ci) * C::KH + kh) * C::KW + kw];
      };
      if (C::F16) {
        __half2 h = __floats2half2_rn(wval(2 * ciw), wval(2 * ciw + 1));
        val = *reinterpret_cast<uint32_t*>(&h);
      } else {
        val = to_tf32(wval(ciw));
      }
    }
    wp[e] = val;
  }
}

// float32 NCHW -> half2 words [N][C/2][H*W] (channel 2c in the low half). Four pixels per thread.
__global__ void to_half2_kernel(const float4* __restrict__ x, uint4* __restrict__ xh, int C, int HW4, size_t total4) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total4; i += (size_t)gridDim.x * blockDim.x) {
    size_t pix = i % HW4;
    size_t rest = i / HW4;  // n*(C/2) + cp
    size_t cp = rest % (C / 2), n = rest / (C / 2);
    float4 a = __ldcs(&x[((n * C + 2 * cp) * HW4) + pix]);
    float4 b = __ldcs(&x[((n * C + 2 * cp + 1) * HW4) + pix]);
    __half2 h0 = __floats2half2_rn(a.x, b.x), h1 = __floats2half2_rn(a.y, b.y);
    __half2 h2 = __floats2half2_rn(a.z, b.z), h3 = __floats2half2_rn(a.w, b.w);
    uint4 o;
    o.x = *reinterpret_cast<uint32_t*>(&h0);
    o.y = *reinterpret_cast<uint32_t*>(&h1);
    o.z = *reinterpret_cast<uint32_t*>(&h2);
    o.w = *reinterpret_cast<uint32_t*>(&h3);
    xh[i] = o;
  }
}

// ---------------------------------------------------------------- the convolution kernel
template <class C>
__global__ void __launch_bounds__(C::NTHREADS, C::MINB)
conv_mma_kernel(const uint32_t* __restrict__ x, const uint32_t* __restrict__ wp, const float* __restrict__ bias,
                float* __restrict__ out, double* __restrict__ stats) {
  extern __shared__ __align__(16) uint32_t sm[];
  int* koff = reinterpret_cast<int*>(sm);
  uint32_t* sw = sm + C::SM_W;
  uint32_t* sp = sm + C::SM_P;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int wm = warp % C::WM, wn = warp / C::WM;

  if constexpr (C::TAPFAST) {
    for (int j = tid; j < C::KC; j += C::NTHREADS) {
      int o = 0;
      if (j < C::KCW) {
        int wd = j / C::TAPS, tap = j % C::TAPS;
        o = wd * C::PLANE + (tap / C::KW) * C::IWS + tap % C::KW;
      }
      koff[j] = o;
    }
  }
  int poff[C::NT];
#pragma unroll
  for (int ni = 0; ni < C::NT; ++ni) {
    int p = (wn * C::NT + ni) * 8 + g;
    int r = p / C::TWP, c = p % C::TWP;
    poff[ni] = r * C::S * C::IWS + c * C::S + C::SHIFT + (C::TAPFAST ? 0 : t * C::PLANE);
  }

  int t_begin, nmy;
  if (C::CONTIG) {
    t_begin = (int)((long long)blockIdx.x * C::NTILES / gridDim.x);
    nmy = (int)((long long)(blockIdx.x + 1) * C::NTILES / gridDim.x) - t_begin;
  } else {
    t_begin = blockIdx.x;
    nmy = blockIdx.x < C::NTILES ? (C::NTILES - 1 - blockIdx.x) / gridDim.x + 1 : 0;
  }
  const int nsteps = nmy * C::NCHUNK;
  if (nsteps == 0) return;
  auto tile_of = [&](int i) { return C::CONTIG ? t_begin + i : t_begin + i * (int)gridDim.x; };

  auto load_step = [&](int s, int stage) {
    const int i = s / C::NCHUNK, ch = s % C::NCHUNK;
    const int tile = tile_of(i);
    const int tx = tile % C::TX, ty = (tile / C::TX) % C::TY, n = tile / (C::TX * C::TY);
    const int r0 = ty * C::TH * C::S - C::P, c0 = tx * C::TWP * C::S - C::P4;
    const uint32_t* xb = x + (size_t)(n * C::CW + ch * C::CKW) * C::H * C::W;
    uint32_t* dst = sp + stage * C::PATCHW;
    constexpr int QW = C::IWL / 4;
    constexpr int NCOPY = C::CKW * C::IH * QW;
    for (int idx = tid; idx < NCOPY; idx += C::NTHREADS) {
      const int q = idx % QW, rest = idx / QW, i2 = rest % C::IH, wd = rest / C::IH;
      const int row = r0 + i2, col = c0 + 4 * q;
      const bool valid = (row >= 0) && (row < C::H) && (col >= 0) && (col < C::W);
      const uint32_t* src = valid ? xb + ((size_t)wd * C::H + row) * C::W + col : x;
      cp_async16(smem_u32(dst + wd * C::PLANE + i2 * C::IWS + 4 * q), src, valid);
    }
    if constexpr (!C::RESIDENT) {
      const uint32_t* wsrc = wp + (size_t)ch * C::WCHUNKW;
      uint32_t* wdst = sw + stage * C::WCHUNKW;
      for (int idx = tid; idx < C::WCHUNKW / 4; idx += C::NTHREADS)
        cp_async16(smem_u32(wdst + 4 * idx), wsrc + 4 * idx, true);
    }
  };

  if constexpr (C::RESIDENT) {
    for (int idx = tid; idx < C::WCHUNKW / 4; idx += C::NTHREADS) cp_async16(smem_u32(sw + 4 * idx), wp + 4 * idx, true);
  }
  load_step(0, 0);
  cp_async_commit();

  float acc[C::MT][C::NT][4];
#pragma unroll
  for (int mi = 0; mi < C::MT; ++mi)
#pragma unroll
    for (int ni = 0; ni < C::NT; ++ni)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mi][ni][e] = 0.f;

  // MODE_GELU_MEAN: per-thread running sums for channels (g, g+8) of each m-tile, for image cur_n.
  float psum[C::MT][2];
#pragma unroll
  for (int mi = 0; mi < C::MT; ++mi) psum[mi][0] = psum[mi][1] = 0.f;
  int cur_n = -1;
  auto flush_mean = [&](int n) {
#pragma unroll
    for (int mi = 0; mi < C::MT; ++mi)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float v = psum[mi][h];
        v += __shfl_xor_sync(0xffffffffu, v, 1);
        v += __shfl_xor_sync(0xffffffffu, v, 2);
        if (t == 0) atomicAdd(&out[n * C::COUT + (wm * C::MT + mi) * 16 + g + 8 * h], v * (1.0f / (C::OH * C::OW)));
        psum[mi][h] = 0.f;
      }
  };

  const uint32_t* wlane = sw + ((wm * C::MT) * 32 + lane) * 4;

  // EPI 4 (deferred stores): the previous tile's output waits in shared memory; thread tid owns store slots
  // tid + i*NTHREADS (i < DPER), DSTEP of which it issues after each k-step of the next tile.
  constexpr int DHALF = C::TWP / 2, DTOT = C::COUT * C::TH * DHALF;
  constexpr int DPER = (DTOT + C::NTHREADS - 1) / C::NTHREADS;
  constexpr int DKS = C::NCHUNK * C::KSTEPS;
  constexpr int DSTEP = (DPER + DKS - 1) / DKS;
  int pend_n = -1, pend_oh0 = 0, pend_ow0 = 0;
  auto deferred_store = [&](int slot) {
    const int idx = tid + slot * C::NTHREADS;
    if (slot < DPER && idx < DTOT) {
      const int q = idx % DHALF, rest = idx / DHALF, r2 = rest % C::TH, c = rest / C::TH;
      const int oh = pend_oh0 + r2, ow = pend_ow0 + 2 * q;
      if (oh < C::OH && ow < C::OW) {
        const float2 v = *reinterpret_cast<const float2*>(
            reinterpret_cast<const float*>(sm + C::SM_S) + c * C::LDS + r2 * C::TWP + 2 * q);
        st2<C::STCS>(out + ((size_t)(pend_n * C::COUT + c) * C::OH + oh) * C::OW + ow, v.x, v.y);
      }
    }
  };

  for (int s = 0; s < nsteps; ++s) {
    if (s + 1 < nsteps) load_step(s + 1, (s + 1) & 1);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();

    const uint32_t* Pt = sp + (s & 1) * C::PATCHW;
    const uint32_t* Wt = wlane + (C::RESIDENT ? 0 : (s & 1) * C::WCHUNKW);
#pragma unroll(C::UNROLL)
    for (int ks = 0; ks < (C::EPI == 3 ? 0 : C::KSTEPS); ++ks) {
      int off0, off1;
      if constexpr (C::TAPFAST) {
        off0 = koff[ks * 8 + t];
        off1 = koff[ks * 8 + t + 4];
      } else {
        const int j0 = ks * 8, j1 = ks * 8 + 4;
        const int tap0 = j0 / C::CKW, w0 = j0 % C::CKW, tap1 = j1 / C::CKW, w1 = j1 % C::CKW;
        off0 = j0 < C::KCW ? w0 * C::PLANE + (tap0 / C::KW) * C::IWS + tap0 % C::KW : 0;
        off1 = j1 < C::KCW ? w1 * C::PLANE + (tap1 / C::KW) * C::IWS + tap1 % C::KW : 0;
      }
      uint32_t b[C::NT][2];
#pragma unroll
      for (int ni = 0; ni < C::NT; ++ni) {
        uint32_t v0 = Pt[poff[ni] + off0], v1 = Pt[poff[ni] + off1];
        if constexpr (C::ROUNDB) {
          v0 = to_tf32(__uint_as_float(v0));
          v1 = to_tf32(__uint_as_float(v1));
        }
        b[ni][0] = v0;
        b[ni][1] = v1;
      }
#pragma unroll
      for (int mi = 0; mi < C::MT; ++mi) {
        const uint4 a = *reinterpret_cast<const uint4*>(Wt + (ks * C::MTOT + mi) * 128);
#pragma unroll
        for (int ni = 0; ni < C::NT; ++ni) mma<C::F16>(acc[mi][ni], a, b[ni][0], b[ni][1]);
      }
      if constexpr (C::EPI == 4) {
        if (pend_n >= 0) {
          const int kidx = (s % C::NCHUNK) * C::KSTEPS + ks;
#pragma unroll
          for (int d = 0; d < DSTEP; ++d) deferred_store(kidx * DSTEP + d);
        }
      }
    }

    if (s % C::NCHUNK == C::NCHUNK - 1) {
      const int tile = tile_of(s / C::NCHUNK);
      const int tx = tile % C::TX, ty = (tile / C::TX) % C::TY, n = tile / (C::TX * C::TY);
      const int oh0 = ty * C::TH, ow0 = tx * C::TWP;
      if constexpr (C::MODE == MODE_GELU_MEAN) {
        if (n != cur_n) {
          if (cur_n >= 0) flush_mean(cur_n);
          cur_n = n;
        }
      }
#pragma unroll
      for (int mi = 0; mi < C::MT; ++mi) {
        const int co = (wm * C::MT + mi) * 16 + g;
        const float bA = bias ? __ldg(&bias[co]) : 0.f, bB = bias ? __ldg(&bias[co + 8]) : 0.f;
        float sA = 0.f, qA = 0.f, sB = 0.f, qB = 0.f;
#pragma unroll
        for (int ni = 0; ni < C::NT; ++ni) {
          const int p = (wn * C::NT + ni) * 8 + 2 * t;
          const int oh = oh0 + p / C::TWP, ow = ow0 + p % C::TWP;
          float v0 = acc[mi][ni][0] + bA, v1 = acc[mi][ni][1] + bA;
          float v2 = acc[mi][ni][2] + bB, v3 = acc[mi][ni][3] + bB;
          const bool ok0 = oh < C::OH && ow < C::OW, ok1 = oh < C::OH && ow + 1 < C::OW;
          if constexpr (C::MODE != MODE_STORE) {
            v0 = gelu<C::FG>(v0); v1 = gelu<C::FG>(v1); v2 = gelu<C::FG>(v2); v3 = gelu<C::FG>(v3);
          }
          if constexpr (C::MODE == MODE_GELU_MEAN) {
            psum[mi][0] += (ok0 ? v0 : 0.f) + (ok1 ? v1 : 0.f);
            psum[mi][1] += (ok0 ? v2 : 0.f) + (ok1 ? v3 : 0.f);
          } else {
            if constexpr (C::MODE == MODE_GELU_STATS) {
              if (ok0) { sA += v0; qA += v0 * v0; sB += v2; qB += v2 * v2; }
              if (ok1) { sA += v1; qA += v1 * v1; sB += v3; qB += v3 * v3; }
            }
            if constexpr (C::EPI == 0) {
              float* oA = out + ((size_t)(n * C::COUT + co) * C::OH + oh) * C::OW + ow;
              float* oB = oA + (size_t)8 * C::OH * C::OW;
              if constexpr (C::OW % 2 == 0) {
                if (ok0) { st2<C::STCS>(oA, v0, v1); st2<C::STCS>(oB, v2, v3); }
              } else {
                if (ok0) { st1<C::STCS>(oA, v0); st1<C::STCS>(oB, v2); }
                if (ok1) { st1<C::STCS>(oA + 1, v1); st1<C::STCS>(oB + 1, v3); }
              }
              acc[mi][ni][0] = acc[mi][ni][1] = acc[mi][ni][2] = acc[mi][ni][3] = 0.f;
            } else {  // keep the final values for the staged / diagnostic epilogue
              acc[mi][ni][0] = v0; acc[mi][ni][1] = v1; acc[mi][ni][2] = v2; acc[mi][ni][3] = v3;
            }
          }
          if constexpr (C::MODE == MODE_GELU_MEAN) {
            acc[mi][ni][0] = acc[mi][ni][1] = acc[mi][ni][2] = acc[mi][ni][3] = 0.f;
          }
        }
        if constexpr (C::MODE == MODE_GELU_STATS) {
          // groups of 8 channels: rows g -> group 2*mtile, rows g+8 -> group 2*mtile+1
#pragma unroll
          for (int o = 1; o < 32; o <<= 1) {
            sA += __shfl_xor_sync(0xffffffffu, sA, o);
            qA += __shfl_xor_sync(0xffffffffu, qA, o);
            sB += __shfl_xor_sync(0xffffffffu, sB, o);
            qB += __shfl_xor_sync(0xffffffffu, qB, o);
          }
          if (lane == 0) {
            const int grp = ((wm * C::MT + mi) * 16) / 8;
            double* st = stats + ((size_t)n * (C::COUT / 8) + grp) * 2;
            atomicAdd(st + 0, (double)sA);
            atomicAdd(st + 1, (double)qA);
            atomicAdd(st + 2, (double)sB);
            atomicAdd(st + 3, (double)qB);
          }
        }
      }
      if constexpr (C::MODE != MODE_GELU_MEAN && (C::EPI == 1 || C::EPI == 3)) {
        // staged: RCH channels per round; fragments -> smem -> whole tile rows, consecutive lanes consecutive float2
        float* stg = reinterpret_cast<float*>(sm + C::SM_S);
        constexpr int MPR = C::RCH / 16, ROUNDS = C::MTOT / MPR, HALF = C::TWP / 2;
        constexpr int TOT = C::RCH * C::TH * HALF;
#pragma unroll 1
        for (int r = 0; r < ROUNDS; ++r) {
#pragma unroll
          for (int mi = 0; mi < C::MT; ++mi) {
            const int M = wm * C::MT + mi;
            if (M / MPR == r) {
              const int lr = (M % MPR) * 16 + g;
#pragma unroll
              for (int ni = 0; ni < C::NT; ++ni) {
                const int p = (wn * C::NT + ni) * 8 + 2 * t;
                *reinterpret_cast<float2*>(&stg[lr * C::LDS + p]) = make_float2(acc[mi][ni][0], acc[mi][ni][1]);
                *reinterpret_cast<float2*>(&stg[(lr + 8) * C::LDS + p]) = make_float2(acc[mi][ni][2], acc[mi][ni][3]);
              }
            }
          }
          __syncthreads();
          for (int idx = tid; idx < TOT; idx += C::NTHREADS) {
            const int q = idx % HALF, rest = idx / HALF, r2 = rest % C::TH, c = rest / C::TH;
            const int oh = oh0 + r2, ow = ow0 + 2 * q;
            if (oh < C::OH && ow < C::OW) {
              const float2 v = *reinterpret_cast<const float2*>(&stg[c * C::LDS + r2 * C::TWP + 2 * q]);
              st2<C::STCS>(out + ((size_t)(n * C::COUT + r * C::RCH + c) * C::OH + oh) * C::OW + ow, v.x, v.y);
            }
          }
          __syncthreads();
        }
      }
      if constexpr (C::MODE != MODE_GELU_MEAN && C::EPI == 4) {
        __syncthreads();  // every deferred store of the previous tile has read the staging buffer
        float* stg = reinterpret_cast<float*>(sm + C::SM_S);
#pragma unroll
        for (int mi = 0; mi < C::MT; ++mi) {
          const int lr = (wm * C::MT + mi) * 16 + g;
#pragma unroll
          for (int ni = 0; ni < C::NT; ++ni) {
            const int p = (wn * C::NT + ni) * 8 + 2 * t;
            *reinterpret_cast<float2*>(&stg[lr * C::LDS + p]) = make_float2(acc[mi][ni][0], acc[mi][ni][1]);
            *reinterpret_cast<float2*>(&stg[(lr + 8) * C::LDS + p]) = make_float2(acc[mi][ni][2], acc[mi][ni][3]);
          }
        }
        pend_n = n; pend_oh0 = oh0; pend_ow0 = ow0;  // stored during the next tile (the loop's barrier follows)
      }
      if constexpr (C::MODE != MODE_GELU_MEAN && C::EPI != 0) {
        float sum = 0.f;
#pragma unroll
        for (int mi = 0; mi < C::MT; ++mi)
#pragma unroll
          for (int ni = 0; ni < C::NT; ++ni)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              sum += acc[mi][ni][e];
              acc[mi][ni][e] = 0.f;
            }
        if (C::EPI == 2 && sum == -1234.5f) out[tid] = sum;  // diagnostic: keeps the compute alive, stores nothing
      }
    }
    __syncthreads();
  }
  if constexpr (C::MODE == MODE_GELU_MEAN) {
    if (cur_n >= 0) flush_mean(cur_n);
  }
  if constexpr (C::EPI == 4) {
    if (pend_n >= 0)
      for (int slot = 0; slot < DPER; ++slot) deferred_store(slot);
  }
}

// ---------------------------------------------------------------- GroupNorm helpers
// stats[(n*G + grp)*2 + {0,1}] = sum, sum of squares (double). Optional GELU applied to y first.
template <bool GELU>
__global__ void gn_stats_kernel(const float4* __restrict__ y, double* __restrict__ stats, int groupVec) {
  const int ng = blockIdx.y;
  const float4* base = y + (size_t)ng * groupVec;
  float s = 0.f, q = 0.f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < groupVec; i += gridDim.x * blockDim.x) {
    float4 v = __ldg(&base[i]);
    if (GELU) { v.x = gelu_erf(v.x); v.y = gelu_erf(v.y); v.z = gelu_erf(v.z); v.w = gelu_erf(v.w); }
    s += (v.x + v.y) + (v.z + v.w);
    q += (v.x * v.x + v.y * v.y) + (v.z * v.z + v.w * v.w);
  }
  __shared__ float rs[32], rq[32];
  for (int o = 16; o > 0; o >>= 1) {
    s += __shfl_xor_sync(0xffffffffu, s, o);
    q += __shfl_xor_sync(0xffffffffu, q, o);
  }
  const int w = threadIdx.x >> 5, l = threadIdx.x & 31;
  if (l == 0) { rs[w] = s; rq[w] = q; }
  __syncthreads();
  if (w == 0) {
    const int nw = blockDim.x >> 5;
    s = l < nw ? rs[l] : 0.f;
    q = l < nw ? rq[l] : 0.f;
    for (int o = 16; o > 0; o >>= 1) {
      s += __shfl_xor_sync(0xffffffffu, s, o);
      q += __shfl_xor_sync(0xffffffffu, q, o);
    }
    if (l == 0) {
      atomicAdd(&stats[2 * ng], (double)s);
      atomicAdd(&stats[2 * ng + 1], (double)q);
    }
  }
}

// out = (gelu?(y) - mean) * rstd * gamma[c] + beta[c]; groups are contiguous (NCHW, channels of a group adjacent).
template <bool GELU>
__global__ void gn_apply_kernel(const float4* __restrict__ y, float4* __restrict__ out, const double* __restrict__ stats,
                                const float* __restrict__ gamma, const float* __restrict__ beta, int G, int CPG,
                                int HW4, float eps) {
  const int ng = blockIdx.y, grp = ng % G;
  const int groupVec = CPG * HW4;
  const double cnt = (double)groupVec * 4.0;
  const double mean_d = stats[2 * ng] / cnt;
  const double var_d = fmax(stats[2 * ng + 1] / cnt - mean_d * mean_d, 0.0);
  const float mean = (float)mean_d, rstd = (float)(1.0 / sqrt(var_d + (double)eps));
  const float4* src = y + (size_t)ng * groupVec;
  float4* dst = out + (size_t)ng * groupVec;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < groupVec; i += gridDim.x * blockDim.x) {
    const int c = grp * CPG + i / HW4;
    const float a = rstd * __ldg(&gamma[c]);
    const float b = __ldg(&beta[c]) - mean * a;
    float4 v = __ldcs(&src[i]);
    if (GELU) { v.x = gelu_erf(v.x); v.y = gelu_erf(v.y); v.z = gelu_erf(v.z); v.w = gelu_erf(v.w); }
    v.x = v.x * a + b; v.y = v.y * a + b; v.z = v.z * a + b; v.w = v.w * a + b;
    __stcs(&dst[i], v);
  }
}

// ---------------------------------------------------------------- host side
inline int num_sms() {
  static int n = 0;
  if (!n) {
    int dev = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev);
  }
  return n;
}

template <class C>
cudaError_t launch_conv(const uint32_t* x, const uint32_t* wp, const float* bias, float* out, double* stats,
                        cudaStream_t st) {
  static int grid = 0;
  if (!grid) {
    cudaError_t e = cudaFuncSetAttribute(conv_mma_kernel<C>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)C::SMEM_BYTES);
    if (e != cudaSuccess) return e;
    int per_sm = 0;
    e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, conv_mma_kernel<C>, C::NTHREADS, C::SMEM_BYTES);
    if (e != cudaSuccess) return e;
    if (per_sm < 1) return cudaErrorInvalidConfiguration;
    grid = per_sm * num_sms();
    if (grid > C::NTILES) grid = C::NTILES;
  }
  conv_mma_kernel<C><<<grid, C::NTHREADS, C::SMEM_BYTES, st>>>(x, wp, bias, out, stats);
  return cudaGetLastError();
}

template <class C>
cudaError_t launch_pack(const float* w, uint32_t* wp, cudaStream_t st) {
  int blocks = (int)((C::WPACK_WORDS + 255) / 256);
  if (blocks > 1024) blocks = 1024;
  pack_weights_kernel<C><<<blocks, 256, 0, st>>>(w, wp);
  return cudaGetLastError();
}

}  // namespace ck
namespace sol {
#ifndef SOL_EPI
#define SOL_EPI 0
#endif
#ifndef SOL_FG
#define SOL_FG false
#endif
#if !defined(SOL_TWOBLOCKS) && !defined(SOL_DEFER1)
using C = ck::Cfg<128, 64, 256, 256, 3, 3, 1, 2, 64, /*TH*/ 4, /*TWP*/ 88, /*WM*/ 2, /*WN*/ 4, /*MT*/ 2, /*NT*/ 11,
                  /*CKW*/ 16, /*TAPFAST*/ false, /*F16*/ false, ck::MODE_GELU_STATS, /*CONTIG*/ false, /*MINB*/ 1,
                  /*ROUNDB*/ false, /*FLIP*/ true, /*EPI*/ SOL_EPI, /*RCH*/ 32>;
#elif defined(SOL_DEFER1)  // one block per SM, K chunks of 8 channels, deferred epilogue
using C = ck::Cfg<128, 64, 256, 256, 3, 3, 1, 2, 64, /*TH*/ 4, /*TWP*/ 88, /*WM*/ 2, /*WN*/ 4, /*MT*/ 2, /*NT*/ 11,
                  /*CKW*/ 8, /*TAPFAST*/ false, /*F16*/ false, ck::MODE_GELU_STATS, /*CONTIG*/ false, /*MINB*/ 1,
                  /*ROUNDB*/ false, /*FLIP*/ true, /*EPI*/ 4, /*RCH*/ 32>;
#else  // two blocks per SM: 2 rows x 88 px tiles, 4 warps, K in chunks of 8 channels
using C = ck::Cfg<128, 64, 256, 256, 3, 3, 1, 2, 64, /*TH*/ 2, /*TWP*/ 88, /*WM*/ 2, /*WN*/ 2, /*MT*/ 2, /*NT*/ 11,
                  /*CKW*/ 8, /*TAPFAST*/ false, /*F16*/ false, ck::MODE_GELU_STATS, /*CONTIG*/ false, /*MINB*/ 2,
                  /*ROUNDB*/ false, /*FLIP*/ true, /*EPI*/ SOL_EPI, /*RCH*/ 16, /*STCS*/ true, /*FG*/ SOL_FG>;
#endif
static const long long IN_SHAPE[4] = {128, 64, 256, 256};
static const long long OUT_SHAPE[4] = {128, 64, 258, 258};
static const int OUT_NDIM = 4;
static const bool IN_PLACE = false;
static const int G = 8;
inline size_t ws_bytes() { return C::WPACK_WORDS * 4 + (size_t)128 * G * 2 * 8; }
inline cudaError_t launch(const float* x, const float* w, const float* b, const float* gamma, const float* beta,
                          float* out, void* ws, cudaStream_t st) {
  uint32_t* wp = static_cast<uint32_t*>(ws);
  double* stats = reinterpret_cast<double*>(wp + C::WPACK_WORDS);  // WPACK_WORDS even: 8-byte aligned
  cudaError_t e = cudaMemsetAsync(stats, 0, (size_t)128 * G * 2 * 8, st);
  if (e != cudaSuccess) return e;
  e = ck::launch_pack<C>(w, wp, st);
  if (e != cudaSuccess) return e;
  e = ck::launch_conv<C>(reinterpret_cast<const uint32_t*>(x), wp, b, out, stats, st);
  if (e != cudaSuccess) return e;
  const int HW4 = 258 * 258 / 4;
  ck::gn_apply_kernel<false><<<dim3(64, 128 * G), 256, 0, st>>>(reinterpret_cast<const float4*>(out),
                                                                 reinterpret_cast<float4*>(out), stats, gamma, beta,
                                                                 G, 64 / G, HW4, 1e-5f);
  return cudaGetLastError();
}
}  // namespace sol

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

static const float* opt_ptr(const torch::Tensor& t, const char* name) {
  if (t.numel() == 0) return nullptr;
  TORCH_CHECK(t.is_cuda() && t.scalar_type() == at::kFloat && t.is_contiguous(), name,
              " must be a contiguous float32 CUDA tensor");
  return t.data_ptr<float>();
}

torch::Tensor forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, torch::Tensor gamma, torch::Tensor beta) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == at::kFloat, "x must be a float32 CUDA tensor");
  TORCH_CHECK(x.dim() == 4, "x must be 4-D");
  for (int i = 0; i < 4; ++i)
    TORCH_CHECK(x.size(i) == sol::IN_SHAPE[i], "these kernels are specialised to the problem's input shape; dim ", i,
                " is ", x.size(i), ", expected ", sol::IN_SHAPE[i]);
  const c10::cuda::CUDAGuard guard(x.device());
  if (!x.is_contiguous()) x = x.contiguous();
  w = w.contiguous(); b = b.contiguous(); gamma = gamma.contiguous(); beta = beta.contiguous();
  std::vector<int64_t> shape(sol::OUT_SHAPE, sol::OUT_SHAPE + sol::OUT_NDIM);
  torch::Tensor out = sol::IN_PLACE ? x : torch::empty(shape, x.options());
  torch::Tensor ws = torch::empty({(int64_t)sol::ws_bytes()}, x.options().dtype(at::kByte));
  cudaError_t e = sol::launch(x.data_ptr<float>(), opt_ptr(w, "w"), opt_ptr(b, "bias"), opt_ptr(gamma, "gamma"),
                              opt_ptr(beta, "beta"), out.data_ptr<float>(), ws.data_ptr(),
                              c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(e == cudaSuccess, "kernel launch failed: ", cudaGetErrorString(e));
  return out;
}
"""

CPP_SRC = "torch::Tensor forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, torch::Tensor gamma, torch::Tensor beta);"

_ext = load_inline(name="evalkit_curated_convT19_tf32_2b", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC, functions=["forward"],
                   extra_cuda_cflags=["-O3"], verbose=False)

class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, groups, num_groups):
        super().__init__()
        if (in_channels, out_channels, kernel_size, stride, num_groups) != (64, 64, 3, 1, 8):
            raise ValueError("this solution is specialised to ConvTranspose2d(64, 64, 3, stride=1), GroupNorm(8, 64)")
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride)
        self.group_norm = nn.GroupNorm(num_groups=num_groups, num_channels=out_channels)

    def forward(self, x):
        with torch.no_grad():
            assert self.group_norm.eps == 1e-5
            return _ext.forward(x, self.conv_transpose.weight, self.conv_transpose.bias, self.group_norm.weight,
                                self.group_norm.bias)
