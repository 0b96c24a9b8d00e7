// Propagation from a native parent call (a server call gRPC itself carries, e.g. from a
// client without the preload) to a child call the shim carries through conduitd.
//
// gRPC core propagates a parent's cancellation and deadline (GRPC_PROPAGATE_CANCELLATION,
// GRPC_PROPAGATE_DEADLINE) only to core calls, and core offers no way to watch a call or
// read its deadline. So for each such child the shim makes a stand-in core call, a child of
// the same parent with the same propagation, that cannot end by itself: a wait-for-ready
// call on a channel that can never connect. Core ends it when the parent is cancelled or
// its deadline passes; the shim then cancels the managed child with that status. When the
// managed child ends first, it cancels its stand-in (EndNativeParentWatch).
#ifndef CONDUIT_LIBMRPC_GRPC_NATIVE_PARENT_H_
#define CONDUIT_LIBMRPC_GRPC_NATIVE_PARENT_H_

#include <grpc/grpc.h>

#include <cstdint>

#include "call_sink.h"

namespace conduit::grpcshim {


// Starts watching `parent` for `child` (propagation `mask`, which must include
// cancellation or deadline). Returns the stand-in with one reference for the child, to be
// given to EndNativeParentWatch when the child ends; nullptr (and one log line) when gRPC
// refused to make it, in which case the child is simply not propagated to.
grpc_call* WatchNativeParent(grpc_call* parent, uint32_t mask, CallSink* child);
void EndNativeParentWatch(grpc_call* stand_in);

}  // namespace conduit::grpcshim

#endif  // CONDUIT_LIBMRPC_GRPC_NATIVE_PARENT_H_
