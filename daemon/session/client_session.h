// ClientSession: serves one program connection (shim protocol) until it closes.
#ifndef CONDUIT_DAEMON_SESSION_CLIENT_SESSION_H_
#define CONDUIT_DAEMON_SESSION_CLIENT_SESSION_H_

#include <memory>
#include <string>
#include <vector>

#include "collectives/registry.h"
#include "common/fd_io.h"
#include "common/frame.h"
#include "server/program_park.h"
#include "server/program_policy.h"
#include "server/service.h"
#include "common/shm_segment.h"
#include "gpu/comm_stream.h"
#include "session/device_proxy.h"
#include "session/device_session.h"
#include "session/group_request.h"
#include "session/host_regions.h"
#include "session/request_page.h"

namespace conduit {

class ClientSession {
 public:
  // `exe`: the program's executable as the kernel names it (tenant policies match on it);
  // `creds`: its process and user, as the kernel reports the socket's peer. `park` (may be null) stops
  // the session between two requests for a live upgrade.
  ClientSession(UniqueFd fd, CommRegistry* registry, const ProgramPolicy* policy, std::string exe,
                const ProgramCredentials& creds, ProgramPark* park = nullptr);
  ~ClientSession();

  // Serves requests until the program disconnects or sends something unparseable.
  void Run();

  // Live upgrade (docs/upgrade.md): the session as the next process needs it, with a
  // duplicate of its shared segment; refused while it holds GPU state.
  Status SavedState(std::string* state, std::vector<UniqueFd>* fds) const;
  // In the next process, before Run: goes on from what the old process saved (checked as
  // any input), with the communicator it handed over (CommRegistry::TakeHandedOver).
  Status Restore(const std::string& state, std::vector<UniqueFd> fds);

 private:
  Status HandleHello(const Frame& frame, bool* close_after);
  Status HandleCommInit(const Frame& frame);
  Status HandleDeriveId(const Frame& frame);
  Status HandleUniqueIdFromAddress(const Frame& frame);
  Status HandleDeriveIdFromParent(const Frame& frame);
  Status HandleAttach(Frame& frame);
  Status HandleAttachResult(const Frame& frame);
  // The connection's reply page and request page (protocol/call_page.h).
  Status HandleAttachReplyPage(Frame& frame);
  Status HandleAttachRequestPage(Frame& frame);
  // The next request, from the request page or the socket; a kRequestInPage frame is
  // passed on (Run ignores it).
  Status NextRequest(Frame* frame);
  // Whether a streamed group's reply tells the shim to attach the result area again
  // (shimproto::kReplyResultAttach).
  bool ResultAreaStale(const ParsedGroup& group) const;
  Status HandleGroup(const Frame& frame);
  // A kGroupAsync group: checked and resolved now, replied to at once, run by proxy_.
  Status HandleAsyncGroup(const ParsedGroup& group);
  // RegisterBuffer and RegisterVmmBuffer.
  Status HandleRegisterBuffer(const Frame& frame);
  Status HandleReleaseBuffer(const Frame& frame);
  Status HandleRegisterSpan(const Frame& frame);
  Status HandleAttachRegion(Frame& frame);
  Status HandleReleaseRegion(const Frame& frame);
  // `pass_fd` (>= 0) rides along with the reply (SCM_RIGHTS). A Group's reply goes into the
  // reply page where the request asked for that (reply_in_page_) and it fits.
  Status Reply(uint16_t type, const void* payload, size_t len, int pass_fd = -1);
  Status ReplyStatus(uint16_t type, const Status& status);

  // Joins comm_'s group of sessions in the park (ProgramPark::Member::SetGroup).
  void JoinParkGroup();

  UniqueFd fd_;
  CommRegistry* registry_;
  ProgramPark* const park_;
  std::unique_ptr<ProgramPark::Member> member_;  // while Run serves
  const ProgramPolicy* policy_;
  const std::string exe_;
  const int pid_;
  const int uid_;
  std::string who_ = "program";
  bool hello_done_ = false;
  std::shared_ptr<Communicator> comm_;
  int rank_ = -1;
  ShmSegment shm_;
  UniqueFd shm_fd_;  // the segment's memfd, kept to hand it over
  uint64_t result_area_ = 0;  // the communicator's result area this program attached (0: none)
  // The reply page (protocol/call_page.h), its memfd (kept to hand it over), the replies
  // put there so far, and whether the Group request being served asked for it.
  ShmSegment reply_page_;
  UniqueFd reply_page_fd_;
  uint32_t replies_in_page_ = 0;
  bool reply_in_page_ = false;
  RequestPage request_page_;
  DeviceSession device_;
  HostRegions regions_;
  // The last accepted asynchronous group's words: when the connection closes, the ready
  // word is written for it, so conduitd's stream never waits for a program that is gone.
  DeviceSession::AsyncWords last_words_;
  // The stream and pinned memory of this connection's point-to-point ops on device
  // buffers (collectives/device_p2p.cc), made at the first; used by proxy_'s jobs only.
  std::unique_ptr<gpu::CommStream> p2p_stream_;
  // Declared last: destroyed (stopped and joined) before what its jobs may still use.
  DeviceProxy proxy_;
};

}  // namespace conduit

#endif  // CONDUIT_DAEMON_SESSION_CLIENT_SESSION_H_
