// One launch of the daemon's GPU combine kernel, and the value it computes per element.
//
// The kernel (reduce_kernels.cu) folds nin input buffers into one result, element by
// element, and writes it to nout output buffers: the local ranks of a collective
// reduced and handed back in one pass. This header is shared, unchanged, by the kernel
// source NVRTC compiles and by the daemon (which fills CombineArgs) and the tests (which
// evaluate CombineAt on the host and compare it with the host reduction path).
#ifndef CONDUIT_DAEMON_GPU_COMBINE_H_
#define CONDUIT_DAEMON_GPU_COMBINE_H_

#include "reduce/element_ops.h"
#include "reduce/portable_types.h"

namespace conduit {
namespace gpu {

inline constexpr int kCombineSlots = 16;  // most inputs (and outputs) of one launch

// The kernel's only parameter, passed by value: layout identical on host and device.
struct CombineArgs {
  uint64_t count;       // elements in each buffer
  int32_t nin;          // inputs in[0..nin), 1..kCombineSlots
  int32_t nout;         // outputs out[0..nout), 0..kCombineSlots, each gets the result
  uint32_t scale_mask;  // bit r: input r is first multiplied by scalars[r] (PreMulSum)
  int32_t divisor;      // > 0: the result is divided by it once (ncclAvg)
  const void* in[kCombineSlots];
  void* out[kCombineSlots];
  uint64_t scalars[kCombineSlots];  // one element of the type, in the low bytes
};

template <int kBytes>
struct UintOfSize;
template <> struct UintOfSize<1> { using Type = uint8_t; };
template <> struct UintOfSize<2> { using Type = uint16_t; };
template <> struct UintOfSize<4> { using Type = uint32_t; };
template <> struct UintOfSize<8> { using Type = uint64_t; };

// The stored element held in the low bytes of `bits` (little-endian, as OpDesc carries it).
template <typename S>
CONDUIT_HD S StoredFromBits(uint64_t bits) {
  return reduce_internal::BitCast<S>(static_cast<typename UintOfSize<sizeof(S)>::Type>(bits));
}

// Element i of the result, in the host path's order: in[0] (op) in[1] (op) ... left to
// right, each input scaled first when its scale bit is set, each step rounded to the
// stored type (the host reduces pairwise into a stored buffer), then one division.
template <typename E, typename Op>
CONDUIT_HD typename E::Storage CombineAt(const CombineArgs& a, uint64_t i) {
  using S = typename E::Storage;
  using reduce_internal::CombineElement;
  using reduce_internal::ScaleElement;
  S acc = static_cast<const S*>(a.in[0])[i];
  if (a.scale_mask & 1u) acc = ScaleElement<E>(acc, E::Load(StoredFromBits<S>(a.scalars[0])));
  for (int r = 1; r < a.nin; ++r) {
    S x = static_cast<const S*>(a.in[r])[i];
    if (a.scale_mask & (1u << r)) x = ScaleElement<E>(x, E::Load(StoredFromBits<S>(a.scalars[r])));
    acc = CombineElement<E, Op>(acc, x);
  }
  if (a.divisor > 0) acc = reduce_internal::DivideElement<E>(acc, a.divisor);
  return acc;
}

}  // namespace gpu
}  // namespace conduit

#endif  // CONDUIT_DAEMON_GPU_COMBINE_H_
