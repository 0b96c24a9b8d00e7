// RpcContext: what the RPC service's program sessions and links to other daemons share:
// the options, the datapath with its policies, the table of served ports and the pool of
// links. RpcService (rpc_service.h) owns it as the router's Service; sessions and links
// hold only this, so none of them includes the service.
#ifndef CONDUIT_DAEMON_RPC_RPC_CONTEXT_H_
#define CONDUIT_DAEMON_RPC_RPC_CONTEXT_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "rpc/accepted_link.h"
#include "rpc/call_handover.h"
#include "rpc/datapath.h"
#include "rpc/link_pool.h"
#include "rpc/policy/engine.h"
#include "rpc/server_table.h"
#include "server/program_park.h"
#include "server/program_policy.h"

namespace conduit {
class PeerSecurity;
}

namespace conduit::rpc {

struct RpcOptions {
  const PeerSecurity* security = nullptr;  // authenticates (and seals) links to other daemons
  std::string my_addr;             // this daemon, "ip:port", for logs and hellos
  uint32_t peer_port = 7650;       // where other daemons listen (all daemons share it)
  int timeout_ms = 300000;         // bound on any wait
  uint32_t inline_max = 512;       // messages up to this size travel inside frames
  uint64_t max_receive_bytes = 1ull << 30;  // receive memory per program
  // Caps on what one program connection or one link may hold (docs/rpc-design.md, Limits).
  size_t max_program_channels = 16384;  // channels open at once
  // TLS channels to other hosts open at once: each has a connection (and a reader thread
  // in both daemons) of its own.
  size_t max_program_tls_links = 1024;
  size_t max_program_calls = 16384;     // calls it started that are still open
  size_t max_program_ports = 1024;      // ports it serves
  size_t max_link_calls = 65536;        // calls another daemon started on one link
  uint64_t max_link_assembling_bytes = 256ull << 20;  // private memory of incomplete messages
  // A frame whose first byte arrived must arrive whole within min(this, timeout_ms).
  int max_frame_ms = 30000;
  // The newest RPC link version offered and accepted (rpcproto::kMinPeerLinkVersion..
  // kPeerLinkVersion): 2 speaks as a release without GoAway (a rollout, a test).
  uint32_t max_link_version = 3;
  // Managed servers may listen natively beside conduitd (told to each program in Hello).
  bool native_listeners = true;
};

class RpcContext {
 public:
  RpcContext(RpcOptions options, const ProgramPolicy* admission);
  virtual ~RpcContext() = default;
  RpcContext(const RpcContext&) = delete;
  RpcContext& operator=(const RpcContext&) = delete;

  const RpcOptions& options() const { return options_; }
  // How long a frame may take to arrive once its first byte did (program and link).
  int frame_timeout_ms() const { return std::min(options_.timeout_ms, options_.max_frame_ms); }
  const ProgramPolicy& admission() const { return *admission_; }
  PolicyEngine& policies() { return policies_; }
  Datapath& datapath() { return datapath_; }
  ServerTable& servers() { return servers_; }
  LinkPool& links() { return links_; }
  // Small frames the QoS policy sent ahead of queued bulk ones, on every link.
  std::atomic<uint64_t>& small_first_frames() { return small_first_frames_; }
  // Once the daemon shuts down, why: programs' new calls are refused with it.
  void SetStopping(const std::string& why);
  std::string stopping() const;

  // Live upgrade (docs/upgrade.md, "RPC programs"). Program sessions stop at this park
  // once no call of theirs is in flight; meanwhile they hold the calls their programs
  // start (parking()), and links from other daemons are asked for no more calls.
  ProgramPark& park() { return park_; }
  bool parking() const { return park_.parking(); }
  // A program's call start under way (from before it looked at parking() until the call
  // is in its server's table): no session stops meanwhile.
  std::atomic<int>& starts_under_way() { return starts_; }
  // Connections other daemons opened to this one's RPC service, from their accept to their
  // end (handshake included): a session stops only when there is none, since any may
  // bring a call.
  std::atomic<int>& accepted_connections() { return accepted_; }
  // Links other daemons opened, once their hello is done: asked for GoAway when a park
  // begins (or at once, during one).
  void AddAccepted(const std::shared_ptr<AcceptedLink>& link);
  void RemoveAccepted(const AcceptedLink* link);
  // Why sessions cannot stop yet, for the refusal ("" when nothing holds them).
  std::string ParkBlockers();
  // Links to and from other daemons stop at a park of their own, begun and ended with the
  // sessions' (each between two frames, with no message half-read and nothing left to
  // write), and move with the calls they carry (docs/upgrade.md, "RPC calls in flight").
  ProgramPark& link_park() { return link_park_; }
  // Every link is parked, and every connection another daemon opened is one of them (none
  // is still saying hello): no event of a call reaches a session any more.
  bool LinksParked() const;
  // Accepted links reading calls (PeerLink::ReadLoop), against accepted_connections().
  std::atomic<int>& accepted_reading() { return accepted_reading_; }
  // The new process: calls in flight, rebuilt as their ends are restored.
  AdoptedCalls& adopted_calls() { return adopted_calls_; }
  // Sessions whose state was taken for the new process since the park began.
  void SessionExported() { exported_.fetch_add(1); }
  int sessions_exported() const { return exported_.load(); }

 private:
  RpcOptions options_;
  const ProgramPolicy* admission_;
  PolicyEngine policies_;
  Datapath datapath_;
  ServerTable servers_;
  LinkPool links_;
  std::atomic<uint64_t> small_first_frames_{0};
  mutable std::mutex stop_mu_;
  std::string stopping_;

  void BeginPark();
  void EndPark();
  std::mutex accepted_mu_;
  std::map<const AcceptedLink*, std::weak_ptr<AcceptedLink>> accepted_links_;
  bool going_away_ = false;  // under accepted_mu_: a park is on
  std::atomic<int> starts_{0};
  std::atomic<int> accepted_{0};
  std::atomic<int> exported_{0};
  std::atomic<int> accepted_reading_{0};
  AdoptedCalls adopted_calls_;
  ProgramPark park_;
  ProgramPark link_park_;
};

}  // namespace conduit::rpc

#endif  // CONDUIT_DAEMON_RPC_RPC_CONTEXT_H_
