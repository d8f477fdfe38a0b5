// conv63_tf32 variant: direct stores without the evict-first hint.
#define SOL_STCS false
#include "conv63_tf32.cu"
