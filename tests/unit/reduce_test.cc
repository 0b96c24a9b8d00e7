// Tests for reduce: every type x op against an independent reference, the
// narrow-float conversions against a brute-force nearest-value search, and the
// aliasing / alignment / length edge cases of the kernels, each on every instruction
// set the loops are built for that this CPU runs (the others are skipped).
#include "reduce/reduce.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace conduit {
namespace {

// ---- Independent reference for the narrow formats ----

// Describes a narrow format by its field widths only; values are computed with
// ldexp in double, sharing nothing with the bit tricks under test.
struct Format {
  const char* name;
  int exp_bits;
  int mant_bits;
  int bias;
  bool has_inf;  // false: e4m3fn (all-ones exponent is a binade, only S.1111.111 is NaN)
};

constexpr Format kHalf{"half", 5, 10, 15, true};
constexpr Format kBf16{"bf16", 8, 7, 127, true};
constexpr Format kE4M3{"e4m3", 4, 3, 7, false};
constexpr Format kE5M2{"e5m2", 5, 2, 15, true};

int Bits(const Format& f) { return 1 + f.exp_bits + f.mant_bits; }

double RefDecode(const Format& f, uint32_t code) {
  const int e_all = (1 << f.exp_bits) - 1;
  const bool neg = (code >> (f.exp_bits + f.mant_bits)) & 1;
  const int exp = (code >> f.mant_bits) & e_all;
  const int mant = code & ((1 << f.mant_bits) - 1);
  double v;
  if (f.has_inf && exp == e_all) {
    v = mant == 0 ? std::numeric_limits<double>::infinity() : std::nan("");
  } else if (!f.has_inf && exp == e_all && mant == (1 << f.mant_bits) - 1) {
    v = std::nan("");
  } else if (exp == 0) {
    v = std::ldexp(mant, 1 - f.bias - f.mant_bits);
  } else {
    v = std::ldexp(mant + (1 << f.mant_bits), exp - f.bias - f.mant_bits);
  }
  return neg ? -v : v;
}

// Positive finite codes in increasing order (codes of a sign-magnitude format are
// ordered like their values), plus the largest one.
struct FiniteTable {
  std::vector<uint32_t> codes;
  std::vector<double> values;
};

const FiniteTable& Finite(const Format& f) {
  static FiniteTable tables[4];
  FiniteTable& t = tables[&f == &kHalf ? 0 : &f == &kBf16 ? 1 : &f == &kE4M3 ? 2 : 3];
  if (t.codes.empty()) {
    const uint32_t sign = 1u << (f.exp_bits + f.mant_bits);
    for (uint32_t c = 0; c < sign; ++c) {
      const double v = RefDecode(f, c);
      if (std::isfinite(v)) {
        t.codes.push_back(c);
        t.values.push_back(v);
      }
    }
  }
  return t;
}

// Round-to-nearest-even by searching the table of representable values.
uint32_t RefEncode(const Format& f, double x) {
  const uint32_t sign = x < 0 || (x == 0 && std::signbit(x)) ? 1u << (f.exp_bits + f.mant_bits) : 0;
  if (std::isnan(x)) return sign | ((1u << (f.exp_bits + f.mant_bits)) - 1);  // some NaN
  const double ax = std::fabs(x);
  const FiniteTable& t = Finite(f);
  const size_t last = t.values.size() - 1;
  // Beyond the largest finite value the next "value" is max + ulp(max), encoded
  // as the following code (infinity for IEEE-like formats).
  const double max = t.values[last];
  const double next = max + (max - t.values[last - 1]);
  if (ax >= next || std::isinf(ax)) return sign | (f.has_inf ? t.codes[last] + 1 : t.codes[last]);
  uint32_t lo_code, hi_code;
  double lo, hi;
  const size_t i = std::upper_bound(t.values.begin(), t.values.end(), ax) - t.values.begin();
  if (i > last) {
    lo_code = t.codes[last], lo = max, hi_code = t.codes[last] + 1, hi = next;
  } else {
    lo_code = t.codes[i - 1], lo = t.values[i - 1], hi_code = t.codes[i], hi = t.values[i];
  }
  uint32_t code;
  if (ax - lo < hi - ax) {
    code = lo_code;
  } else if (ax - lo > hi - ax) {
    code = hi_code;
  } else {
    code = (lo_code & 1) == 0 ? lo_code : hi_code;
  }
  if (!f.has_inf) code = std::min(code, t.codes[last]);  // e4m3 saturates
  return sign | code;
}

bool IsNanCode(const Format& f, uint32_t code) { return std::isnan(RefDecode(f, code)); }

float ApiDecode(const Format& f, uint32_t c) {
  if (&f == &kHalf) return HalfToFloat(static_cast<uint16_t>(c));
  if (&f == &kBf16) return Bf16ToFloat(static_cast<uint16_t>(c));
  if (&f == &kE4M3) return Fp8E4M3ToFloat(static_cast<uint8_t>(c));
  return Fp8E5M2ToFloat(static_cast<uint8_t>(c));
}

uint32_t ApiEncode(const Format& f, float x) {
  if (&f == &kHalf) return FloatToHalf(x);
  if (&f == &kBf16) return FloatToBf16(x);
  if (&f == &kE4M3) return FloatToFp8E4M3(x);
  return FloatToFp8E5M2(x);
}

const Format* const kFormats[] = {&kHalf, &kBf16, &kE4M3, &kE5M2};

// ---- Conversion tests ----

TEST(FloatFormats, DecodeEveryPattern) {
  for (const Format* f : kFormats) {
    for (uint32_t c = 0; c < (1u << Bits(*f)); ++c) {
      const double want = RefDecode(*f, c);
      const float got = ApiDecode(*f, c);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << f->name << " code " << c;
      } else {
        EXPECT_EQ(static_cast<double>(got), want) << f->name << " code " << c;
        EXPECT_EQ(std::signbit(got), std::signbit(want)) << f->name << " code " << c;
      }
    }
  }
}

