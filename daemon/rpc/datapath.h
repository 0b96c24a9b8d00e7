// Datapath: moves the events of every call the daemon carries from one end to the other,
// through the call's policy filters.
//
// Requests (client side -> server side) pass the filters: at the start of the call, and,
// for filters that read content, on each request message, which is first copied into the
// daemon's private memory. A denied call gets its status towards the caller and, if the
// server had already seen it, a cancellation towards the server; a delayed call's events
// wait in order until its time comes. Responses go straight through. When a call ends,
// both ends forget it and the filters hear how it went (metrics).
#ifndef CONDUIT_DAEMON_RPC_DATAPATH_H_
#define CONDUIT_DAEMON_RPC_DATAPATH_H_

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rpc/call.h"
#include "rpc/policy/engine.h"

namespace conduit::rpc {

class Datapath {
 public:
  explicit Datapath(PolicyEngine* policies);
  ~Datapath();

  PolicyEngine* policies() const { return policies_; }
  // A new call with the filters that apply to it; the caller wires its two ends.
  std::shared_ptr<RpcCall> NewCall(RpcInfo info);
  void FromClient(const std::shared_ptr<RpcCall>& call, Event ev);
  void FromServer(const std::shared_ptr<RpcCall>& call, Event ev);
  // An end went away (its program exited, its link broke): fail its calls towards the
  // other end.
  void EndGone(const Endpoint* gone, const std::vector<std::shared_ptr<RpcCall>>& calls, const std::string& why);
  // The daemon is shutting down: each call ends UNAVAILABLE with `why` at its client and,
  // if its server saw it start, is cancelled there.
  void Abort(const std::vector<std::shared_ptr<RpcCall>>& calls, const std::string& why);

 private:
  // Runs the request filters over `ev`; false (after failing the call) when denied.
  bool Filter(const std::shared_ptr<RpcCall>& call, Event& ev, std::chrono::nanoseconds* delay);
  void Deny(const std::shared_ptr<RpcCall>& call, int32_t code, const std::string& message);
  void Finish(const std::shared_ptr<RpcCall>& call);
  // EndGone and Abort, for one call: `gone` (null in Abort) hears nothing; the client hears
  // UNAVAILABLE, the server (if the call reached it) a cancellation.
  void EndFromOutside(const std::shared_ptr<RpcCall>& call, const Endpoint* gone, const std::string& why);
  void Hold(const std::shared_ptr<RpcCall>& call, std::chrono::nanoseconds delay);
  void Release(const std::shared_ptr<RpcCall>& call);
  void RunDelays();

  PolicyEngine* policies_;
  std::mutex delay_mu_;
  std::condition_variable delay_cv_;
  std::multimap<std::chrono::steady_clock::time_point, std::shared_ptr<RpcCall>> delayed_;
  bool stopping_ = false;
  std::thread delay_thread_;
};

}  // namespace conduit::rpc

#endif  // CONDUIT_DAEMON_RPC_DATAPATH_H_
