#include "server/program_park.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/busy_poll.h"

namespace conduit {

ProgramPark::ProgramPark(ServiceId service)
    : service_(service), wake_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

ProgramPark::Member::Member(ProgramPark* park, int fd, std::function<std::string()> state)
    : park_(park), fd_(fd), state_(std::move(state)) {
  std::lock_guard<std::mutex> lock(park_->mu_);
  park_->members_.insert(this);
}

ProgramPark::Member::~Member() {
  std::lock_guard<std::mutex> lock(park_->mu_);
  park_->members_.erase(this);
}

Status ProgramPark::Member::AwaitRequest() {
  for (;;) {
    // A park stops a session at its request boundary even when the next request has
    // arrived: its bytes stay in the kernel for the next process.
    if (park_->parking_.load()) {
      std::unique_lock<std::mutex> lock(park_->mu_);
      if (!park_->parking_.load()) continue;  // it just ended
      parked_ = true;
      ++park_->parked_;
      park_->cv_.notify_all();
      park_->cv_.wait(lock, [this] { return !park_->parking_.load(); });
      parked_ = false;
      --park_->parked_;
      continue;
    }
    // A program in a loop sends its next request soon after the reply: caught without a
    // wake-up when possible (common/busy_poll.h).
    if (SpinUntilReady(fd_, POLLIN)) return Status::Ok();
    pollfd fds[2] = {{fd_, POLLIN, 0}, {park_->wake_.get(), POLLIN, 0}};
    const int n = poll(fds, park_->wake_.valid() ? 2 : 1, -1);
    if (n < 0 && errno != EINTR) return SystemError("poll of a program connection: %s", strerror(errno));
    if (n > 0 && fds[1].revents == 0 && fds[0].revents != 0) return Status::Ok();
  }
}

void ProgramPark::Begin() {
  std::lock_guard<std::mutex> lock(mu_);
  parking_.store(true);
  const uint64_t one = 1;
  (void)!write(wake_.get(), &one, sizeof(one));
}

size_t ProgramPark::parked() const {
  std::lock_guard<std::mutex> lock(mu_);
  return parked_;
}

Status ProgramPark::Export(std::vector<HandedProgram>* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (Member* m : members_) {
    if (!m->parked_) continue;
    HandedProgram h;
    h.service = service_;
    h.fd.reset(fcntl(m->fd_, F_DUPFD_CLOEXEC, 0));
    if (!h.fd.valid()) return SystemError("dup of a program connection: %s", strerror(errno));
    h.state = m->state_();
    out->push_back(std::move(h));
  }
  return Status::Ok();
}

void ProgramPark::Resume() {
  std::lock_guard<std::mutex> lock(mu_);
  parking_.store(false);
  uint64_t value;
  (void)!read(wake_.get(), &value, sizeof(value));
  cv_.notify_all();
}

}  // namespace conduit