TEST(FloatFormats, RoundTripEveryPattern) {
  for (const Format* f : kFormats) {
    for (uint32_t c = 0; c < (1u << Bits(*f)); ++c) {
      const uint32_t back = ApiEncode(*f, ApiDecode(*f, c));
      if (IsNanCode(*f, c)) {
        EXPECT_TRUE(IsNanCode(*f, back)) << f->name << " code " << c;
      } else {
        EXPECT_EQ(back, c) << f->name << " code " << c;
      }
    }
  }
}

// Midpoints between neighbours (ties) and the floats just either side of them are
// where rounding goes wrong; check all of them, for both signs.
TEST(FloatFormats, EncodeRoundsToNearestEven) {
  for (const Format* f : kFormats) {
    const FiniteTable& t = Finite(*f);
    std::vector<float> probes;
    for (size_t i = 0; i + 1 < t.values.size(); ++i) {
      const float mid = static_cast<float>((t.values[i] + t.values[i + 1]) / 2);
      probes.insert(probes.end(), {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f)});
    }
    const double max = t.values.back();
    const float above = static_cast<float>(max + (max - t.values[t.values.size() - 2]) / 2);
    probes.insert(probes.end(), {above, std::nextafter(above, 0.0f), std::nextafter(above, 1e30f),
                                 static_cast<float>(max) * 4, 1e30f,
                                 std::numeric_limits<float>::infinity(),
                                 std::numeric_limits<float>::denorm_min(), 1e-30f});
    std::mt19937 rng(7);
    std::uniform_real_distribution<double> exponent(-30, 20);
    for (int i = 0; i < 20000; ++i) probes.push_back(static_cast<float>(std::exp2(exponent(rng))));
    for (float p : probes) {
      for (float x : {p, -p}) {
        EXPECT_EQ(ApiEncode(*f, x), RefEncode(*f, x)) << f->name << " x=" << x;
      }
    }
  }
}

TEST(FloatFormats, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(FloatToHalf(inf), 0x7c00);
  EXPECT_EQ(FloatToHalf(-inf), 0xfc00);
  EXPECT_EQ(FloatToHalf(65519.99f), 0x7bff);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);  // tie with odd max rounds to inf
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);     // tie to even (zero)
  EXPECT_EQ(FloatToHalf(std::ldexp(3.0f, -25)), 0x0002);     // tie to even (2)
  EXPECT_EQ(FloatToHalf(std::ldexp(1023.5f, -24)), 0x0400);  // rounds up into normals
  EXPECT_EQ(FloatToHalf(nan) & 0x7fff, 0x7e00);
  EXPECT_TRUE(std::isnan(HalfToFloat(0x7c01)));
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(-nan))));

  EXPECT_EQ(FloatToBf16(inf), 0x7f80);
  EXPECT_EQ(FloatToBf16(3.4e38f), 0x7f80);  // past the top rounds to inf
  EXPECT_EQ(FloatToBf16(-0.0f), 0x8000);
  // A NaN whose payload lives only in the low 16 bits must stay NaN.
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(std::bit_cast<float>(0x7f800001u)))));

  // e4m3fn: no inf; overflow and inf saturate to +-448; NaN is S.1111.111.
  EXPECT_EQ(Fp8E4M3ToFloat(0x7e), 448.0f);
  EXPECT_EQ(FloatToFp8E4M3(448.0f), 0x7e);
  EXPECT_EQ(FloatToFp8E4M3(1000.0f), 0x7e);
  EXPECT_EQ(FloatToFp8E4M3(-1e30f), 0xfe);
  EXPECT_EQ(FloatToFp8E4M3(inf), 0x7e);
  EXPECT_EQ(FloatToFp8E4M3(-inf), 0xfe);
  EXPECT_EQ(FloatToFp8E4M3(nan), 0x7f);
  EXPECT_EQ(FloatToFp8E4M3(-nan), 0xff);
  EXPECT_TRUE(std::isnan(Fp8E4M3ToFloat(0xff)));
  EXPECT_EQ(Fp8E4M3ToFloat(0x01), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_EQ(FloatToFp8E4M3(std::ldexp(1.0f, -10)), 0x00);  // tie to even

  EXPECT_EQ(Fp8E5M2ToFloat(0x7b), 57344.0f);
  EXPECT_EQ(FloatToFp8E5M2(61440.0f), 0x7c);  // tie with odd max rounds to inf
  EXPECT_EQ(FloatToFp8E5M2(61439.0f), 0x7b);
  EXPECT_EQ(FloatToFp8E5M2(-inf), 0xfc);
  EXPECT_TRUE(std::isnan(Fp8E5M2ToFloat(FloatToFp8E5M2(nan))));
  EXPECT_EQ(Fp8E5M2ToFloat(0x01), std::ldexp(1.0f, -16));
}

