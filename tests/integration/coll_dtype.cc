#include "coll_dtype.h"

#include <cmath>
#include <cstring>

namespace conduit::it {
namespace {

const TypeInfo kTypes[] = {
    {ncclInt8, "int8", 1, Kind::kSigned, 0, 0, false},         {ncclUint8, "uint8", 1, Kind::kUnsigned, 0, 0, false},
    {ncclInt32, "int32", 4, Kind::kSigned, 0, 0, false},       {ncclUint32, "uint32", 4, Kind::kUnsigned, 0, 0, false},
    {ncclInt64, "int64", 8, Kind::kSigned, 0, 0, false},       {ncclUint64, "uint64", 8, Kind::kUnsigned, 0, 0, false},
    {ncclFloat16, "half", 2, Kind::kFloat, 5, 10, true},       {ncclFloat32, "float", 4, Kind::kFloat, 8, 23, true},
    {ncclFloat64, "double", 8, Kind::kFloat, 11, 52, true},    {ncclBfloat16, "bfloat16", 2, Kind::kFloat, 8, 7, true},
    {ncclFloat8e4m3, "fp8e4m3", 1, Kind::kFloat, 4, 3, false}, {ncclFloat8e5m2, "fp8e5m2", 1, Kind::kFloat, 5, 2, true},
};

uint64_t MaxFiniteBits(const TypeInfo& t) {
  uint64_t top_exp = (uint64_t{1} << t.exp_bits) - 1;
  uint64_t all_man = (uint64_t{1} << t.man_bits) - 1;
  // With infinities the top exponent is reserved; e4m3 only reserves mantissa 111 (NaN).
  if (t.has_inf) return ((top_exp - 1) << t.man_bits) | all_man;
  return (top_exp << t.man_bits) | (all_man - 1);
}

// Decodes the small-float formats (half, bf16, fp8) from their raw bits.
double DecodeSmall(const TypeInfo& t, uint64_t bits) {
  int bias = (1 << (t.exp_bits - 1)) - 1;
  uint64_t man_mask = (uint64_t{1} << t.man_bits) - 1;
  uint64_t exp_max = (uint64_t{1} << t.exp_bits) - 1;
  bool neg = (bits >> (t.exp_bits + t.man_bits)) & 1;
  uint64_t exp = (bits >> t.man_bits) & exp_max;
  uint64_t man = bits & man_mask;
  double mag;
  if (exp == 0) {
    mag = std::ldexp(static_cast<double>(man), 1 - bias - t.man_bits);
  } else if (t.has_inf && exp == exp_max) {
    mag = man == 0 ? INFINITY : NAN;
  } else if (!t.has_inf && exp == exp_max && man == man_mask) {
    mag = NAN;
  } else {
    mag = std::ldexp(static_cast<double>(man | (man_mask + 1)), static_cast<int>(exp) - bias - t.man_bits);
  }
  return neg ? -mag : mag;
}

uint64_t EncodeSmall(const TypeInfo& t, double v) {
  int bias = (1 << (t.exp_bits - 1)) - 1;
  uint64_t sign = std::signbit(v) ? uint64_t{1} << (t.exp_bits + t.man_bits) : 0;
  double a = std::fabs(v);
  if (a == 0) return sign;
  uint64_t max_bits = MaxFiniteBits(t);
  if (a >= DecodeSmall(t, max_bits)) return sign | max_bits;  // saturate: tests never need inf
  int e = 0;
  std::frexp(a, &e);
  int stored = e - 1 + bias;
  if (stored < 1) {
    // Subnormal: the quantum is fixed; a carry into 2^man_bits is exactly the smallest normal.
    auto q = static_cast<uint64_t>(std::nearbyint(std::ldexp(a, bias - 1 + t.man_bits)));
    return sign | q;
  }
  auto q = static_cast<uint64_t>(std::nearbyint(std::ldexp(a, t.man_bits - (e - 1))));
  if (q == (uint64_t{2} << t.man_bits)) {
    q >>= 1;
    ++stored;
  }
  uint64_t bits = (static_cast<uint64_t>(stored) << t.man_bits) | (q - (uint64_t{1} << t.man_bits));
  return sign | (bits > max_bits ? max_bits : bits);
}

}  // namespace

const TypeInfo& GetTypeInfo(ncclDataType_t type) {
  for (const TypeInfo& t : kTypes) {
    if (t.type == type) return t;
  }
  return kTypes[0];  // unreachable for valid types; callers only pass parsed types
}

const std::vector<ncclDataType_t>& AllTypes() {
  static const std::vector<ncclDataType_t> all = [] {
    std::vector<ncclDataType_t> v;
    for (const TypeInfo& t : kTypes) v.push_back(t.type);
    return v;
  }();
  return all;
}

bool ParseType(const std::string& name, ncclDataType_t* out) {
  // Accept the NCCL aliases too so command lines read naturally.
  static const struct {
    const char* alias;
    ncclDataType_t type;
  } kAliases[] = {{"char", ncclInt8},       {"int", ncclInt32},     {"float16", ncclFloat16}, {"float32", ncclFloat32},
                  {"float64", ncclFloat64}, {"bf16", ncclBfloat16}, {"e4m3", ncclFloat8e4m3}, {"e5m2", ncclFloat8e5m2}};
  for (const TypeInfo& t : kTypes) {
    if (name == t.name) {
      *out = t.type;
      return true;
    }
  }
  for (const auto& a : kAliases) {
    if (name == a.alias) {
      *out = a.type;
      return true;
    }
  }
  return false;
}

double ExactIntLimit(const TypeInfo& t) {
  if (t.kind != Kind::kFloat) return INFINITY;
  return std::ldexp(1.0, t.man_bits + 1);
}

double Epsilon(const TypeInfo& t) { return std::ldexp(1.0, -t.man_bits); }

void StoreFloat(const TypeInfo& t, void* dst, double v) {
  if (t.type == ncclFloat64) {
    std::memcpy(dst, &v, 8);
  } else if (t.type == ncclFloat32) {
    auto f = static_cast<float>(v);
    std::memcpy(dst, &f, 4);
  } else {
    uint64_t bits = EncodeSmall(t, v);
    std::memcpy(dst, &bits, t.size);  // little-endian host: low bytes first
  }
}

double LoadFloat(const TypeInfo& t, const void* src) {
  if (t.type == ncclFloat64) {
    double d;
    std::memcpy(&d, src, 8);
    return d;
  }
  if (t.type == ncclFloat32) {
    float f;
    std::memcpy(&f, src, 4);
    return f;
  }
  uint64_t bits = 0;
  std::memcpy(&bits, src, t.size);
  return DecodeSmall(t, bits);
}

void StoreInt(const TypeInfo& t, void* dst, uint64_t bits) { std::memcpy(dst, &bits, t.size); }

uint64_t LoadIntBits(const TypeInfo& t, const void* src) {
  uint64_t bits = 0;
  std::memcpy(&bits, src, t.size);
  return bits;
}

int64_t LoadIntValue(const TypeInfo& t, const void* src) {
  uint64_t bits = LoadIntBits(t, src);
  if (t.kind == Kind::kSigned && t.size < 8) {
    int shift = static_cast<int>(64 - 8 * t.size);
    return static_cast<int64_t>(bits << shift) >> shift;
  }
  return static_cast<int64_t>(bits);
}

void StoreValue(const TypeInfo& t, void* dst, int64_t v) {
  if (t.kind == Kind::kFloat) {
    StoreFloat(t, dst, static_cast<double>(v));
  } else {
    StoreInt(t, dst, static_cast<uint64_t>(v));
  }
}

}  // namespace conduit::it
