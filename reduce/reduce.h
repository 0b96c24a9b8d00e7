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
