// problem conv2d_square_input_square_kernel, FP16 operands variant: the input is converted to half2 channel pairs
// first (one pass: 1.07 GB read, 0.54 GB written), then m16n8k16 with all weights resident; staged epilogue.
#include "common.cuh"
namespace sol {
#ifndef SOL_DEFER
using C = ck::Cfg<16, 8, 1024, 1024, 3, 3, 1, 0, 128, /*TH*/ 1, /*TWP*/ 256, /*WM*/ 2, /*WN*/ 4, /*MT*/ 4, /*NT*/ 8,
                  /*CKW*/ 8, /*TAPFAST*/ false, /*F16*/ true, ck::MODE_STORE, /*CONTIG*/ false, /*MINB*/ 1,
                  /*ROUNDB*/ false, /*FLIP*/ false, /*EPI*/ 1, /*RCH*/ 32>;
#else  // 128 px tiles, deferred epilogue (the tile is stored during the next tile's MMAs), plain stores
using C = ck::Cfg<16, 8, 1024, 1024, 3, 3, 1, 0, 128, /*TH*/ 1, /*TWP*/ 128, /*WM*/ 2, /*WN*/ 4, /*MT*/ 4, /*NT*/ 4,
                  /*CKW*/ 8, /*TAPFAST*/ false, /*F16*/ true, ck::MODE_STORE, /*CONTIG*/ false, /*MINB*/ 1,
                  /*ROUNDB*/ false, /*FLIP*/ false, /*EPI*/ 4, /*RCH*/ 32, /*STCS*/ false>;
#endif
static const long long IN_SHAPE[4] = {16, 16, 1024, 1024};
static const long long OUT_SHAPE[4] = {16, 128, 1022, 1022};
static const int OUT_NDIM = 4;
static const bool IN_PLACE = false;
static const size_t XH_WORDS = (size_t)16 * 8 * 1024 * 1024;
inline size_t ws_bytes() { return C::WPACK_WORDS * 4 + XH_WORDS * 4; }
inline cudaError_t launch(const float* x, const float* w, const float* b, const float*, const float*, float* out,
                          void* ws, cudaStream_t st) {
  uint32_t* wp = static_cast<uint32_t*>(ws);
  uint32_t* xh = wp + C::WPACK_WORDS;
  cudaError_t e = ck::launch_pack<C>(w, wp, st);
  if (e != cudaSuccess) return e;
  ck::to_half2_kernel<<<132 * 8, 256, 0, st>>>(reinterpret_cast<const float4*>(x), reinterpret_cast<uint4*>(xh), 16,
                                                 1024 * 1024 / 4, XH_WORDS / 4);
  e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  return ck::launch_conv<C>(xh, wp, b, out, nullptr, st);
}
}  // namespace sol
