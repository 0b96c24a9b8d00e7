#include "reduce/reduce.h"

#include <algorithm>
#include <cstring>

#include "reduce/element_ops.h"

// Everything below is templated on an element "encoding" (how a stored element is
// widened for arithmetic and narrowed back) and an operator (both in element_ops.h,
// // shared with the GPU kernels), and instantiated once per (type, op) behind a switch.
// The inner loops are plain restrict-qualified loops over typed pointers so the
// compiler vectorizes them; keep them free of calls that are not inlined and of
// data-dependent branches.

namespace conduit {
namespace {

using reduce_internal::Bf16;
using reduce_internal::CombineElement;
using reduce_internal::DivideElement;
using reduce_internal::E4M3Format;
using reduce_internal::E5M2Format;
using reduce_internal::HalfFormat;
using reduce_internal::MaxOp;
using reduce_internal::MinOp;
using reduce_internal::NarrowFloat;
using reduce_internal::Native;
using reduce_internal::Num;
using reduce_internal::ProdOp;
using reduce_internal::ScaleElement;
using reduce_internal::SumOp;

// ---- Loops ----

template <typename E, typename Op>
void Combine3(typename E::Storage* __restrict out, const typename E::Storage* __restrict a,
              const typename E::Storage* __restrict b, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = CombineElement<E, Op>(a[i], b[i]);
}

// acc is the left operand when kAccOnLeft, else the right one; the order matters
// only for which NaN or which signed zero survives, but keeping it makes Reduce2
// give the same bits whether or not out aliases an input.
template <typename E, typename Op, bool kAccOnLeft>
void CombineInto(typename E::Storage* __restrict acc, const typename E::Storage* __restrict in,
                 size_t n) {
  for (size_t i = 0; i < n; ++i) {
    acc[i] = kAccOnLeft ? CombineElement<E, Op>(acc[i], in[i]) : CombineElement<E, Op>(in[i], acc[i]);
  }
}

// out == a == b: no restrict is possible. Rare (x op x), so unoptimized is fine.
template <typename E, typename Op>
void CombineSelf(typename E::Storage* buf, size_t n) {
  for (size_t i = 0; i < n; ++i) buf[i] = CombineElement<E, Op>(buf[i], buf[i]);
}

template <typename E>
void ScaleLoop(typename E::Storage* __restrict buf, size_t n, typename E::Compute s) {
  for (size_t i = 0; i < n; ++i) buf[i] = ScaleElement<E>(buf[i], s);
}

template <typename E>
void DivideLoop(typename E::Storage* __restrict buf, size_t n, int divisor) {
  for (size_t i = 0; i < n; ++i) buf[i] = DivideElement<E>(buf[i], divisor);
}

// ---- Alignment ----

// The typed loops need element-aligned pointers (misaligned access is UB and the
// vectorizer may assume alignment). Chunks and user buffers are almost always
// aligned; for the rare misaligned call, elements are bounced through this much
// aligned stack space at a time.
constexpr size_t kBounceBytes = 4096;

template <typename S>
inline bool IsAligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % alignof(S) == 0;
}

template <typename E, typename Op>
void Combine(void* out, const void* a, const void* b, size_t n) {
  using S = typename E::Storage;
  if (IsAligned<S>(out) && IsAligned<S>(a) && IsAligned<S>(b)) {
    S* o = static_cast<S*>(out);
    const S* x = static_cast<const S*>(a);
    const S* y = static_cast<const S*>(b);
    if (o == x && o == y) {
      CombineSelf<E, Op>(o, n);
    } else if (o == x) {
      CombineInto<E, Op, true>(o, y, n);
    } else if (o == y) {
      CombineInto<E, Op, false>(o, x, n);
    } else {
      Combine3<E, Op>(o, x, y, n);
    }
    return;
  }
  // Both inputs of a chunk are copied out before its result is written back, so
  // out may still alias a or b.
  constexpr size_t kChunk = kBounceBytes / sizeof(S);
  alignas(64) S ta[kChunk];
  alignas(64) S tb[kChunk];
  for (size_t done = 0; done < n;) {
    const size_t m = std::min(kChunk, n - done);
    std::memcpy(ta, static_cast<const char*>(a) + done * sizeof(S), m * sizeof(S));
    std::memcpy(tb, static_cast<const char*>(b) + done * sizeof(S), m * sizeof(S));
    CombineInto<E, Op, true>(ta, tb, m);
    std::memcpy(static_cast<char*>(out) + done * sizeof(S), ta, m * sizeof(S));
    done += m;
  }
}

// Runs `loop(typed_buf, m)` over buf, directly when aligned, else through a bounce
// buffer.
template <typename S, typename Loop>
void InPlace(void* buf, size_t n, Loop loop) {
  if (IsAligned<S>(buf)) {
    loop(static_cast<S*>(buf), n);
    return;
  }
  constexpr size_t kChunk = kBounceBytes / sizeof(S);
  alignas(64) S tmp[kChunk];
  for (size_t done = 0; done < n;) {
    const size_t m = std::min(kChunk, n - done);
    char* p = static_cast<char*>(buf) + done * sizeof(S);
    std::memcpy(tmp, p, m * sizeof(S));
    loop(tmp, m);
    std::memcpy(p, tmp, m * sizeof(S));
    done += m;
  }
}

template <typename E>
void Scale(void* buf, size_t n, const void* scalar) {
  using S = typename E::Storage;
  S raw;
  std::memcpy(&raw, scalar, sizeof(S));
  const typename E::Compute s = E::Load(raw);
  InPlace<S>(buf, n, [s](S* p, size_t m) { ScaleLoop<E>(p, m, s); });
}

template <typename E>
void Divide(void* buf, size_t n, int divisor) {
  using S = typename E::Storage;
  // ncclAvg divides by the rank count, which is positive. An integer division by
  // zero would be UB and a negative divisor is meaningless for the unsigned types,
  // so integer buffers are left alone then; floats follow IEEE.
  if (Num<typename E::Compute>::kInteger && divisor <= 0) return;
  InPlace<S>(buf, n, [divisor](S* p, size_t m) { DivideLoop<E>(p, m, divisor); });
}

// ---- Dispatch ----

using CombineFn = void (*)(void*, const void*, const void*, size_t);
using ScaleFn = void (*)(void*, size_t, const void*);
using DivideFn = void (*)(void*, size_t, int);

struct Kernels {
  CombineFn combine[4];  // Indexed by ncclSum, ncclProd, ncclMax, ncclMin.
  ScaleFn scale;
  DivideFn divide;
};

template <typename E>
constexpr Kernels MakeKernels() {
  return Kernels{{&Combine<E, SumOp>, &Combine<E, ProdOp>, &Combine<E, MaxOp>, &Combine<E, MinOp>},
                 &Scale<E>,
                 &Divide<E>};
}

// Indexed by ncclDataType_t.
constexpr Kernels kKernels[ncclNumTypes] = {
    MakeKernels<Native<int8_t>>(),
    MakeKernels<Native<uint8_t>>(),
    MakeKernels<Native<int32_t>>(),
    MakeKernels<Native<uint32_t>>(),
    MakeKernels<Native<int64_t>>(),
    MakeKernels<Native<uint64_t>>(),
    MakeKernels<NarrowFloat<HalfFormat, uint16_t>>(),
    MakeKernels<Native<float>>(),
    MakeKernels<Native<double>>(),
    MakeKernels<Bf16>(),
    MakeKernels<NarrowFloat<E4M3Format, uint8_t>>(),
    MakeKernels<NarrowFloat<E5M2Format, uint8_t>>(),
};

// ncclAvg accumulates like ncclSum; the caller divides once at the end.
CombineFn FindCombine(ncclDataType_t type, ncclRedOp_t op) {
  if (!IsValidDataType(type)) return nullptr;
  const int index = op == ncclAvg ? static_cast<int>(ncclSum) : static_cast<int>(op);
  if (index < 0 || index > static_cast<int>(ncclMin)) return nullptr;
  return kKernels[type].combine[index];
}

}  // namespace

