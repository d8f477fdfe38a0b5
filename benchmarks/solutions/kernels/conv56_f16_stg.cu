// conv56_f16 variant: staged epilogue (32 channels per round, coalesced float2 row stores).
#define SOL_EPI 1
#include "conv56_f16.cu"