// ---- Type metadata ----

TEST(DataTypes, SizesNamesValidity) {
  const size_t sizes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  for (int t = 0; t < ncclNumTypes; ++t) {
    EXPECT_EQ(DataTypeSize(static_cast<ncclDataType_t>(t)), sizes[t]);
    EXPECT_STRNE(DataTypeName(static_cast<ncclDataType_t>(t)), "invalid");
    EXPECT_TRUE(IsValidDataType(t));
  }
  EXPECT_FALSE(IsValidDataType(-1));
  EXPECT_FALSE(IsValidDataType(ncclNumTypes));
  EXPECT_EQ(DataTypeSize(static_cast<ncclDataType_t>(ncclNumTypes)), 0u);
  EXPECT_STREQ(DataTypeName(ncclFloat32), "float32");
}

// ---- Generic element access for the reduction references ----

const Format* NarrowFormat(ncclDataType_t t) {
  switch (t) {
    case ncclFloat16: return &kHalf;
    case ncclBfloat16: return &kBf16;
    case ncclFloat8e4m3: return &kE4M3;
    case ncclFloat8e5m2: return &kE5M2;
    default: return nullptr;
  }
}

bool IsIntType(ncclDataType_t t) { return t <= ncclUint64; }
bool IsSignedInt(ncclDataType_t t) { return t == ncclInt8 || t == ncclInt32 || t == ncclInt64; }

// Raw element bits, zero-extended.
uint64_t LoadRaw(ncclDataType_t t, const void* base, size_t i) {
  const size_t size = DataTypeSize(t);
  uint64_t v = 0;
  std::memcpy(&v, static_cast<const char*>(base) + i * size, size);  // little-endian
  return v;
}

void StoreRaw(ncclDataType_t t, void* base, size_t i, uint64_t v) {
  const size_t size = DataTypeSize(t);
  std::memcpy(static_cast<char*>(base) + i * size, &v, size);
}

uint64_t Mask(ncclDataType_t t) {
  const size_t bits = 8 * DataTypeSize(t);
  return bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
}

// Sign-extended value of an integer element, as int64 (exact for every int type
// except uint64 beyond 2^63, which only max/min compare, handled separately).
int64_t SignedValue(ncclDataType_t t, uint64_t raw) {
  const int bits = static_cast<int>(8 * DataTypeSize(t));
  if (bits == 64) return static_cast<int64_t>(raw);
  const uint64_t sign = uint64_t{1} << (bits - 1);
  return static_cast<int64_t>((raw ^ sign) - sign);
}

bool IntLess(ncclDataType_t t, uint64_t a, uint64_t b) {
  return IsSignedInt(t) ? SignedValue(t, a) < SignedValue(t, b) : a < b;
}

double FloatValue(ncclDataType_t t, uint64_t raw) {
  if (const Format* f = NarrowFormat(t)) return RefDecode(*f, static_cast<uint32_t>(raw));
  if (t == ncclFloat32) return std::bit_cast<float>(static_cast<uint32_t>(raw));
  return std::bit_cast<double>(raw);
}

uint64_t FloatRaw(ncclDataType_t t, double v) {
  if (const Format* f = NarrowFormat(t)) return RefEncode(*f, v);
  // double -> float rounding of a double that is the exact (or, for sums, once
  // rounded to 53 bits) result of one float op is the correctly rounded float.
  if (t == ncclFloat32) return std::bit_cast<uint32_t>(static_cast<float>(v));
  return std::bit_cast<uint64_t>(v);
}

double RefFloatOp(ncclRedOp_t op, double a, double b) {
  if ((op == ncclMax || op == ncclMin) && (std::isnan(a) || std::isnan(b))) return std::nan("");
  switch (op) {
    case ncclSum: return a + b;
    case ncclProd: return a * b;
    case ncclMax: return std::max(a, b);
    default: return std::min(a, b);
  }
}

// Integer results modulo 2^bits: unsigned 64-bit arithmetic wraps, then masking
// keeps the low bits, which is the two's complement wrap-around for signed types.
uint64_t RefIntOp(ncclDataType_t t, ncclRedOp_t op, uint64_t a, uint64_t b) {
  switch (op) {
    case ncclSum: return (a + b) & Mask(t);
    case ncclProd: return (a * b) & Mask(t);
    case ncclMax: return IntLess(t, a, b) ? b : a;
    default: return IntLess(t, a, b) ? a : b;
  }
}

