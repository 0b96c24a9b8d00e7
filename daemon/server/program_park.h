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
//
// Sessions may form a group (the local ranks of one collective communicator): none of a
// group stops while another is in a request, since that request may wait for the others'
// next one (a collective runs once every local rank has called it). They stop together
// once none is in a request.
//
// A session may also say when it may stop at all (SetIdle: the RPC service's sessions stop
// only with no call in flight), that it has requests in hand that it read ahead (Ready):
// those it serves without waiting on its connection, and that work it started runs on
// without it (SetBackgroundWork: a collective session's accepted asynchronous device
// groups): neither it nor its group stops until that work has ended, and it reads nothing
// more meanwhile.
#ifndef CONDUIT_DAEMON_SERVER_PROGRAM_PARK_H_
#define CONDUIT_DAEMON_SERVER_PROGRAM_PARK_H_

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <map>
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
  // `on_resume` (may be empty) runs when an upgrade is called off, after the sessions go on:
  // the service undoes what it stopped besides them.
  // `on_begin` (may be empty) runs when a park begins, before any session is asked to stop.
  explicit ProgramPark(ServiceId service, std::function<void()> on_resume = nullptr,
                       std::function<void()> on_begin = nullptr);
  ProgramPark(const ProgramPark&) = delete;
  ProgramPark& operator=(const ProgramPark&) = delete;

  // One session: its connection, and its state as the service encodes it for the next
  // process (read only while the session is parked).
  class Member {
   public:
    // `state` encodes the session and may add descriptors it holds (duplicates).
    using StateFn = std::function<Status(std::string* state, std::vector<UniqueFd>* fds)>;
    Member(ProgramPark* park, int fd, StateFn state);
    ~Member();
    Member(const Member&) = delete;
    Member& operator=(const Member&) = delete;
    // What a session that reads ahead of its requests has in hand.
    struct Ready {
      // A request already read and not yet served: served at once unless the session
      // may stop, in which case it stops with it in hand (its state carries it).
      bool buffered;
      // Requests it put aside during a park: served as soon as the park is over.
      bool held;
      // It already spun for its next request (a collective session looking at its request
      // page too, session/request_page.h): block at once.
      bool spun;
    };
    // Waits without a bound for the next request to begin on the connection (or in
    // hand, `in_hand`); parks on the way while a park is on. An error when the connection
    // cannot be waited on. The session is in a request from its return to the next call.
    Status AwaitRequest(Ready in_hand = {});
    // Joins group `group` (0: none); called by the session's own thread.
    void SetGroup(uint64_t group);
    // The session may stop only while `idle` says so (besides its group). It runs under
    // the park's lock: it must not call into the park. Set before the first AwaitRequest.
    void SetIdle(std::function<bool()> idle) { idle_ = std::move(idle); }
    // Work the session started that goes on without its connection (a collective
    // session's asynchronous device groups, which wait for the other local ranks' groups):
    // while `busy` says so, neither the session nor its group stops, and the session reads
    // no new request while a park is on, since that work never waits for its own next
    // request. Runs under the park's lock, like `idle`. Set before the first AwaitRequest.
    void SetBackgroundWork(std::function<bool()> busy);

   private:
    friend class ProgramPark;
    // Marks the session in a request (needs park_->mu_).
    void BeginRequest();
    ProgramPark* park_;
    int fd_;
    StateFn state_;
    std::function<bool()> idle_;
    std::function<bool()> background_;  // under park_->mu_
    bool parked_ = false;  // under park_->mu_
    uint64_t group_ = 0;   // the session's own thread only (busy_ counts it under park_->mu_)
    bool in_request_ = false;  // the session's own thread only
  };

  // The upgrade's side.
  void Begin();               // sessions between two requests stop there
  bool parking() const { return parking_.load(); }
  size_t parked() const;      // sessions stopped so far
  size_t members() const;     // sessions, stopped or not
  // The parked sessions, each with a duplicate of its connection.
  Status Export(std::vector<HandedProgram>* out) const;
  void Resume();              // the upgrade was called off: every session goes on

 private:
  // Whether `m` may stop now (needs mu_).
  bool MayPark(const Member& m) const;
  // Whether `m`, or a session of its group, has background work running (needs mu_).
  bool BackgroundBusy(const Member& m) const;

  const ServiceId service_;
  const std::function<void()> on_resume_;
  const std::function<void()> on_begin_;
  UniqueFd wake_;  // an eventfd, readable while a park is on
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<bool> parking_{false};  // written under mu_
  std::set<Member*> members_;
  size_t parked_ = 0;
  std::map<uint64_t, int> busy_;  // group -> its sessions in a request
};

}  // namespace conduit

#endif  // CONDUIT_DAEMON_SERVER_PROGRAM_PARK_H_
