// DaemonConnection: one Unix-socket connection from this program to its host's conduitd.
//
// Each communicator rank gets its own connection (one request at a time on it), plus one
// shared connection for requests that belong to no communicator (unique ids).
#ifndef CONDUIT_LIBMCCS_NCCL_DAEMON_CONNECTION_H_
#define CONDUIT_LIBMCCS_NCCL_DAEMON_CONNECTION_H_

#include <cstdint>
#include <memory>
#include <string>

#include "common/fd_io.h"
#include "common/frame.h"
#include "common/status.h"

namespace conduit {

class DaemonConnection {
 public:
  // Connects to the daemon socket ($CONDUIT_SOCKET or the default) and says Hello.
  // *refused is set when the daemon answered but declined this program.
  static Status Open(std::unique_ptr<DaemonConnection>* out, bool* refused = nullptr);
  static std::string SocketPath();

  // Sends one request and reads its reply; checks the reply's type and status block.
  // On success `reply` holds the whole reply payload (starting with a WireStatus), and the
  // descriptor that came with it, if any.
  Status Call(uint16_t type, const void* payload, size_t len, uint16_t reply_type, Frame* reply, int pass_fd = -1);

  // The two halves of Call, so a group can have requests in flight on several connections.
  Status SendRequest(uint16_t type, const void* payload, size_t len, int pass_fd = -1);
  // A reply is awaited at most ReplyDeadline() (3 x the daemon's timeout + 30 s) from when
  // the caller asked for it, whatever else it waits for meanwhile.
  Status ReadReply(uint16_t type, uint16_t reply_type, Frame* reply);
  // `spin_micros`: how long to spin for the reply before sleeping (common/busy_poll.h);
  // -1: BusyPollMicros().
  Status ReadReply(uint16_t type, uint16_t reply_type, Frame* reply, Deadline deadline, int spin_micros = -1);
  Deadline ReplyDeadline() const { return Deadline::AfterMs(3ll * timeout_ms_ + 30000); }

  uint32_t daemon_timeout_ms() const { return timeout_ms_; }
  // For waiting on "a reply has arrived" alongside other events; never read or write it.
  int fd() const { return fd_.get(); }

 private:
  UniqueFd fd_;
  uint32_t timeout_ms_ = 300000;
};

}  // namespace conduit

#endif  // CONDUIT_LIBMCCS_NCCL_DAEMON_CONNECTION_H_