uint64_t RefElement(ncclDataType_t t, ncclRedOp_t op, uint64_t a, uint64_t b) {
  if (IsIntType(t)) return RefIntOp(t, op, a, b);
  // Double holds the exact sum/product of two narrow values or of two floats'
  // product; the float sum may round once in double, which is harmless (53 >= 2*24+2).
  return FloatRaw(t, RefFloatOp(op, FloatValue(t, a), FloatValue(t, b)));
}

// Equal bits, except any NaN matches any NaN and, for max/min, +0 matches -0
// (which zero wins a tie between them is unspecified).
void ExpectElementsMatch(ncclDataType_t t, ncclRedOp_t op, const void* got, const void* want,
                         size_t n, const std::string& what) {
  int failures = 0;
  for (size_t i = 0; i < n && failures < 5; ++i) {
    const uint64_t g = LoadRaw(t, got, i);
    const uint64_t w = LoadRaw(t, want, i);
    if (g == w) continue;
    if (!IsIntType(t)) {
      const double gv = FloatValue(t, g);
      const double wv = FloatValue(t, w);
      if (std::isnan(gv) && std::isnan(wv)) continue;
      if ((op == ncclMax || op == ncclMin) && gv == 0 && wv == 0) continue;
    }
    ADD_FAILURE() << what << " " << DataTypeName(t) << " op " << op << " element " << i
                  << ": got 0x" << std::hex << g << " want 0x" << w;
    ++failures;
  }
}

// Random elements: integer types get uniformly random bits (so sums and products
// overflow often); floats get a spread of magnitudes and a sprinkling of zeros of
// both signs, infinities, NaNs and subnormals; narrow formats get random codes.
std::vector<char> RandomBuffer(ncclDataType_t t, size_t n, std::mt19937_64& rng) {
  std::vector<char> buf(n * DataTypeSize(t));
  std::uniform_real_distribution<double> mant(1, 2);
  std::uniform_int_distribution<int> exp_dist(-20, 20);
  for (size_t i = 0; i < n; ++i) {
    uint64_t raw = rng() & Mask(t);
    if (t == ncclFloat32 || t == ncclFloat64) {
      double v = std::ldexp(mant(rng), exp_dist(rng)) * (rng() & 1 ? -1 : 1);
      switch (rng() % 64) {
        case 0: v = 0.0; break;
        case 1: v = -0.0; break;
        case 2: v = std::numeric_limits<double>::infinity(); break;
        case 3: v = -std::numeric_limits<double>::infinity(); break;
        case 4: v = std::nan(""); break;
        case 5: v = t == ncclFloat32 ? std::numeric_limits<float>::denorm_min() * 3
                                     : std::numeric_limits<double>::denorm_min() * 3; break;
        default: break;
      }
      raw = t == ncclFloat32 ? std::bit_cast<uint32_t>(static_cast<float>(v))
                             : std::bit_cast<uint64_t>(v);
    } else if (t == ncclBfloat16 && rng() % 2) {
      raw = FloatToBf16(static_cast<float>(std::ldexp(mant(rng), exp_dist(rng))));  // overlapping scales
    }
    StoreRaw(t, buf.data(), i, raw);
  }
  return buf;
}

std::vector<char> Reference(ncclDataType_t t, ncclRedOp_t op, const std::vector<char>& a,
                            const std::vector<char>& b, size_t n) {
  std::vector<char> out(a.size());
  for (size_t i = 0; i < n; ++i) {
    StoreRaw(t, out.data(), i, RefElement(t, op, LoadRaw(t, a.data(), i), LoadRaw(t, b.data(), i)));
  }
  return out;
}

// ---- Reduction tests: every type x op x length ----

constexpr ReduceIsa kIsas[] = {ReduceIsa::kBaseline, ReduceIsa::kAvx2, ReduceIsa::kAvx512};

// Runs a test on one instruction set's loops, then puts back the one the process chose.
template <typename Param>
class OnIsa : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    const ReduceIsa isa = this->GetParam().isa;
    if (!SetReduceIsa(isa)) {
      GTEST_SKIP() << "this CPU does not run the " << ReduceIsaName(isa) << " loops";
    }
  }
  void TearDown() override { SetReduceIsa(chosen_); }

 private:
  const ReduceIsa chosen_ = ActiveReduceIsa();
};

struct Case {
  ncclDataType_t type;
  ncclRedOp_t op;
  ReduceIsa isa;
};

using ReduceTest = OnIsa<Case>;

