// Rank-dependent input patterns and element-by-element verification.
//
// Patterns are small integers so that sums and products are exact in every type
// (including half, bfloat16, fp8 and int8, for the rank counts we run) regardless of
// the order in which an implementation reduces; only avg needs a tolerance.
#ifndef CONDUIT_TOOLS_PERF_CHECK_H_
#define CONDUIT_TOOLS_PERF_CHECK_H_

#include <cstddef>

#include "collective.h"
#include "dtype.h"
#include "redop.h"

namespace conduit::perf {

struct CheckParams {
  Coll coll;
  const DtypeInfo* dtype;
  const RedOpInfo* op;
  int root;
  int rank;
  int nranks;
  Shape shape;
  // Varies the data between check runs (-c N), so N runs check N different inputs.
  size_t salt = 0;
};

// Writes shape.send_elems input elements for this rank at `input`.
void FillInput(const CheckParams& p, void* input);

// Number of this rank's shape.recv_elems output elements at `output` that differ
// from what a correct implementation produces (0 where the rank has no output:
// non-root ranks of reduce and gather).
size_t CountWrong(const CheckParams& p, const void* output);

}  // namespace conduit::perf

#endif  // CONDUIT_TOOLS_PERF_CHECK_H_
