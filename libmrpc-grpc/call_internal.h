// What call.cc (a call's life) and call_batch.cc (its batches of ops) share inside
// ManagedCall's implementation; not for the rest of the library.
#ifndef CONDUIT_LIBMRPC_GRPC_CALL_INTERNAL_H_
#define CONDUIT_LIBMRPC_GRPC_CALL_INTERNAL_H_

#include <cstdint>

#include "call.h"

namespace conduit::grpcshim {

// Flow control: a sender may keep sending while the receiver has not credited more than
// 3/4 of this; the receiver credits every quarter it consumes (docs/rpc-protocol.md).
constexpr uint64_t kWindowBytes = 8ull << 20;

// One grpc_call_start_batch: completes on `cq` with `tag` once `pending` reaches 0.
struct ManagedCall::Batch {
  void* tag;
  grpc_completion_queue* cq;
  int pending;
  bool ok;
};

// Microseconds from now to a gRPC deadline (0 when past, rpc::kNoTimeout for none).
int64_t MicrosUntil(gpr_timespec deadline);

}  // namespace conduit::grpcshim

#endif  // CONDUIT_LIBMRPC_GRPC_CALL_INTERNAL_H_