TEST_P(ReduceTest, MatchesReference) {
  const auto [t, op, isa] = GetParam();
  std::mt19937_64 rng(1000 * t + op);
  for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{4097}}) {
    const std::string len = "n=" + std::to_string(n);
    const std::vector<char> a = RandomBuffer(t, n, rng);
    const std::vector<char> b = RandomBuffer(t, n, rng);
    const std::vector<char> want = Reference(t, op, a, b, n);

    std::vector<char> acc = a;
    ReduceInto(acc.data(), b.data(), n, t, op);
    ExpectElementsMatch(t, op, acc.data(), want.data(), n, "ReduceInto " + len);

    std::vector<char> out(a.size(), 0x5a);
    Reduce2(out.data(), a.data(), b.data(), n, t, op);
    ExpectElementsMatch(t, op, out.data(), want.data(), n, "Reduce2 " + len);

    std::vector<char> alias_a = a;
    Reduce2(alias_a.data(), alias_a.data(), b.data(), n, t, op);
    ExpectElementsMatch(t, op, alias_a.data(), want.data(), n, "Reduce2 out=a " + len);

    std::vector<char> alias_b = b;
    Reduce2(alias_b.data(), a.data(), alias_b.data(), n, t, op);
    ExpectElementsMatch(t, op, alias_b.data(), want.data(), n, "Reduce2 out=b " + len);

    // Misaligned by one byte (and, separately, by one element, which keeps element
    // alignment but breaks vector alignment), inputs and output offset differently.
    for (size_t shift : {size_t{1}, DataTypeSize(t)}) {
      const size_t bytes = a.size();
      std::vector<char> ua(bytes + 16), ub(bytes + 16), uo(bytes + 16);
      char* pa = ua.data() + shift;
      char* pb = ub.data() + 2 * shift % 16 + 1;
      char* po = uo.data() + 3;
      if (bytes > 0) {
        std::memcpy(pa, a.data(), bytes);
        std::memcpy(pb, b.data(), bytes);
      }
      Reduce2(po, pa, pb, n, t, op);
      ExpectElementsMatch(t, op, po, want.data(), n, "Reduce2 unaligned " + len);
      ReduceInto(pa, pb, n, t, op);
      ExpectElementsMatch(t, op, pa, want.data(), n, "ReduceInto unaligned " + len);
    }
  }
}

TEST_P(ReduceTest, SelfReduce) {
  const auto [t, op, isa] = GetParam();
  std::mt19937_64 rng(77 + t);
  const size_t n = 33;
  const std::vector<char> a = RandomBuffer(t, n, rng);
  const std::vector<char> want = Reference(t, op, a, a, n);
  std::vector<char> buf = a;
  Reduce2(buf.data(), buf.data(), buf.data(), n, t, op);
  ExpectElementsMatch(t, op, buf.data(), want.data(), n, "Reduce2 out=a=b");
}

std::vector<Case> AllCases() {
  std::vector<Case> cases;
  for (ReduceIsa isa : kIsas) {
    for (int t = 0; t < ncclNumTypes; ++t) {
      for (ncclRedOp_t op : {ncclSum, ncclProd, ncclMax, ncclMin}) {
        cases.push_back({static_cast<ncclDataType_t>(t), op, isa});
      }
    }
  }
  return cases;
}

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  static const char* const kOps[] = {"sum", "prod", "max", "min"};
  return std::string(ReduceIsaName(info.param.isa)) + "_" + DataTypeName(info.param.type) + "_" + kOps[info.param.op];
}

INSTANTIATE_TEST_SUITE_P(AllTypesAndOps, ReduceTest, ::testing::ValuesIn(AllCases()), CaseName);

// fp8 is small enough to check whole: every pair of codes through every op, and every code
// scaled and divided, bit for bit (NaN signs included) against the per-element
// definition, on every instruction set. (The loops widen and narrow fp8 a block at a
// time by other means than the conversions below.)
using Fp8Test = OnIsa<Case>;

