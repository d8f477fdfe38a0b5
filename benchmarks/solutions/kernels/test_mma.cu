// Layout self-test for the fragment conventions that common.cuh assumes (one warp, one mma).
#include "common.cuh"
// A row-major [16][8 words], B [8 words][8] (k-major rows), D [16][8].
template <bool F16>
__global__ void mma_test_kernel(const uint32_t* A, const uint32_t* B, float* D) {
  const int lane = threadIdx.x, g = lane >> 2, t = lane & 3;
  uint4 a;
  a.x = A[g * 8 + t];
  a.y = A[(g + 8) * 8 + t];
  a.z = A[g * 8 + t + 4];
  a.w = A[(g + 8) * 8 + t + 4];
  uint32_t b0 = B[t * 8 + g], b1 = B[(t + 4) * 8 + g];
  float d[4] = {0.f, 0.f, 0.f, 0.f};
  ck::mma<F16>(d, a, b0, b1);
  D[g * 8 + 2 * t] = d[0];
  D[g * 8 + 2 * t + 1] = d[1];
  D[(g + 8) * 8 + 2 * t] = d[2];
  D[(g + 8) * 8 + 2 * t + 1] = d[3];
}
extern "C" int mma_test(const uint32_t* A, const uint32_t* B, float* D, int f16) {
  if (f16) mma_test_kernel<true><<<1, 32>>>(A, B, D);
  else mma_test_kernel<false><<<1, 32>>>(A, B, D);
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  return (int)e;
}
