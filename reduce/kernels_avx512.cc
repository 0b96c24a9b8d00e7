// The reduction loops for x86-64 CPUs with AVX-512 F, BW, DQ and VL (reduce/CMakeLists.txt sets the flags).
#define CONDUIT_REDUCE_KERNEL_TABLE kKernelsAvx512
#include "reduce/kernel_loops.inc"
