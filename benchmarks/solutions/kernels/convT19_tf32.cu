// problem convtranspose2d_gelu_groupnorm: ConvTranspose2d 64->64, k3, s1 (= Conv2d on flipped weights, padding 2)
// -> GELU -> GroupNorm(8). (128,64,256,256) -> (128,64,258,258).
// Pass 1: TF32 implicit GEMM whose epilogue adds the bias, applies GELU, writes y and accumulates per-(image, group)
// sum and sum of squares (double atomics). Pass 2: normalize y in place with gamma/beta.
#include "common.cuh"
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
