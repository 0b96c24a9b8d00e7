// ClientSession: serves one program connection (shim protocol) until it closes.
#ifndef CONDUIT_DAEMON_SESSION_CLIENT_SESSION_H_
#define CONDUIT_DAEMON_SESSION_CLIENT_SESSION_H_

#include <memory>
#include <string>
#include <vector>

#include "collectives/registry.h"
#include "common/fd_io.h"
#include "common/frame.h"
#include "server/program_policy.h"
#include "common/shm_segment.h"
#include "session/device_session.h"

namespace conduit {

class ClientSession {
 public:
  // `exe`: the program's executable as the kernel names it (tenant policies match on it);
  // `pid`: its process, as the kernel reports the socket's peer.
  ClientSession(UniqueFd fd, CommRegistry* registry, const ProgramPolicy* policy, std::string exe, int pid);
  ~ClientSession();

  // Serves requests until the program disconnects or sends something unparseable.
  void Run();

 private:
  Status HandleHello(const Frame& frame, bool* close_after);
  Status HandleCommInit(const Frame& frame);
  Status HandleDeriveId(const Frame& frame);
  Status HandleAttach(Frame& frame);
  Status HandleGroup(const Frame& frame);
  Status HandleRegisterBuffer(const Frame& frame);
  Status HandleReleaseBuffer(const Frame& frame);
  Status Reply(uint16_t type, const void* payload, size_t len);
  Status ReplyStatus(uint16_t type, const Status& status);

  UniqueFd fd_;
  CommRegistry* registry_;
  const ProgramPolicy* policy_;
  const std::string exe_;
  const int pid_;
  std::string who_ = "program";
  bool hello_done_ = false;
  std::shared_ptr<Communicator> comm_;
  int rank_ = -1;
  ShmSegment shm_;
  DeviceSession device_;
};

}  // namespace conduit

#endif  // CONDUIT_DAEMON_SESSION_CLIENT_SESSION_H_
