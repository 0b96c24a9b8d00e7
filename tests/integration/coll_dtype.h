// Element types of the NCCL API as coll_check sees them: size, integer or float, and
// conversions between host doubles/integers and the raw element bits (half, bfloat16
// and the two fp8 formats are encoded here because host C++ has no such types).
#ifndef CONDUIT_TESTS_INTEGRATION_COLL_DTYPE_H_
#define CONDUIT_TESTS_INTEGRATION_COLL_DTYPE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "nccl.h"

namespace conduit::it {

enum class Kind { kSigned, kUnsigned, kFloat };

struct TypeInfo {
  ncclDataType_t type;
  const char* name;
  size_t size;
  Kind kind;
  int exp_bits;  // float formats only
  int man_bits;  // explicit mantissa bits (float formats only)
  bool has_inf;  // fp8 e4m3 spends its top exponent on normal numbers instead
};

const TypeInfo& GetTypeInfo(ncclDataType_t type);
const std::vector<ncclDataType_t>& AllTypes();
bool ParseType(const std::string& name, ncclDataType_t* out);

// Largest integer M such that every integer in [-M, M] is exactly representable.
double ExactIntLimit(const TypeInfo& t);
// Distance from 1.0 to the next representable value (relative rounding unit * 2).
double Epsilon(const TypeInfo& t);

// Float types: store v rounded to nearest even (saturating), load back as double.
void StoreFloat(const TypeInfo& t, void* dst, double v);
double LoadFloat(const TypeInfo& t, const void* src);

// Integer types: store the low t.size bytes of bits; load zero- or sign-extended.
void StoreInt(const TypeInfo& t, void* dst, uint64_t bits);
uint64_t LoadIntBits(const TypeInfo& t, const void* src);  // zero-extended raw bits
int64_t LoadIntValue(const TypeInfo& t, const void* src);  // numeric value

// Stores a small integer value in whatever representation the type uses.
void StoreValue(const TypeInfo& t, void* dst, int64_t v);

}  // namespace conduit::it

#endif  // CONDUIT_TESTS_INTEGRATION_COLL_DTYPE_H_
