// Element types conduit-perf can run with, and host-side element access.
//
// Buffers are plain host memory, so checking results means reading and writing
// elements of any NCCL type (including half and bfloat16) from the CPU; everything
// goes through double, which represents every value the test patterns produce.
#ifndef CONDUIT_TOOLS_PERF_DTYPE_H_
#define CONDUIT_TOOLS_PERF_DTYPE_H_

#include <cstddef>
#include <span>
#include <string_view>

#include "nccl.h"

namespace conduit::perf {

struct DtypeInfo {
  const char* name;  // as printed in the "type" column
  ncclDataType_t type;
  size_t size;
  bool is_float;
  // Integers 0..exact_limit-1 are stored exactly; patterns stay below it.
  size_t exact_limit;
};

// Accepts the nccl-tests spellings (int8 uint8 int32 uint32 int64 uint64 half float
// double bfloat16 f8e4m3 f8e5m2) plus a few aliases; nullptr when unknown ("all" is
// not a type: see AllDtypes).
const DtypeInfo* FindDtype(std::string_view name);

// Every type, in nccl-tests' order for "-d all".
std::span<const DtypeInfo> AllDtypes();

// The list of names, for the usage text.
const char* DtypeNames();

double LoadElement(const DtypeInfo& dt, const void* base, size_t index);
void StoreElement(const DtypeInfo& dt, void* base, size_t index, double value);

}  // namespace conduit::perf

#endif  // CONDUIT_TOOLS_PERF_DTYPE_H_
