// Mailbox: matches point-to-point sends with receives inside one daemon.
//
// Messages are matched in order per (source rank, destination rank), as NCCL orders them.
// A local sender's message points into its shared segment and the sender waits until a
// receiver has copied it; a message that arrived from another daemon owns its bytes.
#ifndef CONDUIT_DAEMON_COLLECTIVES_MAILBOX_H_
#define CONDUIT_DAEMON_COLLECTIVES_MAILBOX_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "common/deadline.h"
#include "common/status.h"

namespace conduit {

// Completion of one local send: the receiver's copy is done (or failed).
struct SendTicket {
  bool done = false;
  Status status;
};

// A message from another daemon that waits for its receive (handed over in a live upgrade).
struct ArrivedMessage {
  int src = 0;
  int dst = 0;
  std::vector<uint8_t> bytes;
};

class Mailbox {
 public:
  // A local rank's message; `ticket` is signalled when a receiver consumed it.
  void PostLocal(int src, int dst, const uint8_t* data, size_t len, std::shared_ptr<SendTicket> ticket);
  // A message that arrived from another daemon.
  void PostRemote(int src, int dst, std::vector<uint8_t> bytes);
  // Copies the next message from src to dst into `out`; its length must equal `len`.
  Status Receive(int src, int dst, uint8_t* out, size_t len, Deadline deadline);
  // Waits for a local send to be consumed.
  Status WaitSent(const std::shared_ptr<SendTicket>& ticket, Deadline deadline);
  // Fails every waiter now and later with `status`.
  void Fail(const Status& status);
  // Copies of the messages from other daemons not yet received, in arrival order per
  // (src, dst); an error when a local rank's send is still queued (it is in a request).
  Status ExportArrived(std::vector<ArrivedMessage>* out);

 private:
  struct Message {
    const uint8_t* data;
    size_t len;
    std::vector<uint8_t> owned;
    std::shared_ptr<SendTicket> ticket;
  };

  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::pair<int, int>, std::deque<Message>> queues_;
  Status failed_;
};

}  // namespace conduit

#endif  // CONDUIT_DAEMON_COLLECTIVES_MAILBOX_H_
