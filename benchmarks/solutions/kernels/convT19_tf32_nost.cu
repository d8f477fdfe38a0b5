// convT19_tf32 variant: DIAGNOSTIC: conv without output stores (stats still accumulated; output wrong by design).
#define SOL_EPI 2
#include "convT19_tf32.cu"
