// convT19_tf32 variant: two blocks per SM (as convT19_tf32_2b), GELU through gelu_fast instead of erff.
#define SOL_TWOBLOCKS
#define SOL_FG true
#include "convT19_tf32.cu"
