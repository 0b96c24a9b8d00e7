// BindAddress: where a program's gRPC server asked to listen (the host part of the address
// it gave AddListeningPort), and which calls the daemon may therefore carry to it.
//
// A managed server has no socket of its own: the daemon receives its calls, so the daemon
// must admit only the calls a socket bound to that address would have received:
//
//   * every address (0.0.0.0, [::], no host): any caller, on this host or another;
//   * a loopback address (127.0.0.0/8, ::1, localhost): programs of this host whose
//     channel target is a loopback address; never a call or Probe from another daemon,
//     whatever it claims;
//   * another address of this host (or a name resolving to some): callers whose channel
//     target is that address: programs of this host that resolved their target to it, and
//     other daemons whose RPC link reached this daemon at that address (the link's local
//     address, as the kernel reports it: what the calling daemon dialled).
//
// One deliberate simplification: all loopback addresses count as one (a server bound to
// 127.0.0.1 is reached through 127.0.0.2 or ::1 too); they stay reachable only from this
// host, which is what binding to loopback is for.
#ifndef CONDUIT_DAEMON_RPC_BIND_ADDRESS_H_
#define CONDUIT_DAEMON_RPC_BIND_ADDRESS_H_

#include <string>
#include <vector>

#include "common/status.h"

namespace conduit::rpc {

struct BindAddress {
  bool any = false;              // every address
  std::vector<std::string> ips;  // else these (numeric, NormalizeIp spelling), at least one
  std::string text;              // as the program wrote it, for logs and the admin API

  static constexpr size_t kMaxIps = 16;  // addresses one name may resolve to

  static BindAddress Any() { return BindAddress{true, {}, "0.0.0.0"}; }
  bool loopback_only() const;
  // Whether a call that reached this host at `target_ip` may be carried to the server:
  // from a program of this host (from_link false) or over a link from another daemon.
  bool Admits(const std::string& target_ip, bool from_link) const;
  // Whether two servers on one port would receive some call both (native gRPC programs
  // would fail to bind the second: EADDRINUSE).
  bool Overlaps(const BindAddress& other) const;
  // "0.0.0.0 (every address)", "127.0.0.1 (loopback: this host only)", "10.0.0.2".
  std::string Describe() const;
};

// Parses the host part of a server's listening address: "" (as the shim always took
// ":port"), "0.0.0.0", "::" or "[::]" is every address; a numeric address or a name
// (resolved here) must be an address of this host, as binding to it natively would
// require (names keep the addresses of this host they resolve to).
Status ParseBindHost(const std::string& host, BindAddress* out);

}  // namespace conduit::rpc

#endif  // CONDUIT_DAEMON_RPC_BIND_ADDRESS_H_
