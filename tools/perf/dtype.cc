#include "dtype.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace conduit::perf {
namespace {

// exact_limit values: int8 tops out at 127, bfloat16 has an 8-bit significand
// (256), half an 11-bit one (2048), fp8 e4m3 a 4-bit one (every integer to 16) and
// e5m2 a 3-bit one (to 8); wider types are capped at 2^20 so patterns never get near
// overflow. The order is nccl-tests' order, which "-d all" follows.
constexpr DtypeInfo kTypes[] = {
    {"int8", ncclInt8, 1, false, 127},
    {"uint8", ncclUint8, 1, false, 255},
    {"int32", ncclInt32, 4, false, 1u << 20},
    {"uint32", ncclUint32, 4, false, 1u << 20},
    {"int64", ncclInt64, 8, false, 1u << 20},
    {"uint64", ncclUint64, 8, false, 1u << 20},
    {"half", ncclFloat16, 2, true, 2048},
    {"float", ncclFloat32, 4, true, 1u << 20},
    {"double", ncclFloat64, 8, true, 1u << 20},
    {"bfloat16", ncclBfloat16, 2, true, 256},
    {"f8e4m3", ncclFloat8e4m3, 1, true, 17},
    {"f8e5m2", ncclFloat8e5m2, 1, true, 9},
};

struct Alias {
  std::string_view alias;
  std::string_view name;
};
constexpr Alias kAliases[] = {
    {"float32", "float"}, {"fp32", "float"},  {"f32", "float"},     {"float16", "half"},
    {"fp16", "half"},     {"bf16", "bfloat16"}, {"float64", "double"}, {"fp64", "double"},
    {"char", "int8"},     {"int", "int32"},   {"uint", "uint32"},   {"fp8e4m3", "f8e4m3"},
    {"fp8e5m2", "f8e5m2"},
};

template <typename T>
T Load(const void* base, size_t index) {
  T v;
  std::memcpy(&v, static_cast<const char*>(base) + index * sizeof(T), sizeof(T));
  return v;
}

template <typename T>
void Store(void* base, size_t index, T v) {
  std::memcpy(static_cast<char*>(base) + index * sizeof(T), &v, sizeof(T));
}

// An integer element of `value`, wrapped as the type's own arithmetic wraps (an expected
// uint8 result of -3 is 253). Converting a double to an integer type that cannot hold it is
// undefined, so it goes through int64 (uint64 from 2^63), and integer-to-integer conversion
// is modular. NaN and values past 64 bits give 0.
template <typename T>
T WrapToInteger(double value) {
  if (value >= 0x1p63 && value < 0x1p64) return static_cast<T>(static_cast<uint64_t>(value));
  if (!(value >= -0x1p63 && value < 0x1p63)) return 0;
  return static_cast<T>(static_cast<int64_t>(value));
}

uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

float BitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  if (exp == 0x1f) return BitsFloat(sign | 0x7f800000u | (mant << 13));  // inf / NaN
  if (exp == 0) {
    if (mant == 0) return BitsFloat(sign);
    // Subnormal half: renormalise into a normal float.
    exp = 127 - 15 + 1;
    while ((mant & 0x400) == 0) {
      mant <<= 1;
      --exp;
    }
    mant &= 0x3ff;
    return BitsFloat(sign | (exp << 23) | (mant << 13));
  }
  return BitsFloat(sign | ((exp + 127 - 15) << 23) | (mant << 13));
}

