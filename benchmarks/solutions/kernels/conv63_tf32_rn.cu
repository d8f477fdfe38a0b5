// conv63_tf32 with the input operand rounded to TF32 (cvt.rna) instead of truncated by the tensor core.
#define SOL_ROUNDB true
#include "conv63_tf32.cu"
