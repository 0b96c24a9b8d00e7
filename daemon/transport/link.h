// Link: what the collective algorithms need from a transport.
//
// A Link is a reliable, ordered byte stream to one peer daemon. Algorithms are written
// against this interface only (as in Gloo), so a transport other than TCP (e.g. RDMA)
// plugs in by implementing it.
#ifndef CONDUIT_DAEMON_TRANSPORT_LINK_H_
#define CONDUIT_DAEMON_TRANSPORT_LINK_H_

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "common/deadline.h"
#include "common/status.h"
#include "transport/pacer.h"

namespace conduit {

struct ConstSpan {
  const void* data;
  size_t len;
};
struct MutSpan {
  void* data;
  size_t len;
};

// Called as bytes of a receive arrive, with the total received so far; lets the caller
// reduce finished chunks while later ones are still on the wire. An error aborts the
// transfer.
using RecvProgress = std::function<Status(size_t received)>;

// Called with each piece of outgoing data just before it is handed to the network; returns
// once those bytes may be read (they may still be arriving from a program), or an error
// that aborts the transfer.
using SendGate = std::function<Status(const void* data, size_t len)>;

// For a transfer whose two directions depend on each other (a pipelined ring forwards
// bytes it has received and reduced): only the first send_limit() bytes of the output and
// recv_limit() bytes of the input may move. Both are asked again after every progress
// callback, which is what raises them; an empty function means no limit. Limits that stop
// both directions before the transfer is done fail it (a caller's bug, never a hang).
struct FlowLimits {
  std::function<size_t()> send_limit;
  std::function<size_t()> recv_limit;
  // Called after output bytes were handed to the network, with the total handed so far:
  // from then on the caller may overwrite them (a reduction in place into what it sends).
  std::function<Status(size_t sent)> sent;
};

class Link {
 public:
  virtual ~Link() = default;

  virtual Status Send(const std::vector<ConstSpan>& out, Deadline deadline, const SendGate& gate = nullptr) = 0;
  virtual Status Recv(const std::vector<MutSpan>& in, Deadline deadline,
                      const RecvProgress& progress = nullptr) = 0;
  // Sends `out` on this link while receiving `in` on `from` (which may be this link):
  // the full-duplex step of ring algorithms. `from` must come from the same transport.
  virtual Status SendRecv(const std::vector<ConstSpan>& out, Link& from,
                          const std::vector<MutSpan>& in, Deadline deadline,
                          const RecvProgress& progress = nullptr, const SendGate& gate = nullptr,
                          const FlowLimits& limits = {}) = 0;
  // Makes pending and future transfers on both ends fail promptly.
  virtual void Shutdown() = 0;
  // Paces this link's sends from now on (nullptr: unpaced). The pacer must outlive its use;
  // set it only while no transfer runs on the link.
  virtual void SetPacer(SendPacer* pacer) { (void)pacer; }
  // How long a small transfer on this link polls for the peer's bytes before it blocks
  // (common/busy_poll.h), from now on; -1: BusyPollMicros(). Set it only while no transfer
  // runs on the link.
  virtual void SetSpinMicros(int micros) { (void)micros; }
  virtual const std::string& peer_name() const = 0;
  // The socket under the link, for waiting on it without reading and for handing it to the
  // process that replaces this daemon (docs/upgrade.md); -1 for a link without one.
  virtual int socket_fd() const { return -1; }
};

size_t TotalBytes(const std::vector<ConstSpan>& spans);
size_t TotalBytes(const std::vector<MutSpan>& spans);

}  // namespace conduit

#endif  // CONDUIT_DAEMON_TRANSPORT_LINK_H_
