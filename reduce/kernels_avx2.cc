// The reduction loops for x86-64 CPUs with AVX2 and F16C (reduce/CMakeLists.txt sets the flags).
#define CONDUIT_REDUCE_KERNEL_TABLE kKernelsAvx2
#include "reduce/kernel_loops.inc"
