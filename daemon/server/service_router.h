// ServiceRouter: the daemon's accept loops. Each accepted connection gets a thread that
// peeks at the first frame header, picks the service owning its type and hands it the
// connection. Connections that send garbage or nothing are dropped with a log line.
#ifndef CONDUIT_DAEMON_SERVER_SERVICE_ROUTER_H_
#define CONDUIT_DAEMON_SERVER_SERVICE_ROUTER_H_

#include <array>
#include <string>

#include "server/service.h"

namespace conduit {

class ServiceRouter {
 public:
  // `service` must outlive the router; one service per id.
  void Add(ServiceId id, Service* service);

  // Accept loops over listening sockets; never return.
  void ServePrograms(int unix_listener);  // shim protocol
  void ServePeers(int tcp_listener);      // peer protocol

 private:
  void RouteProgram(UniqueFd fd);
  void RoutePeer(UniqueFd fd, const std::string& peer);
  Service* Find(uint16_t type) const;

  std::array<Service*, 256> services_{};
};

}  // namespace conduit

#endif  // CONDUIT_DAEMON_SERVER_SERVICE_ROUTER_H_
