// The daemon's GPU reduction kernels: one combine kernel per (type, op), named
// conduit_combine_<type>_<op>. Compiled at run time by NVRTC (reduce_kernels.cc) from this
// text and the headers it includes, which the daemon binary embeds; never by the build.
//
// Each kernel is a grid-stride loop over 16-byte vectors (then the elements left over):
// thread t handles vectors t, t + stride, ...; reads of every buffer are coalesced across
// a warp. ncclAvg runs as sum with a divisor and
// PreMulSum as sum with per-input scalars (combine.h).
#include "gpu/combine.h"

namespace {

using conduit::gpu::CombineArgs;
using namespace conduit::reduce_internal;
using Half = NarrowFloat<HalfFormat, uint16_t>;
using E4M3 = NarrowFloat<E4M3Format, uint8_t>;
using E5M2 = NarrowFloat<E5M2Format, uint8_t>;

// True when every buffer of the launch starts on a 16-byte boundary, so the body can move
// 16 bytes per thread and access (programs' buffers nearly always are: allocations are
// 256-byte aligned and PyTorch's tensors start at multiples of 512 bytes).
__device__ __forceinline__ bool Aligned16(const CombineArgs& a) {
  uint64_t bits = 0;
  for (int r = 0; r < a.nin; ++r) bits |= reinterpret_cast<uint64_t>(a.in[r]);
  for (int o = 0; o < a.nout; ++o) bits |= reinterpret_cast<uint64_t>(a.out[o]);
  return (bits & 15) == 0;
}

template <typename E, typename Op>
__device__ __forceinline__ void CombineBody(const CombineArgs& a) {
  using S = typename E::Storage;
  constexpr int kLanes = 16 / sizeof(S);
  union Vector {
    uint4 raw;
    S lane[kLanes];
  };
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  const uint64_t first = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  // 16-byte loads and stores: one per buffer per kLanes elements (4 floats) instead of one
  // per element, which keeps far more bytes in flight per thread.
  const uint64_t vectors = Aligned16(a) ? a.count / kLanes : 0;
  for (uint64_t v = first; v < vectors; v += stride) {
    Vector acc, x;
    for (int r = 0; r < a.nin; ++r) {
      x.raw = static_cast<const uint4*>(a.in[r])[v];
      for (int j = 0; j < kLanes; ++j) acc.lane[j] = conduit::gpu::FoldStep<E, Op>(a, r, acc.lane[j], x.lane[j]);
    }
    for (int j = 0; j < kLanes; ++j) acc.lane[j] = conduit::gpu::FinishFold<E>(a, acc.lane[j]);
    for (int o = 0; o < a.nout; ++o) static_cast<uint4*>(a.out[o])[v] = acc.raw;
  }
  // The elements past the last whole vector (all of them when a buffer is unaligned).
  for (uint64_t i = vectors * kLanes + first; i < a.count; i += stride) {
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
