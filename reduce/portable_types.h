// What the reduction headers need from the standard library, in a form that also
// compiles under NVRTC (which has no standard headers): the fixed-width integer types,
// CONDUIT_HD (always-inlined host function here, inline device function in CUDA code) and a
// constexpr bit cast.
#ifndef CONDUIT_DAEMON_REDUCE_PORTABLE_TYPES_H_
#define CONDUIT_DAEMON_REDUCE_PORTABLE_TYPES_H_

#if defined(__CUDACC_RTC__)
// The LP64 model of the host: the same types <cstdint> names there.
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long int64_t;
typedef unsigned long uint64_t;
#else
#include <cstdint>
#endif

#if defined(__CUDACC__)
#define CONDUIT_HD __host__ __device__ __forceinline__
#else
// Always inlined on the host: reduce/kernel_loops.inc is compiled once per instruction
// set, and an out-of-line copy (one per translation unit, merged by the linker) compiled
// for AVX-512 could otherwise be what the baseline loops call.
#define CONDUIT_HD inline __attribute__((always_inline))
#endif

namespace conduit {
namespace reduce_internal {

// std::bit_cast without <bit> (both GCC and NVCC's front end implement the builtin).
template <typename To, typename From>
CONDUIT_HD constexpr To BitCast(const From& from) {
  static_assert(sizeof(To) == sizeof(From), "BitCast needs equal sizes");
  return __builtin_bit_cast(To, from);
}

}  // namespace reduce_internal
}  // namespace conduit

#endif  // CONDUIT_DAEMON_REDUCE_PORTABLE_TYPES_H_
