// problem conv2d_square_input_square_kernel: Conv2d 16->128, 3x3, (16,16,1024,1024) -> (16,128,1022,1022)
// TF32 implicit GEMM; all weights resident in shared memory; tile 1 row x 256 columns, 8 warps of 64ch x 64px.
#include "common.cuh"
namespace sol {
#ifndef SOL_ROUNDB
#define SOL_ROUNDB false
#endif
#ifndef SOL_EPI
#define SOL_EPI 0
#endif
#ifndef SOL_STCS
#define SOL_STCS true
#endif
#ifndef SOL_CONTIG
#define SOL_CONTIG false
#endif
#if !defined(SOL_TWOBLOCKS) && !defined(SOL_DEFER)
using C = ck::Cfg<16, 16, 1024, 1024, 3, 3, 1, 0, 128, /*TH*/ 1, /*TWP*/ 256, /*WM*/ 2, /*WN*/ 4, /*MT*/ 4, /*NT*/ 8,
                  /*CKW*/ 16, /*TAPFAST*/ false, /*F16*/ false, ck::MODE_STORE, /*CONTIG*/ SOL_CONTIG, /*MINB*/ 1, SOL_ROUNDB,
                  /*FLIP*/ false, /*EPI*/ SOL_EPI, /*RCH*/ 32, SOL_STCS>;
#elif defined(SOL_DEFER)  // 128 px tiles, the whole tile staged and stored during the next tile's MMAs
using C = ck::Cfg<16, 16, 1024, 1024, 3, 3, 1, 0, 128, /*TH*/ 1, /*TWP*/ 128, /*WM*/ 2, /*WN*/ 4, /*MT*/ 4, /*NT*/ 4,
                  /*CKW*/ 16, /*TAPFAST*/ false, /*F16*/ false, ck::MODE_STORE, /*CONTIG*/ false, /*MINB*/ 1, SOL_ROUNDB,
                  /*FLIP*/ false, /*EPI*/ 4, /*RCH*/ 32, SOL_STCS>;
#else  // two blocks per SM: 128 px tiles, 4 warps, weights streamed in two K chunks of 8 channels
using C = ck::Cfg<16, 16, 1024, 1024, 3, 3, 1, 0, 128, /*TH*/ 1, /*TWP*/ 128, /*WM*/ 2, /*WN*/ 2, /*MT*/ 4, /*NT*/ 8,
                  /*CKW*/ 8, /*TAPFAST*/ false, /*F16*/ false, ck::MODE_STORE, /*CONTIG*/ false, /*MINB*/ 2, SOL_ROUNDB,
                  /*FLIP*/ false, /*EPI*/ SOL_EPI, /*RCH*/ 16, SOL_STCS>;
#endif
static const long long IN_SHAPE[4] = {16, 16, 1024, 1024};
static const long long OUT_SHAPE[4] = {16, 128, 1022, 1022};
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
