// Element types conduit-perf can run with, and host-side element access.
//
// Buffers are plain host memory, so checking results means reading and writing
// elements of any NCCL type (including half and bfloat16) from the CPU; everything
// goes through double, which represents every value the test patterns produce.
#ifndef CONDUIT_TOOLS_PERF_DTYPE_H_
#define CONDUIT_TOOLS_PERF_DTYPE_H_

#include <cstddef>
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

// Accepts the nccl-tests spellings (float, half, bfloat16, double, int32, int8,
// uint8, uint32, int64, uint64) plus a few aliases; nullptr when unknown.
const DtypeInfo* FindDtype(std::string_view name);

// The list of names, for the usage text.
const char* DtypeNames();

double LoadElement(const DtypeInfo& dt, const void* base, size_t index);
void StoreElement(const DtypeInfo& dt, void* base, size_t index, double value);

}  // namespace conduit::perf

#endif  // CONDUIT_TOOLS_PERF_DTYPE_H_
