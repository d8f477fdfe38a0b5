// problem conv2d_asymmetric_input_asymmetric_kernel, TF32 operands (m16n8k8), same tiling as conv56_f16.
#include "common.cuh"
namespace sol {
#ifndef SOL_EPI
#define SOL_EPI 0
#endif
using C = ck::Cfg<8, 64, 512, 256, 5, 7, 1, 0, 128, /*TH*/ 2, /*TWP*/ 128, /*WM*/ 2, /*WN*/ 4, /*MT*/ 4, /*NT*/ 8,
                  /*CKW*/ 4, /*TAPFAST*/ false, /*F16*/ false, ck::MODE_STORE, /*CONTIG*/ false, /*MINB*/ 1,
                  /*ROUNDB*/ false, /*FLIP*/ false, /*EPI*/ SOL_EPI, /*RCH*/ 32>;
static const long long IN_SHAPE[4] = {8, 64, 512, 256};
static const long long OUT_SHAPE[4] = {8, 128, 508, 250};
static const int OUT_NDIM = 4;
static const bool IN_PLACE = false;
inline size_t ws_bytes() { return C::WPACK_WORDS * 4; }
inline cudaError_t launch(const float* x, const float* w, const float* b, const float*, const float*, float* out,
                          void* ws, cudaStream_t st) {
  uint32_t* wp = static_cast<uint32_t*>(ws);
  cudaError_t e = ck::launch_pack<C>(w, wp, st);
  if (e != cudaSuccess) return e;
  return ck::launch_conv<C>(reinterpret_cast<const uint32_t*>(x), wp, b, out, nullptr, st);
}
}  // namespace sol
