// conv63_tf32 variant: two blocks per SM (128 px tiles, 4 warps, K in 2 chunks), direct stores.
#define SOL_TWOBLOCKS
#include "conv63_tf32.cu"
