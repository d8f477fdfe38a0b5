// C ABI wrapper used by the device bench (ctypes); the curated solutions wrap the same sol::launch for torch.
#include SOL_FILE
extern "C" {
size_t sol_ws_bytes() { return sol::ws_bytes(); }
int sol_out_ndim() { return sol::OUT_NDIM; }
void sol_out_shape(long long* s) { for (int i = 0; i < sol::OUT_NDIM; ++i) s[i] = sol::OUT_SHAPE[i]; }
int sol_in_place() { return sol::IN_PLACE ? 1 : 0; }
int sol_launch(const float* x, const float* w, const float* b, const float* gamma, const float* beta, float* out,
               void* ws) {
  return (int)sol::launch(x, w, b, gamma, beta, out, ws, 0);
}
}
