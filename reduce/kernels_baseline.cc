// The reduction loops for every CPU of the target architecture (x86-64: SSE2).
#define CONDUIT_REDUCE_KERNEL_TABLE kKernelsBaseline
#include "reduce/kernel_loops.inc"