TEST_P(Fp8Test, EveryPairEveryScaleEveryDivisorBitForBit) {
  const auto [t, op, isa] = GetParam();
  const Format& f = *NarrowFormat(t);
  auto value = [&f](uint8_t code) { return ApiDecode(f, code); };
  auto code_of = [&f](float x) { return static_cast<uint8_t>(ApiEncode(f, x)); };
  const size_t n = 256 * 256 + 5;  // and a tail the blocks do not fill
  std::vector<uint8_t> a(n), b(n), out(n), want(n);
  for (size_t i = 0; i < n; ++i) {
    a[i] = static_cast<uint8_t>(i);
    b[i] = static_cast<uint8_t>(i >> 8);
    const float x = value(a[i]), y = value(b[i]);
    float r = 0;
    switch (op) {
      case ncclSum: r = x + y; break;
      case ncclProd: r = x * y; break;
      case ncclMax: r = (x > y || x != x) ? x : y; break;
      default: r = (x < y || x != x) ? x : y; break;
    }
    want[i] = code_of(r);
  }
  Reduce2(out.data(), a.data(), b.data(), n, t, op);
  size_t wrong = 0;
  for (size_t i = 0; i < n; ++i) {
    // Which of two NaNs an addition or multiplication passes on is the compiler's choice
    // of operand order, here and in the loops: only that it is a NaN is checked then.
    const bool both_nan = IsNanCode(f, a[i]) && IsNanCode(f, b[i]);
    if (both_nan && (op == ncclSum || op == ncclProd) && IsNanCode(f, out[i])) continue;
    if (out[i] != want[i] && ++wrong <= 5) {
      ADD_FAILURE() << DataTypeName(t) << " " << int(a[i]) << " op " << int(b[i]) << ": got " << int(out[i])
                    << " want " << int(want[i]);
    }
  }
  EXPECT_EQ(wrong, 0u);
  if (op != ncclSum) return;  // scaling and division once per type and instruction set
  // 1 (e4m3), the smallest subnormal, large (352 in e4m3, 57344 in e5m2), negative; none a NaN
  for (uint8_t s : {uint8_t{0x38}, uint8_t{0x01}, uint8_t{0x7b}, uint8_t{0xb5}}) {
    std::vector<uint8_t> buf(a.begin(), a.begin() + 256 + 3);
    ScaleInPlace(buf.data(), buf.size(), t, &s);
    for (size_t i = 0; i < buf.size(); ++i) {
      EXPECT_EQ(buf[i], code_of(value(a[i]) * value(s))) << "scale " << int(a[i]) << " by " << int(s);
    }
  }
  for (int d : {1, 3, 8}) {
    std::vector<uint8_t> buf(a.begin(), a.begin() + 256 + 3);
    DivideInPlace(buf.data(), buf.size(), t, d);
    for (size_t i = 0; i < buf.size(); ++i) {
      EXPECT_EQ(buf[i], code_of(value(a[i]) / static_cast<float>(d))) << "divide " << int(a[i]) << " by " << d;
    }
  }
}

std::vector<Case> Fp8Cases() {
  std::vector<Case> cases;
  for (const Case& c : AllCases()) {
    if (c.type == ncclFloat8e4m3 || c.type == ncclFloat8e5m2) cases.push_back(c);
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Fp8, Fp8Test, ::testing::ValuesIn(Fp8Cases()), CaseName);

// ---- Hand-picked cases ----

TEST(Reduce, IntegerWrapAround) {
  int8_t i8[] = {127, -128, -128, 100};
  const int8_t i8b[] = {1, -1, -128, 3};
  ReduceInto(i8, i8b, 4, ncclInt8, ncclSum);
  EXPECT_EQ(i8[0], -128);
  EXPECT_EQ(i8[1], 127);
  EXPECT_EQ(i8[2], 0);
  EXPECT_EQ(i8[3], 103);

  int32_t i32[] = {std::numeric_limits<int32_t>::max(), 65536};
  const int32_t i32b[] = {1, 65536};
  ReduceInto(i32, i32b, 2, ncclInt32, ncclSum);
  EXPECT_EQ(i32[0], std::numeric_limits<int32_t>::min());
  ReduceInto(i32 + 1, i32b + 1, 1, ncclInt32, ncclProd);
  EXPECT_EQ(i32[1], 0);  // 131072 * 65536 = 2^33 wraps to 0

  uint64_t u64[] = {~uint64_t{0}};
  const uint64_t one[] = {1};
  ReduceInto(u64, one, 1, ncclUint64, ncclSum);
  EXPECT_EQ(u64[0], 0u);

  int64_t i64[] = {std::numeric_limits<int64_t>::min()};
  const int64_t m1[] = {-1};
  ReduceInto(i64, m1, 1, ncclInt64, ncclProd);
  EXPECT_EQ(i64[0], std::numeric_limits<int64_t>::min());

  uint8_t u8[] = {200, 16};
  const uint8_t u8b[] = {100, 16};
  ReduceInto(u8, u8b, 2, ncclUint8, ncclSum);
  EXPECT_EQ(u8[0], 44);
  ReduceInto(u8 + 1, u8b + 1, 1, ncclUint8, ncclProd);
  EXPECT_EQ(u8[1], 0);
}

TEST(Reduce, SignedAndUnsignedOrdering) {
  int8_t s[] = {-128, 127};
  const int8_t sb[] = {127, -128};
  ReduceInto(s, sb, 2, ncclInt8, ncclMax);
  EXPECT_EQ(s[0], 127);
  EXPECT_EQ(s[1], 127);
  uint32_t u[] = {0x80000000u};
  const uint32_t ub[] = {1};
  ReduceInto(u, ub, 1, ncclUint32, ncclMin);
  EXPECT_EQ(u[0], 1u);
}

TEST(Reduce, MaxMinPropagateNan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (ncclRedOp_t op : {ncclMax, ncclMin}) {
    float a[] = {nan, 1.0f, nan};
    const float b[] = {1.0f, nan, nan};
    ReduceInto(a, b, 3, ncclFloat32, op);
    for (float v : a) EXPECT_TRUE(std::isnan(v));
    uint16_t h[] = {0x7e00, 0x3c00};
    const uint16_t hb[] = {0x3c00, 0x7e00};
    ReduceInto(h, hb, 2, ncclFloat16, op);
    EXPECT_TRUE(std::isnan(HalfToFloat(h[0])));
    EXPECT_TRUE(std::isnan(HalfToFloat(h[1])));
  }
}

TEST(Reduce, NarrowOverflow) {
  uint8_t e4[] = {0x7e};  // 448
  const uint8_t e4b[] = {0x7e};
  ReduceInto(e4, e4b, 1, ncclFloat8e4m3, ncclSum);
  EXPECT_EQ(e4[0], 0x7e);  // saturates instead of producing NaN
  uint8_t e5[] = {0x7b};   // 57344
  ReduceInto(e5, e5, 1, ncclFloat8e5m2, ncclSum);
  EXPECT_EQ(e5[0], 0x7c);  // inf
  uint16_t h[] = {0x7bff};
  ReduceInto(h, h, 1, ncclFloat16, ncclSum);
  EXPECT_EQ(h[0], 0x7c00);
}

TEST(Reduce, AvgAccumulatesLikeSum) {
  float a[] = {1.0f, 2.0f};
  const float b[] = {3.0f, 5.0f};
  ReduceInto(a, b, 2, ncclFloat32, ncclAvg);
  DivideInPlace(a, 2, ncclFloat32, 2);
  EXPECT_EQ(a[0], 2.0f);
  EXPECT_EQ(a[1], 3.5f);
}

// ---- Scale and Divide ----

struct TypeCase {
  ncclDataType_t type;
  ReduceIsa isa;
};

using ScaleDivideTest = OnIsa<TypeCase>;

TEST_P(ScaleDivideTest, Scale) {
  const ncclDataType_t t = GetParam().type;
  std::mt19937_64 rng(500 + t);
  for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{4097}}) {
    const std::vector<char> a = RandomBuffer(t, n, rng);
    std::vector<char> scalar = RandomBuffer(t, 1, rng);
    if (!IsIntType(t)) StoreRaw(t, scalar.data(), 0, FloatRaw(t, 0.375));  // exact in all
    const uint64_t s = LoadRaw(t, scalar.data(), 0);
    std::vector<char> want(a.size());
    for (size_t i = 0; i < n; ++i) {
      StoreRaw(t, want.data(), i, RefElement(t, ncclProd, LoadRaw(t, a.data(), i), s));
    }
    std::vector<char> buf = a;
    ScaleInPlace(buf.data(), n, t, scalar.data());
    ExpectElementsMatch(t, ncclProd, buf.data(), want.data(), n, "Scale");
    // Unaligned buffer and scalar.
    std::vector<char> ubuf(a.size() + 1), uscalar(DataTypeSize(t) + 1);
    if (n > 0) std::memcpy(ubuf.data() + 1, a.data(), a.size());
    std::memcpy(uscalar.data() + 1, scalar.data(), DataTypeSize(t));
    ScaleInPlace(ubuf.data() + 1, n, t, uscalar.data() + 1);
    ExpectElementsMatch(t, ncclProd, ubuf.data() + 1, want.data(), n, "Scale unaligned");
  }
}

