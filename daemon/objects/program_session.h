// ProgramSession: one libhoplite connection on the program socket, served until it
// closes. Requests are handled one at a time, in order (a program wanting concurrent calls
// opens several clients). Read-only views handed to the program keep their copy from
// being evicted until the program releases them or disconnects.
#ifndef CONDUIT_DAEMON_OBJECTS_PROGRAM_SESSION_H_
#define CONDUIT_DAEMON_OBJECTS_PROGRAM_SESSION_H_

#include <map>
#include <string>
#include <vector>

#include "common/frame.h"
#include "objects/object_service.h"

namespace conduit::objects {

class ProgramSession {
 public:
  ProgramSession(ObjectService* service, UniqueFd fd, const ProgramCredentials& creds);
  ~ProgramSession();
  void Run();

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
  Status ReplyStatus(uint16_t type, const ObjStatus& st);
  Deadline DeadlineOf(uint32_t timeout_ms) const;

  ObjectService* service_;
  UniqueFd fd_;
  ProgramCredentials creds_;
  std::string who_;
  bool hello_done_ = false;
  std::multimap<std::string, ObjectRef> views_;
};

}  // namespace conduit::objects

#endif  // CONDUIT_DAEMON_OBJECTS_PROGRAM_SESSION_H_
