// convT19_tf32 variant: two blocks per SM with the deferred epilogue (tile stored during the next tile's MMAs).
#define SOL_TWOBLOCKS
#define SOL_EPI 4
#include "convT19_tf32.cu"