TEST_P(ScaleDivideTest, Divide) {
  const ncclDataType_t t = GetParam().type;
  std::mt19937_64 rng(900 + t);
  for (int divisor : {1, 3, 8}) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{4097}}) {
      const std::vector<char> a = RandomBuffer(t, n, rng);
      std::vector<char> want(a.size());
      for (size_t i = 0; i < n; ++i) {
        const uint64_t raw = LoadRaw(t, a.data(), i);
        uint64_t q;
        if (IsSignedInt(t)) {
          q = static_cast<uint64_t>(SignedValue(t, raw) / divisor) & Mask(t);  // truncates
        } else if (IsIntType(t)) {
          q = raw / static_cast<uint64_t>(divisor);
        } else {
          q = FloatRaw(t, FloatValue(t, raw) / divisor);
        }
        StoreRaw(t, want.data(), i, q);
      }
      std::vector<char> buf = a;
      DivideInPlace(buf.data(), n, t, divisor);
      ExpectElementsMatch(t, ncclSum, buf.data(), want.data(), n, "Divide");
      std::vector<char> ubuf(a.size() + 1);
      if (n > 0) std::memcpy(ubuf.data() + 1, a.data(), a.size());
      DivideInPlace(ubuf.data() + 1, n, t, divisor);
      ExpectElementsMatch(t, ncclSum, ubuf.data() + 1, want.data(), n, "Divide unaligned");
    }
  }
}

