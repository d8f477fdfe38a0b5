// conv63_tf32 variant: deferred epilogue (128 px tiles; the tile waits in shared memory and its coalesced
// stores are issued between the k-steps of the next tile), plain stores.
#define SOL_DEFER
#define SOL_STCS false
#include "conv63_tf32.cu"
