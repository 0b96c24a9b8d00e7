// ProgramSession: one libhoplite connection on the program socket, served until it
// closes. Requests are handled one at a time, in order (a program wanting concurrent calls
// opens several clients). Read-only views handed to the program keep their copy from
// being evicted until the program releases them or disconnects.
//
// The program is who the kernel says (SO_PEERCRED uid/gid/pid, SO_PEERGROUPS, the
// executable of /proc/PID/exe), never what it sends: admission (--deny-exe) and every
// access check (access.h) use that. A program may stay idle between requests for as long
// as it likes, but once a frame has started it must arrive whole within kFrameTimeoutMs,
// and a Put's progress reports must keep coming (each within --timeout-ms) and advance.
#ifndef CONDUIT_DAEMON_OBJECTS_PROGRAM_SESSION_H_
#define CONDUIT_DAEMON_OBJECTS_PROGRAM_SESSION_H_

#include <map>
#include <string>
#include <vector>

#include "common/frame.h"
#include "objects/access.h"
#include "objects/object_api.h"
#include "server/service.h"

namespace conduit::objects {

class ProgramSession {
 public:
  // A frame whose first byte arrived must be complete this soon (documented in
  // docs/object-protocol.md): a header followed by silence loses its connection.
  static constexpr int kFrameTimeoutMs = 5000;
  // Read-only views one connection may hold at a time (each pins a copy against eviction).
  static constexpr size_t kMaxViews = 65536;

  ProgramSession(ObjectApi* service, UniqueFd fd, const ProgramCredentials& creds);
  ~ProgramSession();
  void Run();

  // Live upgrade (server/program_park.h): the session as the next process takes it (its
  // Hello done or not, the read-only views it holds), and taking it there, where the
  // views pin the handed-over copies again. Restore refuses a malformed state, a view of
  // a copy that is not here, or one the program may not read.
  std::string SavedState() const;
  Status Restore(const std::string& state);

 private:
  // Each returns a non-ok status only when the connection must be closed.
  Status OnHello(const Frame& f);
  Status OnPut(const Frame& f);
  Status OnGet(const Frame& f);
  Status OnRelease(const Frame& f);
  Status OnDelete(const Frame& f);
  Status OnWait(const Frame& f);
  Status OnReduce(const Frame& f);
  Status OnState();
  Status Reply(uint16_t type, const Bytes& body, int pass_fd = -1);
  Status ReplyStatus(uint16_t type, const Status& st);
  Deadline DeadlineOf(uint32_t timeout_ms) const;
  // Waits (without a bound) for the next request to begin, then reads it within
  // kFrameTimeoutMs.
  Status ReadRequest(ProgramPark::Member& member, Frame* f);

  ObjectApi* service_;
  UniqueFd fd_;
  ProgramCredentials creds_;
  Caller caller_;
  std::string exe_;  // the basename of /proc/PID/exe (see server/service_router.h)
  std::string who_;
  bool hello_done_ = false;
  std::multimap<std::string, ObjectRef> views_;
};

}  // namespace conduit::objects

#endif  // CONDUIT_DAEMON_OBJECTS_PROGRAM_SESSION_H_