TEST(ScaleDivide, HandPicked) {
  int32_t v[] = {-7, 7, std::numeric_limits<int32_t>::min()};
  DivideInPlace(v, 3, ncclInt32, 2);
  EXPECT_EQ(v[0], -3);
  EXPECT_EQ(v[1], 3);
  EXPECT_EQ(v[2], std::numeric_limits<int32_t>::min() / 2);

  uint8_t u[] = {255};
  DivideInPlace(u, 1, ncclUint8, 300);  // the divisor is not truncated to 8 bits
  EXPECT_EQ(u[0], 0);

  int8_t s[] = {100};
  const int8_t three = 3;
  ScaleInPlace(s, 1, ncclInt8, &three);
  EXPECT_EQ(s[0], 44);  // 300 mod 256

  uint16_t h[] = {FloatToHalf(1.0f)};
  const uint16_t half_scalar = FloatToHalf(0.5f);
  ScaleInPlace(h, 1, ncclFloat16, &half_scalar);
  EXPECT_EQ(HalfToFloat(h[0]), 0.5f);

  double d[] = {1.0};
  DivideInPlace(d, 1, ncclFloat64, 3);
  EXPECT_EQ(d[0], 1.0 / 3.0);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, ScaleDivideTest,
                         ::testing::ValuesIn([] {
                           std::vector<TypeCase> cases;
                           for (ReduceIsa isa : kIsas) {
                             for (int t = 0; t < ncclNumTypes; ++t) {
                               cases.push_back({static_cast<ncclDataType_t>(t), isa});
                             }
                           }
                           return cases;
                         }()),
                         [](const ::testing::TestParamInfo<TypeCase>& info) {
                           return std::string(ReduceIsaName(info.param.isa)) + "_" + DataTypeName(info.param.type);
                         });

// ---- Instruction sets ----

TEST(Isa, BaselineAlwaysRunsAndTheChoiceIsTheBestAvailable) {
  EXPECT_TRUE(ReduceIsaAvailable(ReduceIsa::kBaseline));
  ReduceIsa best = ReduceIsa::kBaseline;
  for (ReduceIsa isa : kIsas) {
    if (ReduceIsaAvailable(isa)) best = isa;
  }
  // The test runs without CONDUIT_REDUCE_ISA (tools/run-tests does not set it).
  if (getenv("CONDUIT_REDUCE_ISA") == nullptr) {
    EXPECT_EQ(ActiveReduceIsa(), best);
  }
  EXPECT_FALSE(SetReduceIsa(static_cast<ReduceIsa>(7)));
  EXPECT_STREQ(ReduceIsaName(static_cast<ReduceIsa>(7)), "invalid");
  const ReduceIsa before = ActiveReduceIsa();
  EXPECT_TRUE(SetReduceIsa(ReduceIsa::kBaseline));
  EXPECT_EQ(ActiveReduceIsa(), ReduceIsa::kBaseline);
  EXPECT_TRUE(SetReduceIsa(before));
  std::printf("reduce loops this CPU runs:");
  for (ReduceIsa isa : kIsas) {
    if (ReduceIsaAvailable(isa)) std::printf(" %s", ReduceIsaName(isa));
  }
  std::printf("\n");
}

// Long buffers (vector main loops, not only the tails the reference cases above reach
// at n = 4097) give the baseline's results on every other set, for every type and op.
TEST(Isa, EverySetGivesTheBaselineResultsOnLongBuffers) {
  const ReduceIsa before = ActiveReduceIsa();
  const size_t n = 100003;
  for (int ti = 0; ti < ncclNumTypes; ++ti) {
    const auto t = static_cast<ncclDataType_t>(ti);
    std::mt19937_64 rng(4242 + ti);
    const std::vector<char> a = RandomBuffer(t, n, rng);
    const std::vector<char> b = RandomBuffer(t, n, rng);
    std::vector<char> scalar = RandomBuffer(t, 1, rng);
    if (!IsIntType(t)) StoreRaw(t, scalar.data(), 0, FloatRaw(t, 0.375));
    auto run = [&](ReduceIsa isa, ncclRedOp_t op, std::vector<char>* out, std::vector<char>* scaled,
                   std::vector<char>* divided) {
      EXPECT_TRUE(SetReduceIsa(isa));
      out->assign(a.size(), 0);
      Reduce2(out->data(), a.data(), b.data(), n, t, op);
      *scaled = a;
      ScaleInPlace(scaled->data(), n, t, scalar.data());
      *divided = a;
      DivideInPlace(divided->data(), n, t, 3);
    };
    for (ncclRedOp_t op : {ncclSum, ncclProd, ncclMax, ncclMin}) {
      std::vector<char> want, want_scaled, want_divided;
      run(ReduceIsa::kBaseline, op, &want, &want_scaled, &want_divided);
      for (ReduceIsa isa : {ReduceIsa::kAvx2, ReduceIsa::kAvx512}) {
        if (!ReduceIsaAvailable(isa)) continue;
        std::vector<char> got, got_scaled, got_divided;
        run(isa, op, &got, &got_scaled, &got_divided);
        const std::string what = std::string(ReduceIsaName(isa)) + " against baseline:";
        ExpectElementsMatch(t, op, got.data(), want.data(), n, what + " Reduce2");
        ExpectElementsMatch(t, ncclProd, got_scaled.data(), want_scaled.data(), n, what + " Scale");
        ExpectElementsMatch(t, ncclSum, got_divided.data(), want_divided.data(), n, what + " Divide");
      }
    }
  }
  SetReduceIsa(before);
}

}  // namespace
}  // namespace conduit
