// conv63_tf32 variant: staged epilogue: 32 channels at a time through shared memory, coalesced float2 row stores.
#define SOL_EPI 1
#include "conv63_tf32.cu"
