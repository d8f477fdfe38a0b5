// problem alexnet_conv1: Conv2d 3->96, 11x11, stride 4, padding 2 (+bias); (256,3,224,224) -> (256,96,55,55).
// TF32 implicit GEMM, K = 3*121 = 363 (padded to 368) with taps fastest; all weights resident in shared memory;
// tile 2 output rows x 56 columns, 6 warps of 32ch x 56px.
#include "common.cuh"
namespace sol {
using C = ck::Cfg<256, 3, 224, 224, 11, 11, 4, 2, 96, /*TH*/ 2, /*TWP*/ 56, /*WM*/ 3, /*WN*/ 2, /*MT*/ 2, /*NT*/ 7,
                  /*CKW*/ 3, /*TAPFAST*/ true, /*F16*/ false, ck::MODE_STORE, /*CONTIG*/ false, /*MINB*/ 1>;
static const long long IN_SHAPE[4] = {256, 3, 224, 224};
static const long long OUT_SHAPE[4] = {256, 96, 55, 55};
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
