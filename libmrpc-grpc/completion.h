// Posting completions of managed calls into the program's own gRPC completion queues, so
// pluck (sync API), next (async API) and callback queues deliver them exactly as they
// deliver gRPC's own.
//
// gRPC's queue counts pending operations: Begin must succeed before an operation is
// started, and every begun operation is ended exactly once with Post. Post runs inside a
// gRPC execution context (which the queue needs when the last pending operation of a shut
// down queue ends, and for callback queues), borrowed from a public API call that creates
// one (see completion.cc).
#ifndef CONDUIT_LIBMRPC_GRPC_COMPLETION_H_
#define CONDUIT_LIBMRPC_GRPC_COMPLETION_H_

#include <grpc/grpc.h>

namespace conduit::grpcshim {

// False when the queue is shut down (the operation must not start).
bool BeginCompletion(grpc_completion_queue* cq, void* tag);
// Ends a begun operation: the program sees (tag, ok) from its queue.
void PostCompletion(grpc_completion_queue* cq, void* tag, bool ok);

// Runs fn(arg) inside a gRPC execution context (some internal calls need one).
void RunInGrpcExecCtx(void (*fn)(void*), void* arg);

}  // namespace conduit::grpcshim

#endif  // CONDUIT_LIBMRPC_GRPC_COMPLETION_H_
