// ServiceRouter: the daemon's accept loops. Each accepted connection gets a thread that
// authenticates it (peer port: security/peer_security.h), peeks at the first frame header,
// picks the service owning its type and hands it the connection. Connections that send
// garbage or nothing are dropped with a log line.
//
// Every connection costs a thread and a descriptor, so both are capped: connections still
// in their handshake per source address and in all, peer connections being served, program
// connections per uid and in all. Over a cap, or when the process runs out of threads or
// descriptors, the new connection is refused with a log line (a program's shim then falls
// back to its native library); the daemon never aborts for it.
#ifndef CONDUIT_DAEMON_SERVER_SERVICE_ROUTER_H_
#define CONDUIT_DAEMON_SERVER_SERVICE_ROUTER_H_

#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "common/deadline.h"
#include "server/acceptor.h"
#include "server/service.h"

namespace conduit {

class PeerSecurity;

// A program connection being served, as the admin API lists it.
struct ProgramConnection {
  uint64_t id = 0;
  ProgramCredentials creds;
  std::string exe;  // basename of /proc/<pid>/exe (or comm)
  std::string service;
  std::chrono::system_clock::time_point since;
  bool moves = false;  // its service hands sessions over in a live upgrade
};

struct RouterLimits {
  int max_handshakes = 256;              // peer connections not yet authenticated, in all
  int max_handshakes_per_source = 32;    // ... from one IP address
  int max_peer_connections = 4096;       // peer connections being served (one thread each)
  int max_program_connections = 8192;    // program connections (one thread each)
  int max_program_connections_per_uid = 1024;
};

// A program's name as the kernel knows it: the basename of /proc/<pid>/exe, or
// kUnknownExe (server/program_policy.h) when the kernel does not say (a pid the daemon's pid
// namespace cannot see, a link it may not read). Nothing the program sent or set is trusted.
std::string ProgramExe(int pid);

class ServiceRouter {
 public:
  // `security` authenticates peer connections; it must outlive the router.
  explicit ServiceRouter(const PeerSecurity* security, RouterLimits limits = {})
      : security_(security), limits_(limits) {}

  // `service` must outlive the router; one service per id.
  void Add(ServiceId id, Service* service);

  // Accept loops over listening sockets; return once `gate` is stopped (server/acceptor.h).
  void ServePrograms(int unix_listener, ListenerGate* gate);  // shim protocol
  void ServePeers(int tcp_listener, ListenerGate* gate);      // peer protocol

  // The daemon's orderly end: new connections are closed unserved; every service fails
  // what is in flight with `reason` (Service::Stop); programs then have until `drain` to
  // hear it on their next call and hang up. Connections left after that are shut down, and
  // their sessions get a second to end; so are connections from other daemons still being
  // served (an RPC link, the object store's control and fetch connections), whose threads
  // would otherwise serve until the other daemon hangs up. Returns how many program
  // connections remained open at `drain` (cut off rather than drained). The caller closes
  // the listeners.
  size_t Shutdown(const Status& reason, Deadline drain);

  // Live upgrade (docs/upgrade.md), with the accept loops parked. Stops every program
  // session between two requests (Service::program_park) and hands back their connections.
  // Fails, and every session goes on, when by `deadline` a connection is still open that
  // no service stopped: one of a service whose sessions do not move, one in a long
  // request, or one not yet routed. Then takes what the services' sessions share
  // (Service::ExportShared).
  Status ParkPrograms(Deadline deadline, std::vector<HandedProgram>* out, std::vector<HandedShared>* shared);
  // The upgrade was called off after ParkPrograms succeeded: every session goes on.
  void ResumePrograms();
  // In the new process: serves a connection handed over by the old one, from where that
  // one stopped (Service::AdoptProgram); counted and listed like any program connection.
  // False when it cannot (no such service, a cap, no thread), the connection then closed.
  bool AdoptProgram(ServiceId service, UniqueFd fd, const std::string& state, std::vector<UniqueFd> fds);
  // In the new process: what the old one's services shared (Service::AdoptShared, before
  // Ready; Service::StartShared, after Go).
  Status AdoptShared(HandedShared shared);
  // Once every handed-over session was adopted, before the accept loops start: waits
  // (until `deadline`) for them to have taken their state (Service::AwaitAdopted).
  void AwaitAdopted(Deadline deadline);
  void StartShared();

  // Program connections open: served, or accepted and not yet routed to their service.
  size_t ProgramConnections() const;
  // Program connections currently served, oldest first.
  std::vector<ProgramConnection> Programs() const;
  // Connections refused so far because of a cap or missing threads/descriptors.
  uint64_t refused() const { return refused_.load(); }

 private:
  // Serves an accepted connection on a thread of its own; false (the connection closed
  // unserved) when none can start or the router is shutting down.
  bool StartThread(const char* what, std::function<void(UniqueFd)> serve, UniqueFd fd);
  void RouteProgram(UniqueFd fd, const ProgramCredentials& creds);
  // Serves a routed connection: listed in programs_ while `serve` runs.
  void ServeListed(Service* service, UniqueFd fd, const ProgramCredentials& creds,
                   const std::function<void(UniqueFd)>& serve);
  void RoutePeer(UniqueFd fd, const std::string& peer);
  Service* Find(uint16_t type) const;
  // Admission of a new connection against the caps; `Release*` undo it when it ends.
  bool AdmitPeer(const std::string& source);
  void EndHandshake(const std::string& source, bool authenticated);
  void ReleasePeer();
  bool AdmitProgram(int uid);
  void ReleaseProgram(int uid);
  void ReleaseProgramLocked(int uid);  // needs mu_

  const PeerSecurity* security_;
  const RouterLimits limits_;
  std::array<Service*, 256> services_{};
  mutable std::mutex mu_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, ProgramConnection> programs_;
  // Each served program connection's descriptor, for Shutdown. The number may be closed
  // (and reused) just before its entry goes; shutting down a reused number then is
  // harmless, as by then every connection is being shut down.
  std::map<uint64_t, int> program_fds_;
  // The same for connections from other daemons while their service serves them.
  std::map<uint64_t, int> peer_fds_;
  std::condition_variable programs_cv_;  // programs_ became empty
  std::atomic<bool> stopping_{false};
  // Under mu_: connections per stage.
  int handshakes_ = 0;
  std::map<std::string, int> handshakes_by_source_;
  int peers_ = 0;
  int program_conns_ = 0;
  std::map<int, int> programs_by_uid_;
  std::atomic<uint64_t> refused_{0};
};

}  // namespace conduit

#endif  // CONDUIT_DAEMON_SERVER_SERVICE_ROUTER_H_
