// TCP transport: listening, connecting with a deadline, and TcpLink.
#ifndef CONDUIT_DAEMON_TRANSPORT_TCP_H_
#define CONDUIT_DAEMON_TRANSPORT_TCP_H_

#include <memory>
#include <string>

#include "common/fd_io.h"
#include "common/net_addr.h"
#include "transport/link.h"

namespace conduit {

// Binds and listens on `addr` ("ip:port"); port 0 picks a free one.
Status TcpListen(const std::string& addr, UniqueFd* listener, SockAddr* bound);
// Connects to "ip:port", retrying refused connections until the deadline (the peer daemon
// may still be starting), with the congestion control chosen for connections between
// daemons (congestion.h). A non-empty `source_ip` binds the local end first, which pins
// the connection to the path (interface) owning that address.
Status TcpConnect(const std::string& addr, Deadline deadline, UniqueFd* out, const std::string& source_ip = "");
// Low latency and prompt failure on a dead peer: TCP_NODELAY, keepalive, TCP_USER_TIMEOUT.
void TuneTcpSocket(int fd, int user_timeout_ms);

class TcpLink : public Link {
 public:
  TcpLink(UniqueFd fd, std::string peer_name);
  ~TcpLink() override;

  Status Send(const std::vector<ConstSpan>& out, Deadline deadline, const SendGate& gate = nullptr) override;
  Status Recv(const std::vector<MutSpan>& in, Deadline deadline, const RecvProgress& progress) override;
  Status SendRecv(const std::vector<ConstSpan>& out, Link& from, const std::vector<MutSpan>& in,
                  Deadline deadline, const RecvProgress& progress = nullptr, const SendGate& gate = nullptr,
                  const FlowLimits& limits = {}) override;
  void Shutdown() override;
  void SetPacer(SendPacer* pacer) override { pacer_ = pacer; }
  void SetSpinMicros(int micros) override { spin_micros_ = micros; }
  const std::string& peer_name() const override { return peer_name_; }

  int fd() const { return fd_.get(); }
  int socket_fd() const override { return fd_.get(); }

 private:
  UniqueFd fd_;
  std::string peer_name_;
  SendPacer* pacer_ = nullptr;
  int spin_micros_ = -1;
};

}  // namespace conduit

#endif  // CONDUIT_DAEMON_TRANSPORT_TCP_H_
