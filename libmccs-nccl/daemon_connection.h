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
#include "common/shm_segment.h"
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
  // `reply_in_page`: the request asked for its reply in the reply page (a Group with
  // kGroupReplyInPage; only where has_reply_page()), which the next ReadReply then waits on.
  Status SendRequest(uint16_t type, const void* payload, size_t len, int pass_fd = -1, bool reply_in_page = false);
  // A reply is awaited at most ReplyDeadline() (3 x the daemon's timeout + 30 s) from when
  // the caller asked for it, whatever else it waits for meanwhile.
  Status ReadReply(uint16_t type, uint16_t reply_type, Frame* reply);
  // `spin_micros`: how long to spin for the reply before sleeping (common/busy_poll.h);
  // -1: BusyPollMicros().
  Status ReadReply(uint16_t type, uint16_t reply_type, Frame* reply, Deadline deadline, int spin_micros = -1);
  Deadline ReplyDeadline() const { return Deadline::AfterMs(3ll * timeout_ms_ + 30000); }

  uint32_t daemon_timeout_ms() const { return timeout_ms_; }
  // Whether the daemon holds this connection's reply page, and its request page
  // (protocol/call_page.h).
  bool has_reply_page() const { return reply_page_ != nullptr; }
  bool has_request_page() const { return request_page_ != nullptr; }
  // For waiting on "a reply has arrived" alongside other events (streamed groups, whose
  // replies never come through the reply page); never read or write it.
  int fd() const { return fd_.get(); }

 private:
  // Gives the daemon a page of `type` (kAttachReplyPage, kAttachRequestPage); null where
  // it cannot be made, or the daemon (one that predates pages) says no: those messages
  // then go on the socket.
  std::unique_ptr<ShmSegment> AttachPage(uint16_t type, uint16_t reply_type, const char* name);
  // ReadReply for a request whose reply comes in the reply page (or, from a daemon that
  // has no page for it, on the socket).
  Status ReadReplyInPage(Frame* reply, Deadline deadline, int spin_micros);
  // The status block and type of a reply, wherever it came from.
  static Status CheckReply(uint16_t type, uint16_t reply_type, const Frame& reply);

  UniqueFd fd_;
  uint32_t timeout_ms_ = 300000;
  std::unique_ptr<ShmSegment> reply_page_;
  uint32_t replies_taken_ = 0;       // replies read from the page so far
  // The request page, where Group requests whose replies come through the reply page go.
  std::unique_ptr<ShmSegment> request_page_;
  uint32_t requests_put_ = 0;  // requests put in the page so far
  bool reply_in_page_next_ = false;  // the request in flight asked for the page
};

}  // namespace conduit

#endif  // CONDUIT_LIBMCCS_NCCL_DAEMON_CONNECTION_H_
