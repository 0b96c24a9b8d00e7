// The process's resident set, for -M (nccl-tests reports GPU memory; our buffers
// and the shim's staging are host memory).
#ifndef CONDUIT_TOOLS_PERF_HOST_MEMORY_H_
#define CONDUIT_TOOLS_PERF_HOST_MEMORY_H_

#include <cstdint>

namespace conduit::perf {

// Bytes resident now; 0 when /proc cannot tell.
int64_t ResidentBytes();

}  // namespace conduit::perf

#endif  // CONDUIT_TOOLS_PERF_HOST_MEMORY_H_
