// The host reduction loops, compiled once per instruction set (kernel_loops.inc), and
// the table each compilation exports. Internal to reduce/: callers use reduce.h, which
// picks the table for the CPU at hand.
#ifndef CONDUIT_DAEMON_REDUCE_KERNEL_TABLE_H_
#define CONDUIT_DAEMON_REDUCE_KERNEL_TABLE_H_

#include <cstddef>

#include "nccl.h"

namespace conduit {
namespace reduce_internal {

using CombineFn = void (*)(void* out, const void* a, const void* b, size_t n);
using ScaleFn = void (*)(void* buf, size_t n, const void* scalar);
using DivideFn = void (*)(void* buf, size_t n, int divisor);

struct Kernels {
  CombineFn combine[4];  // Indexed by ncclSum, ncclProd, ncclMax, ncclMin.
  ScaleFn scale;
  DivideFn divide;
};

// Indexed by ncclDataType_t. The baseline table runs on every CPU of the target
// architecture; the x86-64 ones only where CPUID and XCR0 say so (reduce.cc).
extern const Kernels kKernelsBaseline[ncclNumTypes];
#if defined(CONDUIT_REDUCE_X86_KERNELS)
extern const Kernels kKernelsAvx2[ncclNumTypes];    // AVX2 + F16C
extern const Kernels kKernelsAvx512[ncclNumTypes];  // AVX-512 F, BW, DQ, VL
#endif

}  // namespace reduce_internal
}  // namespace conduit

#endif  // CONDUIT_DAEMON_REDUCE_KERNEL_TABLE_H_
