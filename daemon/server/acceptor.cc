#include "server/acceptor.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "common/log.h"
#include "common/thread_guard.h"
#include "server/rate_limited_log.h"

namespace conduit {
namespace {

// accept(2) failing with EMFILE leaves the connection queued and the listener readable: the
// loop would spin and the caller would wait. A descriptor kept in reserve is given up for a
// moment to accept the connection and close it, which refuses it promptly.
class DescriptorReserve {
 public:
  DescriptorReserve() : fd_(open("/dev/null", O_RDONLY | O_CLOEXEC)) {}
  void RefuseOne(int listener) {
    fd_.reset();
    int fd = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) close(fd);
    fd_.reset(open("/dev/null", O_RDONLY | O_CLOEXEC));
  }

 private:
  UniqueFd fd_;
};

}  // namespace

ListenerGate::ListenerGate() : wake_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (!wake_.valid()) CLOG_ERROR("eventfd for the accept loops failed: %s; they cannot be parked", strerror(errno));
}

bool ListenerGate::Park(Deadline deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  if (state_ != State::kOpen) return state_ == State::kParked;
  state_ = State::kParked;
  const uint64_t one = 1;
  if (wake_.valid()) (void)!write(wake_.get(), &one, sizeof(one));
  if (cv_.wait_until(lock, deadline.when(), [this] { return parked_ == loops_; })) return true;
  lock.unlock();
  Resume();
  return false;
}

void ListenerGate::Resume() {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_ != State::kParked) return;
  state_ = State::kOpen;
  uint64_t count;
  if (wake_.valid()) (void)!read(wake_.get(), &count, sizeof(count));
  cv_.notify_all();
}

void ListenerGate::Stop() {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_ == State::kOpen) {
    const uint64_t one = 1;
    if (wake_.valid()) (void)!write(wake_.get(), &one, sizeof(one));
  }
  state_ = State::kStopped;
  cv_.notify_all();
}

void ListenerGate::Enter() {
  std::lock_guard<std::mutex> lock(mu_);
  ++loops_;
}

void ListenerGate::Leave() {
  std::lock_guard<std::mutex> lock(mu_);
  --loops_;
  cv_.notify_all();
}

bool ListenerGate::MayAccept() {
  std::unique_lock<std::mutex> lock(mu_);
  if (state_ == State::kParked) {
    ++parked_;
    cv_.notify_all();
    cv_.wait(lock, [this] { return state_ != State::kParked; });
    --parked_;
  }
  return state_ == State::kOpen;
}

void AcceptLoop(int listener, const char* what, ListenerGate* gate, std::atomic<uint64_t>* refused,
                const std::function<void(UniqueFd fd, const SockAddr& peer)>& handle) {
  // Non-blocking: poll says a connection is there, but another process sharing the socket
  // (the other side of an upgrade) may take it first; accept must then not block.
  const int flags = fcntl(listener, F_GETFL);
  if (flags >= 0) fcntl(listener, F_SETFL, flags | O_NONBLOCK);
  DescriptorReserve reserve;
  RateLimitedLog log;
  // Leaves the gate however the loop ends (a handler may throw): a loop counted forever
  // would keep Park waiting.
  struct Member {
    ListenerGate* gate;
    explicit Member(ListenerGate* g) : gate(g) { gate->Enter(); }
    ~Member() { gate->Leave(); }
  } member(gate);
  while (gate->MayAccept()) {
    pollfd fds[2] = {{listener, POLLIN, 0}, {gate->wake_fd(), POLLIN, 0}};
    const int n = poll(fds, gate->wake_fd() >= 0 ? 2 : 1, -1);
    if (n < 0 && errno != EINTR) {
      CLOG_ERROR("poll on the %s failed: %s", what, strerror(errno));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    if (n <= 0 || (fds[1].revents & POLLIN) != 0 || (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
    SockAddr peer;
    peer.len = sizeof(peer.storage);
    int fd = accept4(listener, reinterpret_cast<sockaddr*>(&peer.storage), &peer.len, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINVAL) break;  // the daemon shut the listener down
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE) {
        reserve.RefuseOne(listener);
        ++*refused;
        log.Warn(what, "out of file descriptors: a new connection was refused (raise the daemon's RLIMIT_NOFILE)");
        continue;
      }
      CLOG_ERROR("accept on the %s failed: %s", what, strerror(errno));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    // Accepted sockets do not inherit O_NONBLOCK on Linux; the services expect blocking ones.
    // A handler that throws (out of memory) loses its connection, never the loop.
    RunGuarded(what, [&] { handle(UniqueFd(fd), peer); });
  }
}

}  // namespace conduit
