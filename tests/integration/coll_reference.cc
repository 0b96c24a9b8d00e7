#include "coll_reference.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace conduit::it {
namespace {

uint64_t SplitMix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t Mask(const TypeInfo& t) { return t.size >= 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * t.size)) - 1; }

}  // namespace

uint64_t Mix(uint64_t a, uint64_t b) { return SplitMix(a ^ SplitMix(b)); }

Pattern::Pattern(const TypeInfo& type, Op op, uint64_t case_seed, int nranks)
    : type_(type), op_(op), seed_(case_seed), nranks_(nranks) {
  bool fp8 = type.kind == Kind::kFloat && type.size == 1;
  if (op == Op::kProd) {
    // Powers of two multiply exactly; half and fp8 would overflow 2^nranks, so use signs.
    if (type.kind == Kind::kFloat && (fp8 || type.type == ncclFloat16)) {
      sign_ = true;
    } else {
      pow2_ = true;
    }
    lo_ = 0;
    hi_ = 1;
  } else if (op == Op::kAvg || type.kind == Kind::kUnsigned) {
    // Non-negative so integer division truncation and floor agree.
    lo_ = 0;
    hi_ = fp8 ? 1 : 7;
  } else if (type.kind == Kind::kSigned) {
    lo_ = -4;
    hi_ = 3;
  } else {
    lo_ = fp8 ? -1 : -2;
    hi_ = fp8 ? 1 : 2;
  }
}

int64_t Pattern::Value(int rank, size_t index) const {
  uint64_t h = SplitMix(seed_ ^ SplitMix((static_cast<uint64_t>(rank) << 40) ^ index));
  auto k = lo_ + static_cast<int64_t>(h % static_cast<uint64_t>(hi_ - lo_ + 1));
  if (pow2_) return k == 0 ? 1 : 2;
  if (sign_) return k == 0 ? -1 : 1;
  return k;
}

void Pattern::Fill(void* dst, int rank, size_t first, size_t n) const {
  auto* p = static_cast<unsigned char*>(dst);
  for (size_t k = 0; k < n; ++k) StoreValue(type_, p + k * type_.size, Value(rank, first + k));
}

Expect Pattern::Copy(int rank, size_t index) const {
  Expect e;
  int64_t v = Value(rank, index);
  e.bits = static_cast<uint64_t>(v) & Mask(type_);
  e.value = static_cast<double>(v);
  return e;
}

Expect Pattern::Reduce(size_t index) const {
  Expect e;
  if (type_.kind != Kind::kFloat) {
    uint64_t acc = 0;
    int64_t best = Value(0, index);
    int64_t sum = 0;
    for (int r = 0; r < nranks_; ++r) {
      int64_t v = Value(r, index);
      auto uv = static_cast<uint64_t>(v);
      switch (op_) {
        case Op::kSum:
          acc += uv;
          break;
        case Op::kProd:
          acc = r == 0 ? uv : acc * uv;
          break;
        case Op::kMax:
          best = v > best ? v : best;
          break;
        case Op::kMin:
          best = v < best ? v : best;
          break;
        case Op::kAvg:
          sum += v;
          break;
        case Op::kPreMulSum:
          acc += static_cast<uint64_t>(Scalar(r)) * uv;
          break;
      }
    }
    if (op_ == Op::kMax || op_ == Op::kMin) acc = static_cast<uint64_t>(best);
    if (op_ == Op::kAvg) acc = static_cast<uint64_t>(sum / nranks_);
    e.bits = acc & Mask(type_);
    return e;
  }
  double acc = op_ == Op::kProd ? 1 : 0;
  double sumabs = 0;
  double best = static_cast<double>(Value(0, index));
  for (int r = 0; r < nranks_; ++r) {
    auto v = static_cast<double>(Value(r, index));
    switch (op_) {
      case Op::kSum:
        acc += v;
        sumabs += std::fabs(v);
        break;
      case Op::kProd:
        acc *= v;
        break;
      case Op::kMax:
        best = std::max(best, v);
        break;
      case Op::kMin:
        best = std::min(best, v);
        break;
      case Op::kAvg:
        acc += v / nranks_;
        sumabs += std::fabs(v) / nranks_;
        break;
      case Op::kPreMulSum:
        acc += Scalar(r) * v;
        sumabs += std::fabs(Scalar(r) * v);
        break;
    }
  }
  if (op_ == Op::kMax || op_ == Op::kMin) acc = best;
  e.value = acc;
  // Sums of integers are exact in any order while every partial sum is representable.
  e.exact = op_ != Op::kAvg && sumabs <= ExactIntLimit(type_);
  if (!e.exact) e.tol = (nranks_ + 2) * Epsilon(type_) * sumabs + Epsilon(type_) * std::fabs(acc);
  return e;
}

bool Pattern::Matches(const void* elem, const Expect& e) const {
  if (type_.kind != Kind::kFloat) return LoadIntBits(type_, elem) == e.bits;
  double got = LoadFloat(type_, elem);
  if (std::isnan(got)) return false;
  return e.exact ? got == e.value : std::fabs(got - e.value) <= e.tol;
}

std::string Pattern::Got(const void* elem) const {
  char buf[96];
  if (type_.kind == Kind::kFloat) {
    std::snprintf(buf, sizeof buf, "%.9g (bits 0x%llx)", LoadFloat(type_, elem),
                  static_cast<unsigned long long>(LoadIntBits(type_, elem)));
  } else {
    std::snprintf(buf, sizeof buf, "%lld (bits 0x%llx)", static_cast<long long>(LoadIntValue(type_, elem)),
                  static_cast<unsigned long long>(LoadIntBits(type_, elem)));
  }
  return buf;
}

std::string Pattern::Want(const Expect& e) const {
  char buf[96];
  if (type_.kind == Kind::kFloat) {
    if (e.exact) {
      std::snprintf(buf, sizeof buf, "%.9g exactly", e.value);
    } else {
      std::snprintf(buf, sizeof buf, "%.9g +- %.3g", e.value, e.tol);
    }
  } else {
    std::snprintf(buf, sizeof buf, "bits 0x%llx", static_cast<unsigned long long>(e.bits));
  }
  return buf;
}

}  // namespace conduit::it
