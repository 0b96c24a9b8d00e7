// RateLimitFilter: a token bucket over the calls of a service or one of its methods.
//
//   {"service": "pkg.Greeter", "method": "SayHello",   // method optional: whole service
//    "rate": 100 | "inf",                              // calls per second
//    "burst": 10,                                      // bucket size (default: rate/10, >= 1)
//    "on_limit": "wait" | "reject",                    // default "wait"
//    "max_wait_ms": 1000,                              // a longer wait is refused instead
//    "side": "client" | "server" | "both"}             // default "client"
//
// Each admitted call takes a token. Waiting calls reserve theirs, so they leave in arrival
// order at exactly the configured rate; a refused call gets RESOURCE_EXHAUSTED. With
// "inf" every call passes (the bucket is still consulted: that is its cost).
#ifndef CONDUIT_DAEMON_RPC_POLICY_RATE_LIMIT_FILTER_H_
#define CONDUIT_DAEMON_RPC_POLICY_RATE_LIMIT_FILTER_H_

#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "common/json.h"
#include "rpc/policy/filter.h"
#include "rpc/policy/scope.h"

namespace conduit::rpc {

class RateLimitFilter : public Filter {
 public:
  static Status Create(const std::string& name, const Json& spec, std::shared_ptr<Filter>* out);

  std::string name() const override { return name_; }
  bool Applies(const RpcInfo& info) const override { return scope_.Matches(info); }
  Verdict OnAdmit(const RpcInfo& info) override;
  // A new rate or burst takes over the old bucket (capped at the new burst) and the debt
  // of the calls waiting for tokens: a change never hands out a fresh burst, and calls
  // already waiting keep their turn.
  void TakeStateFrom(Filter& previous) override;
  // {"tokens": the bucket now, "monotonic_ns": when (CLOCK_MONOTONIC, which both daemons
  // of a host share)}: the new process refills for the time in between. Waiting calls do
  // not move (none can wait while no program is connected), so neither does their debt.
  Json SavedState() const override;
  Status RestoreState(const Json& state) override;

 private:
  // The bucket at `now`: refilled since last_, capped at the burst (mu_ held).
  double TokensAt(std::chrono::steady_clock::time_point now) const;

  std::string name_;
  Scope scope_;
  double rate_ = 0;   // tokens per second; infinity: unlimited
  double burst_ = 1;
  bool wait_ = true;
  std::chrono::nanoseconds max_wait_{std::chrono::seconds(1)};

  mutable std::mutex mu_;
  double tokens_ = 0;  // negative: reserved by waiting calls
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

}  // namespace conduit::rpc

#endif  // CONDUIT_DAEMON_RPC_POLICY_RATE_LIMIT_FILTER_H_
