// Filter: one policy in the RPC datapath (access control, rate limiting, metrics, ...).
//
// Like an Envoy HTTP filter, but over RPCs rather than bytes. For each call the daemon
// carries it asks every filter that applies, in order:
//   OnStart           at the call's start (method, program): header-based checks;
//   OnRequestMessage  on each request message, for filters that read content, on the
//                     daemon's private copy (made before any check: no time-of-check to
//                     time-of-use hole);
//   OnAdmit           once, when the call's first event passed every check (rate limits
//                     spend their tokens here, so refused calls cost none);
//   OnFinish          when it ended, with its status and sizes (metrics).
// A filter answers Continue, Deny (the call fails with the given status; nothing more is
// forwarded) or Delay (the call waits, in order, then goes on).
// Filters are created and replaced at run time by the policy engine (policy/engine.h); a
// call keeps the filters it started with.
#ifndef CONDUIT_DAEMON_RPC_POLICY_FILTER_H_
#define CONDUIT_DAEMON_RPC_POLICY_FILTER_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/json.h"
#include "common/status.h"

namespace conduit::rpc {

// Where this daemon sits on the call: next to the calling program, or next to the server.
enum class Side { kClient, kServer };

struct RpcInfo {
  std::string method;   // "/package.Service/Method"
  std::string program;  // the local program, "exe[pid]"
  Side side = Side::kClient;

  std::string_view service() const;      // "package.Service"
  std::string_view method_name() const;  // "Method"
};

struct Verdict {
  enum class Action { kContinue, kDeny, kDelay };
  Action action = Action::kContinue;
  int32_t code = 0;  // grpc_status_code, for kDeny
  std::string message;
  std::chrono::nanoseconds delay{0};

  static Verdict Continue() { return Verdict{}; }
  static Verdict Deny(int32_t code, std::string message) {
    return Verdict{Action::kDeny, code, std::move(message), std::chrono::nanoseconds(0)};
  }
  static Verdict Delay(std::chrono::nanoseconds d) { return Verdict{Action::kDelay, 0, "", d}; }
};

struct CallOutcome {
  int32_t code = 0;
  std::chrono::nanoseconds latency{0};
  uint64_t request_bytes = 0;
  uint64_t response_bytes = 0;
  uint32_t request_messages = 0;
  uint32_t response_messages = 0;
};

class Filter {
 public:
  virtual ~Filter() = default;
  virtual std::string name() const = 0;
  // Whether this filter looks at the call at all; asked once, at its start.
  virtual bool Applies(const RpcInfo& info) const = 0;
  virtual Verdict OnStart(const RpcInfo&) { return Verdict::Continue(); }
  virtual bool ReadsRequestBody() const { return false; }
  // `data` is the daemon's private copy of one serialized request message.
  virtual Verdict OnRequestMessage(const RpcInfo&, const uint8_t*, size_t) { return Verdict::Continue(); }
  virtual Verdict OnAdmit(const RpcInfo&) { return Verdict::Continue(); }
  virtual void OnFinish(const RpcInfo&, const CallOutcome&) {}
  // This filter replaces `previous` (the policy of the same kind and name) on the engine and
  // takes over the state that must outlive a change of its settings (a rate limiter's
  // tokens and the reservations of calls waiting for one). Called before any call sees it.
  virtual void TakeStateFrom(Filter& previous) { (void)previous; }
  // The same across a live upgrade (docs/upgrade.md): what a filter made from the same spec
  // in the new process continues from (null: nothing), and taking it there. The state
  // comes from the old daemon and is checked like any input.
  virtual Json SavedState() const { return Json(); }
  virtual Status RestoreState(const Json& state) {
    (void)state;
    return Status::Ok();
  }
};

using FilterChain = std::vector<std::shared_ptr<Filter>>;

}  // namespace conduit::rpc

#endif  // CONDUIT_DAEMON_RPC_POLICY_FILTER_H_