// Round-to-nearest-even; the patterns only store small integers, but do it right
// for normal numbers anyway and flush values below the half range to zero.
uint16_t FloatToHalf(float f) {
  const uint32_t u = FloatBits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000);
  const int32_t exp = static_cast<int32_t>((u >> 23) & 0xff) - 127 + 15;
  uint32_t mant = u & 0x7fffff;
  if (((u >> 23) & 0xff) == 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  if (exp >= 0x1f) return sign | 0x7c00;
  if (exp <= 0) return sign;
  uint32_t h = (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  const uint32_t rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;  // may carry into exponent: correct
  return static_cast<uint16_t>(sign | h);
}

float Bf16ToFloat(uint16_t b) { return BitsFloat(static_cast<uint32_t>(b) << 16); }

uint16_t FloatToBf16(float f) {
  const uint32_t u = FloatBits(f);
  if ((u & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((u >> 16) | 0x40);  // keep NaN
  return static_cast<uint16_t>((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

// e5m2 is the upper byte of an IEEE half: convert through half, rounding the low
// byte to nearest-even (a carry into the exponent is the correct result).
float E5M2ToFloat(uint8_t b) { return HalfToFloat(static_cast<uint16_t>(b << 8)); }

uint8_t FloatToE5M2(float f) {
  const uint16_t h = FloatToHalf(f);
  if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0) return static_cast<uint8_t>((h >> 8) | 0x02);  // keep NaN
  uint32_t hi = h >> 8;
  const uint32_t rest = h & 0xff;
  if (rest > 0x80 || (rest == 0x80 && (hi & 1))) ++hi;
  return static_cast<uint8_t>(hi);
}

// e4m3 "fn" (what NCCL's ncclFloat8e4m3 is): bias 7, no infinities, S.1111.111 is
// NaN, so the largest finite value is 448.
float E4M3ToFloat(uint8_t b) {
  const float sign = (b & 0x80) ? -1.0f : 1.0f;
  const int exp = (b >> 3) & 0xf;
  const int mant = b & 0x7;
  if (exp == 0xf && mant == 0x7) return std::numeric_limits<float>::quiet_NaN();
  if (exp == 0) return sign * std::ldexp(static_cast<float>(mant), -9);  // subnormal: mant/8 * 2^-6
  return sign * std::ldexp(1.0f + static_cast<float>(mant) / 8, exp - 7);
}

// Round-to-nearest-even onto the e4m3 grid, saturating at 448 like NCCL's
// conversion (there is no infinity to overflow to).
uint8_t FloatToE4M3(float f) {
  const uint8_t sign = std::signbit(f) ? 0x80 : 0;
  if (std::isnan(f)) return sign | 0x7f;
  const double a = std::fabs(static_cast<double>(f));
  if (a == 0) return sign;
  int e;
  std::frexp(a, &e);  // a = m * 2^e with m in [0.5, 1)
  const int unbiased = std::max(e - 1, -6);  // below 2^-6 the grid is the subnormal one
  const double quantum = std::ldexp(1.0, unbiased - 3);
  const double v = std::nearbyint(a / quantum) * quantum;  // default rounding mode: ties to even
  if (v >= 448) return sign | 0x7e;
  if (v == 0) return sign;
  std::frexp(v, &e);
  if (e - 1 < -6) return sign | static_cast<uint8_t>(std::ldexp(v, 9));  // subnormal
  const int field = e - 1 + 7;
  const int mant = static_cast<int>(std::ldexp(v, -(e - 1)) * 8) - 8;
  return sign | static_cast<uint8_t>(field << 3) | static_cast<uint8_t>(mant);
}

}  // namespace

const DtypeInfo* FindDtype(std::string_view name) {
  for (const Alias& a : kAliases) {
    if (a.alias == name) name = a.name;
  }
  for (const DtypeInfo& t : kTypes) {
    if (name == t.name) return &t;
  }
  return nullptr;
}

std::span<const DtypeInfo> AllDtypes() { return kTypes; }

const char* DtypeNames() {
  return "int8 uint8 int32 uint32 int64 uint64 half float double bfloat16 f8e4m3 f8e5m2";
}

double LoadElement(const DtypeInfo& dt, const void* base, size_t index) {
  switch (dt.type) {
    case ncclFloat32: return Load<float>(base, index);
    case ncclFloat16: return HalfToFloat(Load<uint16_t>(base, index));
    case ncclBfloat16: return Bf16ToFloat(Load<uint16_t>(base, index));
    case ncclFloat64: return Load<double>(base, index);
    case ncclInt8: return Load<int8_t>(base, index);
    case ncclUint8: return Load<uint8_t>(base, index);
    case ncclInt32: return Load<int32_t>(base, index);
    case ncclUint32: return Load<uint32_t>(base, index);
    case ncclInt64: return static_cast<double>(Load<int64_t>(base, index));
    case ncclUint64: return static_cast<double>(Load<uint64_t>(base, index));
    case ncclFloat8e4m3: return E4M3ToFloat(Load<uint8_t>(base, index));
    case ncclFloat8e5m2: return E5M2ToFloat(Load<uint8_t>(base, index));
    default: return 0;
  }
}

void StoreElement(const DtypeInfo& dt, void* base, size_t index, double value) {
  switch (dt.type) {
    case ncclFloat32: Store(base, index, static_cast<float>(value)); break;
    case ncclFloat16: Store(base, index, FloatToHalf(static_cast<float>(value))); break;
    case ncclBfloat16: Store(base, index, FloatToBf16(static_cast<float>(value))); break;
    case ncclFloat64: Store(base, index, value); break;
    case ncclInt8: Store(base, index, WrapToInteger<int8_t>(value)); break;
    case ncclUint8: Store(base, index, WrapToInteger<uint8_t>(value)); break;
    case ncclInt32: Store(base, index, WrapToInteger<int32_t>(value)); break;
    case ncclUint32: Store(base, index, WrapToInteger<uint32_t>(value)); break;
    case ncclInt64: Store(base, index, WrapToInteger<int64_t>(value)); break;
    case ncclUint64: Store(base, index, WrapToInteger<uint64_t>(value)); break;
    case ncclFloat8e4m3: Store(base, index, FloatToE4M3(static_cast<float>(value))); break;
    case ncclFloat8e5m2: Store(base, index, FloatToE5M2(static_cast<float>(value))); break;
    default: break;
  }
}

}  // namespace conduit::perf
