// Element-wise reduction kernels on host memory for every NCCL data type and op.
//
// The daemon combines buffers with these: intra-host ranks before anything crosses the
// network, and chunks received from peer daemons while later chunks are still in flight.
// Half, bfloat16 and the two fp8 formats are widened to float, combined, and rounded back
// (round-to-nearest-even; e4m3 saturates to its largest finite value, as it has no inf).
#ifndef CONDUIT_DAEMON_REDUCE_REDUCE_H_
#define CONDUIT_DAEMON_REDUCE_REDUCE_H_

#include <cstddef>
#include <cstdint>

#include "nccl.h"

namespace conduit {

// Size in bytes of one element, or 0 for a value outside ncclDataType_t.
size_t DataTypeSize(ncclDataType_t type);
const char* DataTypeName(ncclDataType_t type);
bool IsValidDataType(int type);

// acc[i] = acc[i] (op) in[i] for i < count. `op` is ncclSum, ncclProd, ncclMax or ncclMin
// (ncclAvg is ncclSum followed by DivideInPlace). acc and in may not overlap partially.
void ReduceInto(void* acc, const void* in, size_t count, ncclDataType_t type, ncclRedOp_t op);

// out[i] = a[i] (op) b[i]; out may alias a or b.
void Reduce2(void* out, const void* a, const void* b, size_t count, ncclDataType_t type,
             ncclRedOp_t op);

// buf[i] = buf[i] * scalar, where `scalar` points at one element of `type`
// (the PreMulSum scalar). Integer types multiply with wrap-around, like NCCL.
void ScaleInPlace(void* buf, size_t count, ncclDataType_t type, const void* scalar);

// buf[i] = buf[i] / divisor (ncclAvg). Integers divide with truncation toward zero.
void DivideInPlace(void* buf, size_t count, ncclDataType_t type, int divisor);

// The instruction sets the host loops are built for. On x86-64 the loops are compiled
// three times and the best set the CPU supports is used: the narrow floats (float16,
// bfloat16, fp8) convert to float and back in vector registers several times faster with
// wider ones (docs/design.md, "Reduction loops on host memory"). Every set gives the same results.
// Elsewhere only kBaseline exists.
enum class ReduceIsa : int { kBaseline = 0, kAvx2 = 1, kAvx512 = 2 };
const char* ReduceIsaName(ReduceIsa isa);  // "baseline", "avx2", "avx512"
// Built into this binary and run by this CPU and OS.
bool ReduceIsaAvailable(ReduceIsa isa);
// The set in use: the best available, or the one CONDUIT_REDUCE_ISA names (baseline,
// avx2, avx512) if this CPU runs it.
ReduceIsa ActiveReduceIsa();
// Switches the set in use for the whole process (tests and benchmarks compare the sets
// with it); false, changing nothing, if `isa` is not available.
bool SetReduceIsa(ReduceIsa isa);

// Conversions used by the kernels and by tests that build references.
float HalfToFloat(uint16_t h);
uint16_t FloatToHalf(float f);
float Bf16ToFloat(uint16_t b);
uint16_t FloatToBf16(float f);
float Fp8E4M3ToFloat(uint8_t v);
uint8_t FloatToFp8E4M3(float f);
float Fp8E5M2ToFloat(uint8_t v);
uint8_t FloatToFp8E5M2(float f);

}  // namespace conduit

#endif  // CONDUIT_DAEMON_REDUCE_REDUCE_H_
