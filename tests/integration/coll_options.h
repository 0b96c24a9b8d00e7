// Command line of coll_check (see the usage text in coll_options.cc).
#ifndef CONDUIT_TESTS_INTEGRATION_COLL_OPTIONS_H_
#define CONDUIT_TESTS_INTEGRATION_COLL_OPTIONS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "nccl.h"

namespace conduit::it {

// The reductions coll_check knows; PreMulSum is created per case with ncclRedOpCreatePreMulSum.
enum class Op { kSum, kProd, kMax, kMin, kAvg, kPreMulSum };
const char* OpName(Op op);

// A requested buffer size: an element count, or bytes when given with a KiB/MiB/GiB suffix
// (so one size means the same memory for every type).
struct SizeSpec {
  uint64_t value = 0;
  bool bytes = false;
  std::string text;
  size_t Elements(size_t elem_size) const { return bytes ? value / elem_size : value; }
};

struct Options {
  int rank = -1;
  int nranks = -1;
  std::string id_file;
  int threads = 1;
  std::vector<std::string> colls;
  std::vector<ncclDataType_t> types;
  std::vector<Op> ops;
  std::vector<SizeSpec> sizes;
  bool inplace = true;     // run in-place variants
  bool outofplace = true;  // run out-of-place variants
  bool all_roots = false;  // every rank as root instead of first and last
  int iters = 1;
  int seconds = 0;  // > 0: repeat the iterations until this long has passed (ranks agree when)
  std::string stop_file;  // with seconds: also stop once this file exists (a test says when)
  uint64_t seed = 1;
  bool expect_error = false;
  int hold_ms = 0;  // --expect-error: between calls; backlog: before the receives
  int messages = 8;  // backlog: how many
  int receives = -1;  // backlog: how many of them the last rank receives (-1: all)
  int send_hold_ms = 0;  // backlog: rank 0 waits this long before its sends
  int linger_ms = 0;  // after the checks, keep the communicator this long (its trace stays readable)
  std::string release_file;  // with linger_ms: stop lingering once this file exists (linger.h)
  int max_seconds = 120;  // --expect-error gives up (exit 3) after this long without an error
  size_t error_count = 1024;  // --expect-error's allreduce, in floats (>= 256K: streamed copies)
  bool nonblocking = false;
  bool mem_alloc = false;  // buffers from ncclMemAlloc (host regions) instead of the heap
  bool verbose = false;
};

// Returns false and prints why on a bad command line.
bool ParseOptions(int argc, char** argv, Options* opt);

}  // namespace conduit::it

#endif  // CONDUIT_TESTS_INTEGRATION_COLL_OPTIONS_H_
