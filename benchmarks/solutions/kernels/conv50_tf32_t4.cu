// problem alexnet_conv1, variant: weights streamed per input channel (K chunk = 121 taps padded to 128),
// tile 4 output rows x 56 columns, 8 warps of 48ch x 56px.
#include "common.cuh"
namespace sol {
using C = ck::Cfg<256, 3, 224, 224, 11, 11, 4, 2, 96, /*TH*/ 4, /*TWP*/ 56, /*WM*/ 2, /*WN*/ 4, /*MT*/ 3, /*NT*/ 7,
                  /*CKW*/ 1, /*TAPFAST*/ true, /*F16*/ false, ck::MODE_STORE, /*CONTIG*/ false, /*MINB*/ 1>;
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
