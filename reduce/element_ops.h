// Per-element arithmetic of every NCCL reduction: how each type's stored element is
// widened for arithmetic and narrowed back (its "encoding"), the four operators, the
// PreMulSum scaling and the ncclAvg division.
//
// Host and GPU share this text: reduce.cc's loops call it, and the daemon's GPU kernels
// (gpu/reduce_kernels.cu) are compiled from it by NVRTC, so a value reduced on the GPU
// is the value the host path produces (tests/unit/gpu_kernels_test.cc compiles both).
// It therefore uses nothing NVRTC lacks: no standard headers, only portable_types.h.
#ifndef CONDUIT_DAEMON_REDUCE_ELEMENT_OPS_H_
#define CONDUIT_DAEMON_REDUCE_ELEMENT_OPS_H_

#include "reduce/float_formats.h"
#include "reduce/portable_types.h"

namespace conduit {
namespace reduce_internal {

// ---- Number traits (what <type_traits> would say) ----

// kInteger: integer arithmetic. WideUnsigned: an unsigned type at least as wide as int and
// as T, for wrapping sums and products. Wide: the 64-bit type of T's signedness, for
// division.
template <typename T>
struct Num;
template <> struct Num<int8_t> { static constexpr bool kInteger = true; using WideUnsigned = unsigned; using Wide = int64_t; };
template <> struct Num<uint8_t> { static constexpr bool kInteger = true; using WideUnsigned = unsigned; using Wide = uint64_t; };
template <> struct Num<int32_t> { static constexpr bool kInteger = true; using WideUnsigned = unsigned; using Wide = int64_t; };
template <> struct Num<uint32_t> { static constexpr bool kInteger = true; using WideUnsigned = unsigned; using Wide = uint64_t; };
template <> struct Num<int64_t> { static constexpr bool kInteger = true; using WideUnsigned = uint64_t; using Wide = int64_t; };
template <> struct Num<uint64_t> { static constexpr bool kInteger = true; using WideUnsigned = uint64_t; using Wide = uint64_t; };
template <> struct Num<float> { static constexpr bool kInteger = false; };
template <> struct Num<double> { static constexpr bool kInteger = false; };

// ---- Element encodings ----

template <typename T>
struct Native {
  using Storage = T;
  using Compute = T;
  static CONDUIT_HD T Load(T v) { return v; }
  static CONDUIT_HD T Store(T v) { return v; }
};

// Narrow floats are combined in float. One float operation followed by one rounding
// to the narrow format gives the correctly rounded result, because float has more
// than twice the precision (plus two bits) of any of them, so double rounding is
// harmless for +, * and /.
template <typename F, typename S>
struct NarrowFloat {
  using Storage = S;
  using Compute = float;
  static CONDUIT_HD float Load(S v) { return DecodeNarrow<F>(v); }
  static CONDUIT_HD S Store(float f) { return static_cast<S>(EncodeNarrow<F>(f)); }
};

struct Bf16 {
  using Storage = uint16_t;
  using Compute = float;
  static CONDUIT_HD float Load(uint16_t v) { return DecodeBf16(v); }
  static CONDUIT_HD uint16_t Store(float f) { return static_cast<uint16_t>(EncodeBf16(f)); }
};

// ---- Arithmetic ----

// Integer sums and products are computed in an unsigned type at least as wide as
// int: signed overflow would be UB, and a small unsigned type would promote to
// (signed) int and could overflow there. Converting back is modular (C++20).
template <typename T>
CONDUIT_HD T Add(T a, T b) {
  if constexpr (Num<T>::kInteger) {
    using W = typename Num<T>::WideUnsigned;
    return static_cast<T>(static_cast<W>(a) + static_cast<W>(b));
  } else {
    return a + b;
  }
}

template <typename T>
CONDUIT_HD T Mul(T a, T b) {
  if constexpr (Num<T>::kInteger) {
    using W = typename Num<T>::WideUnsigned;
    return static_cast<T>(static_cast<W>(a) * static_cast<W>(b));
  } else {
    return a * b;
  }
}

// Max and min propagate NaN from either side (std::max would drop it when it is
// the second argument). `a != a` is a NaN test that the vectorizer understands.
template <typename T>
CONDUIT_HD T Max(T a, T b) {
  if constexpr (!Num<T>::kInteger) {
    return (a > b || a != a) ? a : b;
  } else {
    return a > b ? a : b;
  }
}

template <typename T>
CONDUIT_HD T Min(T a, T b) {
  if constexpr (!Num<T>::kInteger) {
    return (a < b || a != a) ? a : b;
  } else {
    return a < b ? a : b;
  }
}

struct SumOp {
  template <typename T>
  static CONDUIT_HD T Apply(T a, T b) { return Add(a, b); }
};
struct ProdOp {
  template <typename T>
  static CONDUIT_HD T Apply(T a, T b) { return Mul(a, b); }
};
struct MaxOp {
  template <typename T>
  static CONDUIT_HD T Apply(T a, T b) { return Max(a, b); }
};
struct MinOp {
  template <typename T>
  static CONDUIT_HD T Apply(T a, T b) { return Min(a, b); }
};

// ---- Whole-element steps ----

// a (op) b on stored elements.
template <typename E, typename Op>
CONDUIT_HD typename E::Storage CombineElement(typename E::Storage a, typename E::Storage b) {
  return E::Store(Op::Apply(E::Load(a), E::Load(b)));
}

// PreMulSum: v * s, where s is the scalar already widened (E::Load of its stored form).
template <typename E>
CONDUIT_HD typename E::Storage ScaleElement(typename E::Storage v, typename E::Compute s) {
  return E::Store(Mul(E::Load(v), s));
}

// ncclAvg: v / divisor, divisor >= 1. Integers are widened to 64 bits so the divisor is
// never truncated to a small type; the quotient always fits back.
template <typename E>
CONDUIT_HD typename E::Storage DivideElement(typename E::Storage v, int divisor) {
  using C = typename E::Compute;
  if constexpr (Num<C>::kInteger) {
    using W = typename Num<C>::Wide;
    return static_cast<C>(static_cast<W>(v) / static_cast<W>(divisor));
  } else {
    return E::Store(E::Load(v) / static_cast<C>(divisor));
  }
}

}  // namespace reduce_internal
}  // namespace conduit

#endif  // CONDUIT_DAEMON_REDUCE_ELEMENT_OPS_H_
