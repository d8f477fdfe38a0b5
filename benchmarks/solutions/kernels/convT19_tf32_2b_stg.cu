// convT19_tf32 variant: two blocks per SM, staged epilogue (16 channels per round).
#define SOL_TWOBLOCKS
#define SOL_EPI 1
#include "convT19_tf32.cu"