size_t DataTypeSize(ncclDataType_t type) {
  switch (type) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
      return 8;
    default:
      return 0;
  }
}

const char* DataTypeName(ncclDataType_t type) {
  switch (type) {
    case ncclInt8: return "int8";
    case ncclUint8: return "uint8";
    case ncclInt32: return "int32";
    case ncclUint32: return "uint32";
    case ncclInt64: return "int64";
    case ncclUint64: return "uint64";
    case ncclFloat16: return "float16";
    case ncclFloat32: return "float32";
    case ncclFloat64: return "float64";
    case ncclBfloat16: return "bfloat16";
    case ncclFloat8e4m3: return "float8e4m3";
    case ncclFloat8e5m2: return "float8e5m2";
    default: return "invalid";
  }
}

bool IsValidDataType(int type) { return type >= 0 && type < ncclNumTypes; }

// Invalid types or ops are ignored rather than fatal: the daemon validates every
// request up front (IsValidDataType), and a bad value here must not take it down.
void ReduceInto(void* acc, const void* in, size_t count, ncclDataType_t type, ncclRedOp_t op) {
  if (count == 0) return;
  if (CombineFn fn = FindCombine(type, op)) fn(acc, acc, in, count);
}

void Reduce2(void* out, const void* a, const void* b, size_t count, ncclDataType_t type,
             ncclRedOp_t op) {
  if (count == 0) return;
  if (CombineFn fn = FindCombine(type, op)) fn(out, a, b, count);
}

void ScaleInPlace(void* buf, size_t count, ncclDataType_t type, const void* scalar) {
  if (count == 0 || !IsValidDataType(type)) return;
  kKernels[type].scale(buf, count, scalar);
}

void DivideInPlace(void* buf, size_t count, ncclDataType_t type, int divisor) {
  if (count == 0 || !IsValidDataType(type)) return;
  kKernels[type].divide(buf, count, divisor);
}

}  // namespace conduit
