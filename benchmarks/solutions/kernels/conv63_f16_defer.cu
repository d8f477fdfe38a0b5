// conv63_f16_stg variant: 128 px tiles with the deferred epilogue (stores issued during the next tile's MMAs).
#define SOL_DEFER
#include "conv63_f16_stg.cu"
