// ProgramPark: how a service stops its program sessions between two requests for a live
// upgrade (docs/upgrade.md), hands their connections over, or lets them go on when the
// upgrade is called off.
//
// Each session is a Member from its start to its end and waits for its next request with
// AwaitRequest. While a park is on, a session that is between two requests stops there:
// nothing of its next request has been read, so the kernel keeps those bytes for whichever
// process reads the connection next. A session in the middle of a request finishes it
// first. After a handover the park never ends: the parked sessions wait until the process
// exits, and never touch their connections again.
#ifndef CONDUIT_DAEMON_SERVER_PROGRAM_PARK_H_
#define CONDUIT_DAEMON_SERVER_PROGRAM_PARK_H_

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "common/deadline.h"
#include "common/fd_io.h"
#include "common/status.h"
#include "server/service.h"

namespace conduit {

class ProgramPark {
 public:
  explicit ProgramPark(ServiceId service);
  ProgramPark(const ProgramPark&) = delete;
  ProgramPark& operator=(const ProgramPark&) = delete;

  // One session: its connection, and its state as the service encodes it for the next
  // process (read only while the session is parked).
  class Member {
   public:
    Member(ProgramPark* park, int fd, std::function<std::string()> state);
    ~Member();
    Member(const Member&) = delete;
    Member& operator=(const Member&) = delete;
    // Waits without a bound for the next request to begin on the connection; parks on
    // the way while a park is on. An error when the connection cannot be waited on.
    Status AwaitRequest();

   private:
    friend class ProgramPark;
    ProgramPark* park_;
    int fd_;
    std::function<std::string()> state_;
    bool parked_ = false;  // under park_->mu_
  };

  // The upgrade's side.
  void Begin();               // sessions between two requests stop there
  size_t parked() const;      // sessions stopped so far
  // The parked sessions, each with a duplicate of its connection.
  Status Export(std::vector<HandedProgram>* out) const;
  void Resume();              // the upgrade was called off: every session goes on

 private:
  const ServiceId service_;
  UniqueFd wake_;  // an eventfd, readable while a park is on
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<bool> parking_{false};  // written under mu_
  std::set<Member*> members_;
  size_t parked_ = 0;
};

}  // namespace conduit

#endif  // CONDUIT_DAEMON_SERVER_PROGRAM_PARK_H_
