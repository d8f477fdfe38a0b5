// convT19_tf32 variant: one block per SM, K chunks of 8 channels, deferred epilogue.
#define SOL_DEFER1
#include "convT19_tf32.cu"
