// The daemon's GPU reduction kernels: one combine kernel per (type, op), named
// conduit_combine_<type>_<op>. Compiled at run time by NVRTC (reduce_kernels.cc) from this
// text and the headers it includes, which the daemon binary embeds; never by the build.
//
// Each kernel is a grid-stride loop: thread t handles elements t, t + stride, ...; reads
// of every buffer are coalesced across a warp. ncclAvg runs as sum with a divisor and
// PreMulSum as sum with per-input scalars (combine.h).
#include "gpu/combine.h"

namespace {

using conduit::gpu::CombineArgs;
using namespace conduit::reduce_internal;
using Half = NarrowFloat<HalfFormat, uint16_t>;
using E4M3 = NarrowFloat<E4M3Format, uint8_t>;
using E5M2 = NarrowFloat<E5M2Format, uint8_t>;

template <typename E, typename Op>
__device__ __forceinline__ void CombineBody(const CombineArgs& a) {
  using S = typename E::Storage;
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < a.count; i += stride) {
    const S v = conduit::gpu::CombineAt<E, Op>(a, i);
    for (int o = 0; o < a.nout; ++o) static_cast<S*>(a.out[o])[i] = v;
  }
}

}  // namespace

// __grid_constant__: the argument block stays in parameter memory even though it is
// indexed dynamically (no per-thread local copy).
#define CONDUIT_COMBINE_KERNEL(type_name, E, op_name, Op)                                             \
  extern "C" __global__ void conduit_combine_##type_name##_##op_name(const __grid_constant__ CombineArgs args) { \
    CombineBody<E, Op>(args);                                                                          \
  }
#define CONDUIT_COMBINE_KERNELS(type_name, E)           \
  CONDUIT_COMBINE_KERNEL(type_name, E, sum, SumOp)      \
  CONDUIT_COMBINE_KERNEL(type_name, E, prod, ProdOp)    \
  CONDUIT_COMBINE_KERNEL(type_name, E, max, MaxOp)      \
  CONDUIT_COMBINE_KERNEL(type_name, E, min, MinOp)

// Type names are DataTypeName()'s (reduce/reduce.h); reduce_kernels.cc builds the same.
CONDUIT_COMBINE_KERNELS(int8, Native<int8_t>)
CONDUIT_COMBINE_KERNELS(uint8, Native<uint8_t>)
CONDUIT_COMBINE_KERNELS(int32, Native<int32_t>)
CONDUIT_COMBINE_KERNELS(uint32, Native<uint32_t>)
CONDUIT_COMBINE_KERNELS(int64, Native<int64_t>)
CONDUIT_COMBINE_KERNELS(uint64, Native<uint64_t>)
CONDUIT_COMBINE_KERNELS(float16, Half)
CONDUIT_COMBINE_KERNELS(float32, Native<float>)
CONDUIT_COMBINE_KERNELS(float64, Native<double>)
CONDUIT_COMBINE_KERNELS(bfloat16, Bf16)
CONDUIT_COMBINE_KERNELS(float8e4m3, E4M3)
CONDUIT_COMBINE_KERNELS(float8e5m2, E5M2)
