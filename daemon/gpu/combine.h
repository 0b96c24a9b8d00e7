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
  // Where non-null: input r's factor is the element there, in device memory (a PreMulSum
  // factor the program keeps on the GPU, read when the kernel runs), not scalars[r].
  const void* scalar_at[kCombineSlots];
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

// One step of the fold below: input r's element x folded into acc (input 0 starts it,
// acc is then ignored), x first scaled when r's scale bit is set.
template <typename E, typename Op>
CONDUIT_HD typename E::Storage FoldStep(const CombineArgs& a, int r, typename E::Storage acc, typename E::Storage x) {
  using S = typename E::Storage;
  if (a.scale_mask & (1u << r)) {
    const S factor = a.scalar_at[r] != nullptr ? *static_cast<const S*>(a.scalar_at[r]) : StoredFromBits<S>(a.scalars[r]);
    x = reduce_internal::ScaleElement<E>(x, E::Load(factor));
  }
  return r == 0 ? x : reduce_internal::CombineElement<E, Op>(acc, x);
}

// The fold's last step: the one division of ncclAvg.
template <typename E>
CONDUIT_HD typename E::Storage FinishFold(const CombineArgs& a, typename E::Storage acc) {
  return a.divisor > 0 ? reduce_internal::DivideElement<E>(acc, a.divisor) : acc;
}

// Element i of the result, in the host path's order: in[0] (op) in[1] (op) ... left to
// right, each input scaled first when its scale bit is set, each step rounded to the
// stored type (the host reduces pairwise into a stored buffer), then one division. The
// kernel's vector path folds with the same two steps, so it computes the same bits.
template <typename E, typename Op>
CONDUIT_HD typename E::Storage CombineAt(const CombineArgs& a, uint64_t i) {
  using S = typename E::Storage;
  S acc{};
  for (int r = 0; r < a.nin; ++r) acc = FoldStep<E, Op>(a, r, acc, static_cast<const S*>(a.in[r])[i]);
  return FinishFold<E>(a, acc);
}

}  // namespace gpu
}  // namespace conduit

#endif  // CONDUIT_DAEMON_GPU_COMBINE_H_
