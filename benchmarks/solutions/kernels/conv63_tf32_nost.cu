// conv63_tf32 variant: DIAGNOSTIC: no output stores (compute + loads only; output wrong by design).
#define SOL_EPI 2
#include "conv63_tf32.cu"
