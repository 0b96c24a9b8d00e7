// CallSink: what the shim's machinery needs of a managed call, apart from the call itself.
//
// Three parts drive a ManagedCall from their own threads: the daemon connection's reader
// (the call's events, the connection's loss), the timer thread (its deadline) and a
// native parent's watcher (a propagated cancellation). They reach the call through this
// interface, so none of them includes call.h, which includes them (ManagedCall implements
// it; call.h says when each is called and under which locks).
#ifndef CONDUIT_LIBMRPC_GRPC_CALL_SINK_H_
#define CONDUIT_LIBMRPC_GRPC_CALL_SINK_H_

#include <grpc/grpc.h>

#include <string>

#include "common/rpc_event.h"

namespace conduit::grpcshim {

class CallSink {
 public:
  // Internal references: whoever keeps a CallSink* past the call that handed it over
  // holds one.
  virtual void Ref() = 0;
  virtual void Unref() = 0;
  // The connection's reader thread: an event for the call (and its message, if any).
  virtual void OnEvent(const rpc::CallEvent& ev, grpc_byte_buffer* message) = 0;
  virtual void OnConnectionLost(const std::string& why) = 0;
  // The timer thread: the call's deadline passed.
  virtual void OnDeadline() = 0;
  // Ends the call with `code` as gRPC's grpc_call_cancel_with_status would.
  virtual grpc_call_error Cancel(grpc_status_code code, const char* details) = 0;

 protected:
  ~CallSink() = default;  // calls are destroyed through their own type, never through this
};

}  // namespace conduit::grpcshim

#endif  // CONDUIT_LIBMRPC_GRPC_CALL_SINK_H_
