// The reduction operators conduit-perf can run with (-o), named as nccl-tests names
// them. "mulsum" is NCCL's PreMulSum: each rank scales its input by its own scalar
// before the sum; the operator is created per communicator when a measurement starts.
#ifndef CONDUIT_TOOLS_PERF_REDOP_H_
#define CONDUIT_TOOLS_PERF_REDOP_H_

#include <span>
#include <string_view>

#include "nccl.h"

namespace conduit::perf {

struct RedOpInfo {
  const char* name;  // as printed in the "redop" column
  ncclRedOp_t op;    // the built-in operator; for mulsum, ncclSum (what it sums with)
  bool premul;       // mulsum: create a PreMulSum operator per communicator
};

// nullptr when unknown ("all" is not an operator: see AllRedOps).
const RedOpInfo* FindRedOp(std::string_view name);

// Every operator, in nccl-tests' order for "-o all": sum prod max min avg mulsum.
std::span<const RedOpInfo> AllRedOps();

// The per-rank scalar of mulsum: small integers keep every product exact in every type.
double PreMulScalar(int rank);

}  // namespace conduit::perf

#endif  // CONDUIT_TOOLS_PERF_REDOP_H_
