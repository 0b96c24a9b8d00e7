// RequestPage: conduitd's side of a program connection's request page (protocol/call_page.h;
// docs/shim-protocol.md, "Requests through the request page"). The program puts a host Group
// request there instead of sending it on its socket; the session's thread looks at the page
// between requests, and before it sleeps on the socket it asks for a kRequestInPage frame.
//
// The page is the program's memory: a request is copied out before anything reads it, only
// the next in sequence is taken, and only a Group that asks for its reply in the reply page
// (kGroupReplyInPage: no streamed or device group, which bring more on the socket).
#ifndef CONDUIT_DAEMON_SESSION_REQUEST_PAGE_H_
#define CONDUIT_DAEMON_SESSION_REQUEST_PAGE_H_

#include <cstdint>

#include "common/fd_io.h"
#include "common/frame.h"
#include "common/shm_segment.h"
#include "common/status.h"

namespace conduit {

class RequestPage {
 public:
  // Takes `fd` as the connection's page (a sealed memfd of a page or more), with `taken`
  // requests already taken from it (0 for a new page; the count a live upgrade hands over).
  // A second page replaces the first.
  Status Attach(UniqueFd fd, uint32_t taken);
  bool attached() const { return page_.data() != nullptr; }
  int fd() const { return fd_.get(); }
  uint32_t taken() const { return taken_; }

  // Whether the program put a request not taken yet.
  bool Pending() const;
  // Between two requests: spins within the busy-poll budget until a request is in the page
  // (true) or `socket` is readable (false). With neither, asks for a kRequestInPage frame
  // and looks once more (true if a request came meanwhile): the caller may then sleep on
  // the socket.
  bool AwaitPending(int socket);
  // After a sleep on the socket: no frame needed any more (one already sent comes anyway,
  // and is ignored).
  void StopWaiting();
  // Copies the pending request out as a frame.
  Status Take(Frame* frame);

 private:
  ShmSegment page_;
  UniqueFd fd_;
  uint32_t taken_ = 0;
};

}  // namespace conduit

#endif  // CONDUIT_DAEMON_SESSION_REQUEST_PAGE_H_
