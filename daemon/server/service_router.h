// ServiceRouter: the daemon's accept loops. Each accepted connection gets a thread that
// peeks at the first frame header, picks the service owning its type and hands it the
// connection. Connections that send garbage or nothing are dropped with a log line.
#ifndef CONDUIT_DAEMON_SERVER_SERVICE_ROUTER_H_
#define CONDUIT_DAEMON_SERVER_SERVICE_ROUTER_H_

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "server/service.h"

namespace conduit {

// A program connection being served, as the admin API lists it.
struct ProgramConnection {
  uint64_t id = 0;
  ProgramCredentials creds;
  std::string exe;  // basename of /proc/<pid>/exe (or comm)
  std::string service;
  std::chrono::system_clock::time_point since;
};

// A program's name as the kernel knows it: the basename of /proc/<pid>/exe, or its comm
// when that cannot be read. Nothing the program sent is trusted.
std::string ProgramExe(int pid);

class ServiceRouter {
 public:
  // `service` must outlive the router; one service per id.
  void Add(ServiceId id, Service* service);

  // Accept loops over listening sockets; never return.
  void ServePrograms(int unix_listener);  // shim protocol
  void ServePeers(int tcp_listener);      // peer protocol

  // Program connections currently served, oldest first.
  std::vector<ProgramConnection> Programs() const;

 private:
  void RouteProgram(UniqueFd fd);
  void RoutePeer(UniqueFd fd, const std::string& peer);
  Service* Find(uint16_t type) const;
  // Peeks at a new connection's first frame header and finds the service owning its type.
  Status FindService(int fd, uint32_t magic, uint16_t version, Service** service) const;

  std::array<Service*, 256> services_{};
  mutable std::mutex mu_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, ProgramConnection> programs_;
};

}  // namespace conduit

#endif  // CONDUIT_DAEMON_SERVER_SERVICE_ROUTER_H_
