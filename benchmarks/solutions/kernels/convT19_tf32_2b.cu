// convT19_tf32 variant: two blocks per SM, direct stores.
#define SOL_TWOBLOCKS
#include "convT19_tf32.cu"
