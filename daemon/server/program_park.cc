#include "server/program_park.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>

#include "common/busy_poll.h"

namespace conduit {

namespace {

// How often a session that may not stop yet (its group is busy) looks again.
constexpr int kGroupRecheckMs = 5;

}  // namespace

ProgramPark::ProgramPark(ServiceId service, std::function<void()> on_resume, std::function<void()> on_begin)
    : service_(service), on_resume_(std::move(on_resume)), on_begin_(std::move(on_begin)), wake_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

ProgramPark::Member::Member(ProgramPark* park, int fd, StateFn state)
    : park_(park), fd_(fd), state_(std::move(state)) {
  std::lock_guard<std::mutex> lock(park_->mu_);
  park_->members_.insert(this);
}

ProgramPark::Member::~Member() {
  std::lock_guard<std::mutex> lock(park_->mu_);
  if (in_request_ && group_ != 0 && --park_->busy_[group_] == 0) park_->busy_.erase(group_);
  park_->members_.erase(this);
}

void ProgramPark::Member::SetGroup(uint64_t group) {
  std::lock_guard<std::mutex> lock(park_->mu_);
  if (in_request_ && group_ != 0 && --park_->busy_[group_] == 0) park_->busy_.erase(group_);
  group_ = group;
  if (in_request_ && group_ != 0) ++park_->busy_[group_];
}

void ProgramPark::Member::BeginRequest() {
  in_request_ = true;
  if (group_ != 0) ++park_->busy_[group_];
}

void ProgramPark::Member::SetBackgroundWork(std::function<bool()> busy) {
  std::lock_guard<std::mutex> lock(park_->mu_);
  background_ = std::move(busy);
}

bool ProgramPark::BackgroundBusy(const Member& m) const {
  if (m.group_ == 0) return m.background_ && m.background_();
  for (const Member* other : members_) {
    if (other->group_ == m.group_ && other->background_ && other->background_()) return true;
  }
  return false;
}

bool ProgramPark::MayPark(const Member& m) const {
  return (m.group_ == 0 || busy_.count(m.group_) == 0) && (!m.idle_ || m.idle_()) && !BackgroundBusy(m);
}

Status ProgramPark::Member::AwaitRequest(Ready in_hand) {
  // group_ and in_request_ change only on this session's thread: read here without the lock.
  if (in_request_) {
    in_request_ = false;
    if (group_ != 0) {
      std::lock_guard<std::mutex> lock(park_->mu_);
      if (--park_->busy_[group_] == 0) park_->busy_.erase(group_);
    }
  }
  for (;;) {
    // A park stops a session at its request boundary even when the next request has
    // arrived: its bytes stay in the kernel for the next process.
    if (park_->parking_.load()) {
      std::unique_lock<std::mutex> lock(park_->mu_);
      if (!park_->parking_.load()) continue;  // it just ended
      if (!park_->MayPark(*this)) {
        if (background_ && background_()) {
          // Its own background work waits for the others' requests, not its next one:
          // read nothing more, and stop once it (and the group's) has ended.
          park_->cv_.wait_for(lock, std::chrono::milliseconds(kGroupRecheckMs));
          continue;
        }
        // Another session of its group is in a request or has background work, which may
        // need this one's next request (or this one is not idle): serve that when it
        // comes, and stop once quiet.
        if (in_hand.buffered) {
          BeginRequest();
          return Status::Ok();
        }
        lock.unlock();
        pollfd fd = {fd_, POLLIN, 0};
        const int n = poll(&fd, 1, kGroupRecheckMs);
        if (n < 0 && errno != EINTR) return SystemError("poll of a program connection: %s", strerror(errno));
        if (n <= 0) continue;
        lock.lock();
        if (park_->parking_.load() && park_->MayPark(*this)) continue;  // quiet now: stop first
        BeginRequest();
        return Status::Ok();
      }
      parked_ = true;
      ++park_->parked_;
      park_->cv_.notify_all();
      park_->cv_.wait(lock, [this] { return !park_->parking_.load(); });
      parked_ = false;
      --park_->parked_;
      continue;
    }
    // What the session has in hand is served first. Else: a program in a loop sends its
    // next request soon after the reply, caught without a wake-up when possible
    // (common/busy_poll.h).
    bool ready = in_hand.buffered || in_hand.held || (!in_hand.spun && SpinUntilReady(fd_, POLLIN));
    if (!ready) {
      pollfd fds[2] = {{fd_, POLLIN, 0}, {park_->wake_.get(), POLLIN, 0}};
      const int n = poll(fds, park_->wake_.valid() ? 2 : 1, -1);
      if (n < 0 && errno != EINTR) return SystemError("poll of a program connection: %s", strerror(errno));
      ready = n > 0 && fds[1].revents == 0 && fds[0].revents != 0;
    }
    if (!ready) continue;
    if (group_ == 0) {  // no other session waits on this one's requests
      in_request_ = true;
      return Status::Ok();
    }
    std::lock_guard<std::mutex> lock(park_->mu_);
    // Decided under the park's lock, so that a session of a group never begins a request
    // once the others have stopped.
    if (park_->parking_.load() && park_->MayPark(*this)) continue;
    BeginRequest();
    return Status::Ok();
  }
}

void ProgramPark::Begin() {
  if (on_begin_) on_begin_();
  std::lock_guard<std::mutex> lock(mu_);
  parking_.store(true);
  const uint64_t one = 1;
  (void)!write(wake_.get(), &one, sizeof(one));
}

size_t ProgramPark::parked() const {
  std::lock_guard<std::mutex> lock(mu_);
  return parked_;
}

size_t ProgramPark::members() const {
  std::lock_guard<std::mutex> lock(mu_);
  return members_.size();
}

Status ProgramPark::Export(std::vector<HandedProgram>* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (Member* m : members_) {
    if (!m->parked_) continue;
    HandedProgram h;
    h.service = service_;
    CONDUIT_RETURN_IF_ERROR(DupFd(m->fd_, "a program connection", &h.fd));
    CONDUIT_RETURN_IF_ERROR(m->state_(&h.state, &h.fds));
    out->push_back(std::move(h));
  }
  return Status::Ok();
}

void ProgramPark::Resume() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    parking_.store(false);
    uint64_t value;
    (void)!read(wake_.get(), &value, sizeof(value));
    cv_.notify_all();
  }
  if (on_resume_) on_resume_();
}

}  // namespace conduit
