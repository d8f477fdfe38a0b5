// problem conv2d_asymmetric_input_asymmetric_kernel: Conv2d 64->128, 5x7, (8,64,512,256) -> (8,128,508,250)
// FP16 operands (input converted to half2 channel pairs by a first pass), FP32 accumulation, m16n8k16.
// K streamed in chunks of 4 channel words (8 channels) x 35 taps (padded to 36), weights and patch double-buffered.
#include "common.cuh"
namespace sol {
#ifndef SOL_EPI
#define SOL_EPI 0
#endif
using C = ck::Cfg<8, 32, 512, 256, 5, 7, 1, 0, 128, /*TH*/ 2, /*TWP*/ 128, /*WM*/ 2, /*WN*/ 4, /*MT*/ 4, /*NT*/ 8,
                  /*CKW*/ 4, /*TAPFAST*/ false, /*F16*/ true, ck::MODE_STORE, /*CONTIG*/ false, /*MINB*/ 1,
                  /*ROUNDB*/ false, /*FLIP*/ false, /*EPI*/ SOL_EPI, /*RCH*/ 32>;
static const long long IN_SHAPE[4] = {8, 64, 512, 256};
static const long long OUT_SHAPE[4] = {8, 128, 508, 250};
static const int OUT_NDIM = 4;
static const bool IN_PLACE = false;
static const size_t XH_WORDS = (size_t)8 * 32 * 512 * 256;
inline size_t ws_bytes() { return C::WPACK_WORDS * 4 + XH_WORDS * 4; }
inline cudaError_t launch(const float* x, const float* w, const float* b, const float*, const float*, float* out,
                          void* ws, cudaStream_t st) {
  uint32_t* wp = static_cast<uint32_t*>(ws);
  uint32_t* xh = wp + C::WPACK_WORDS;  // WPACK_WORDS is a multiple of 4: 16-byte aligned
  cudaError_t e = ck::launch_pack<C>(w, wp, st);
  if (e != cudaSuccess) return e;
  const size_t total4 = XH_WORDS / 4;
  ck::to_half2_kernel<<<132 * 8, 256, 0, st>>>(reinterpret_cast<const float4*>(x), reinterpret_cast<uint4*>(xh), 64,
                                                 512 * 256 / 4, total4);
  e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  return ck::launch_conv<C>(xh, wp, b, out, nullptr, st);
}
}  // namespace sol
