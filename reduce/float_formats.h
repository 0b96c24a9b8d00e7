// Bit-level conversions between float and the narrow floating-point formats
// (IEEE half, bfloat16, fp8 e4m3 "fn" and fp8 e5m2).
//
// Internal to conduit_reduce. They are inline and branch-free (selects only) so the
// reduction loops that call them per element still auto-vectorize; the public
// out-of-line wrappers in reduce.h forward here.
//
// Every encoder rounds to nearest, ties to even, using the default floating-point
// environment (no FTZ/DAZ, round-to-nearest), which is what the daemon runs with.
//
// This header is also CUDA device code: the daemon's GPU kernels (gpu/reduce_kernels.cu)
// are compiled at run time by NVRTC from this very text, so host and GPU reductions
// share one definition (portable_types.h supplies what NVRTC lacks).
#ifndef CONDUIT_DAEMON_REDUCE_FLOAT_FORMATS_H_
#define CONDUIT_DAEMON_REDUCE_FLOAT_FORMATS_H_

#include "reduce/portable_types.h"

namespace conduit {
namespace reduce_internal {

// A narrow IEEE-style binary format with a sign bit, kExpBits exponent bits and
// kMantBits fraction bits. kMaxCode is the largest magnitude an encoder may produce:
// the infinity code where the format has one, else the largest finite value (so
// overflow saturates). kNanCode is the canonical quiet NaN (without sign).
struct HalfFormat {
  static constexpr int kExpBits = 5;
  static constexpr int kMantBits = 10;
  static constexpr int kBias = 15;
  static constexpr bool kHasInf = true;
  static constexpr uint32_t kMaxCode = 0x7c00;
  static constexpr uint32_t kNanCode = 0x7e00;
};

struct E5M2Format {
  static constexpr int kExpBits = 5;
  static constexpr int kMantBits = 2;
  static constexpr int kBias = 15;
  static constexpr bool kHasInf = true;
  static constexpr uint32_t kMaxCode = 0x7c;
  static constexpr uint32_t kNanCode = 0x7e;
};

// e4m3 "fn": no infinities; exponent 15 is an ordinary binade except for the
// all-ones fraction, which is the only NaN. Largest finite value is 448 (0x7e).
struct E4M3Format {
  static constexpr int kExpBits = 4;
  static constexpr int kMantBits = 3;
  static constexpr int kBias = 7;
  static constexpr bool kHasInf = false;
  static constexpr uint32_t kMaxCode = 0x7e;
  static constexpr uint32_t kNanCode = 0x7f;
};

template <typename F>
CONDUIT_HD float DecodeNarrow(uint32_t v) {
  constexpr int kBits = F::kExpBits + F::kMantBits;
  constexpr int kShift = 23 - F::kMantBits;
  constexpr uint32_t kMagMask = (1u << kBits) - 1;
  constexpr uint32_t kExpAllOnes = ((1u << F::kExpBits) - 1) << F::kMantBits;
  // Weight of one subnormal step, 2^(1 - bias - mant_bits), built from its bits.
  constexpr float kSubnormalUnit =
      BitCast<float>(static_cast<uint32_t>(127 + 1 - F::kBias - F::kMantBits) << 23);

  const uint32_t sign = ((v >> kBits) & 1u) << 31;
  const uint32_t mag = v & kMagMask;
  // Normal numbers: move exponent and fraction into place and rebias.
  uint32_t bits = (mag << kShift) + (static_cast<uint32_t>(127 - F::kBias) << 23);
  if constexpr (F::kHasInf) {
    // The all-ones exponent must land on float's all-ones exponent (inf / NaN,
    // keeping the payload); the rebias above got it only part of the way.
    constexpr uint32_t kExtra =
        static_cast<uint32_t>(129 - (1 << F::kExpBits) + F::kBias) << 23;
    bits = static_cast<int32_t>(mag) >= static_cast<int32_t>(kExpAllOnes) ? bits + kExtra : bits;
  } else {
    bits = mag == kMagMask ? 0x7fc00000u : bits;
  }
  // Zero and subnormals: the integer fraction times the unit is exact in float.
  // (Signed int32 compares and conversions throughout: baseline SSE2 has no
  // unsigned ones, and every value here is far below 2^31.)
  const float sub = static_cast<float>(static_cast<int32_t>(mag)) * kSubnormalUnit;
  bits = static_cast<int32_t>(mag) < (1 << F::kMantBits) ? BitCast<uint32_t>(sub) : bits;
  return BitCast<float>(bits | sign);
}

template <typename F>
CONDUIT_HD uint32_t EncodeNarrow(float f) {
  constexpr int kBits = F::kExpBits + F::kMantBits;
  constexpr int kShift = 23 - F::kMantBits;
  // Float bit pattern of the smallest normal of the narrow format.
  constexpr uint32_t kMinNormal = static_cast<uint32_t>(127 + 1 - F::kBias) << 23;
  // A float whose ulp is the narrow format's subnormal step: adding it to a tiny
  // magnitude makes the FPU do the round-to-nearest-even for us.
  constexpr uint32_t kMagicBits =
      static_cast<uint32_t>(127 + 24 - F::kBias - F::kMantBits) << 23;
  constexpr float kMagic = BitCast<float>(kMagicBits);

  const uint32_t x = BitCast<uint32_t>(f);
  const uint32_t sign = (x >> (31 - kBits)) & (1u << kBits);
  const uint32_t ax = x & 0x7fffffffu;

  // Normal range: rebias (wraps harmlessly; only used when ax >= kMinNormal), then
  // round the dropped bits half-to-even. A carry out of the fraction bumps the
  // exponent, which is exactly the right result, including overflow past the max.
  const uint32_t rebias = static_cast<uint32_t>(F::kBias - 127) << 23;
  const uint32_t odd = (ax >> kShift) & 1u;
  uint32_t normal = (ax + rebias + ((1u << (kShift - 1)) - 1) + odd) >> kShift;
  // Anything past the top saturates to kMaxCode: infinity where the format has one
  // (the correctly rounded overflow), the largest finite value for e4m3.
  normal = static_cast<int32_t>(normal) > static_cast<int32_t>(F::kMaxCode) ? F::kMaxCode : normal;

  const uint32_t sub =
      BitCast<uint32_t>(BitCast<float>(ax) + kMagic) - kMagicBits;

  const int32_t sax = static_cast<int32_t>(ax);  // ax < 2^31: signed compares are exact.
  uint32_t r = sax < static_cast<int32_t>(kMinNormal) ? sub : normal;
  r = sax > 0x7f800000 ? F::kNanCode : r;
  return r | sign;
}

CONDUIT_HD float DecodeBf16(uint32_t b) { return BitCast<float>(b << 16); }

CONDUIT_HD uint32_t EncodeBf16(float f) {
  const uint32_t x = BitCast<uint32_t>(f);
  // Round half to even on the 16 dropped bits; overflow carries into inf as it should.
  const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  // NaN: truncate but force the quiet bit, so a payload living only in the low
  // bits cannot turn into infinity.
  const uint32_t nan = (x >> 16) | 0x40u;
  return static_cast<int32_t>(x & 0x7fffffffu) > 0x7f800000 ? nan : rounded;
}

}  // namespace reduce_internal
}  // namespace conduit

#endif  // CONDUIT_DAEMON_REDUCE_FLOAT_FORMATS_H_
