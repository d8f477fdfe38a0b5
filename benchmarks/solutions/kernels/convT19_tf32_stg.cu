// convT19_tf32 variant: staged epilogue (32 channels per round, coalesced float2 row stores).
#define SOL_EPI 1
#include "convT19_tf32.cu"
