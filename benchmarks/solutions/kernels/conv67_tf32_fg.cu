// conv67_tf32 variant: GELU through gelu_fast (Abramowitz-Stegun erf, |error| <= 4e-7) instead of erff.
#define SOL_FG true
#include "conv67_tf32.cu"
