// conv63_tf32 variant: DIAGNOSTIC: the staged stores of conv63_tf32_stg without the MMA work (output = 0).
#define SOL_EPI 3
#include "conv63_tf32.cu"
