// conv63_tf32 variant: staged epilogue, each block walks a contiguous range of tiles.
#define SOL_EPI 1
#define SOL_CONTIG true
#include "conv63_tf32.cu"
