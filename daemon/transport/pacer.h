// SendPacer: lets operator policy decide when a link may put bytes on the wire (per-tenant
// bandwidth caps, sending only while a prioritized tenant is idle). The transport asks
// before each send system call and reports what the socket took; receiving is never paced,
// so a paced link keeps draining its peer.
#ifndef CONDUIT_DAEMON_TRANSPORT_PACER_H_
#define CONDUIT_DAEMON_TRANSPORT_PACER_H_

#include <chrono>
#include <cstddef>

namespace conduit {

class SendPacer {
 public:
  virtual ~SendPacer() = default;
  // How many of `want` bytes may go out now; 0 means none before *retry_after has passed.
  virtual size_t Grant(size_t want, std::chrono::microseconds* retry_after) = 0;
  // How many of the last `granted` bytes the socket actually took.
  virtual void Sent(size_t granted, size_t sent) = 0;
};

}  // namespace conduit

#endif  // CONDUIT_DAEMON_TRANSPORT_PACER_H_
