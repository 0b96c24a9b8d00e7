// RpcCall: one RPC as the daemon carries it, between its two ends (Endpoint): towards the
// caller (client side) and towards the server program (server side). An end is a program
// session or a link to another daemon; each keeps its own id for the call. Calls between
// two programs of the same host connect two program sessions directly.
#ifndef CONDUIT_DAEMON_RPC_CALL_H_
#define CONDUIT_DAEMON_RPC_CALL_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>

#include "common/rpc_compression.h"
#include "rpc/event.h"
#include "rpc/policy/filter.h"

namespace conduit::rpc {

struct RpcCall;

class Endpoint {
 public:
  virtual ~Endpoint() = default;
  // Sends an event of `call` (known here as `id`) out of this end.
  virtual void Deliver(RpcCall& call, uint64_t id, Event ev) = 0;
  // The call ended: drop `id` from this end's routing table.
  virtual void Forget(uint64_t id) = 0;
  virtual std::string name() const = 0;
  // Memory of this end's program for an incoming message of `len` bytes, so that a daemon
  // link reads the bytes straight there; false (the default: the end is no program, the
  // message goes inline, or that memory is exhausted) and the link buffers them.
  virtual bool ReceiveBlock(size_t /*len*/, Message* /*out*/) { return false; }
};

struct RpcCall {
  std::shared_ptr<Endpoint> client_end;
  uint64_t client_id = 0;
  std::shared_ptr<Endpoint> server_end;
  uint64_t server_id = 0;
  RpcInfo info;
  FilterChain filters;      // the policies that apply to this call, fixed at its start
  bool reads_body = false;  // some filter reads request content
  Encoding request_encoding = Encoding::kIdentity;  // of compressed requests (grpc-encoding)
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();

  std::mutex mu;
  bool finished = false;
  bool start_forwarded = false;
  bool held = false;             // waiting on a Delay verdict
  std::deque<Event> held_events;
  CallOutcome outcome;

  bool is_finished() {
    std::lock_guard<std::mutex> lock(mu);
    return finished;
  }
};

}  // namespace conduit::rpc

#endif  // CONDUIT_DAEMON_RPC_CALL_H_
