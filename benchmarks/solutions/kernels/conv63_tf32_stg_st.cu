// conv63_tf32 variant: staged epilogue, plain (not evict-first) stores.
#define SOL_EPI 1
#define SOL_STCS false
#include "conv63_tf32.cu"
