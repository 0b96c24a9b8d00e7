#include "common/fd_io.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

namespace conduit {

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) reset(other.release());
  return *this;
}

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) close(fd_);
  fd_ = fd;
}

Status WaitFd(int fd, short events, Deadline deadline, const char* what) {
  for (;;) {
    pollfd p{fd, events, 0};
    int r = poll(&p, 1, deadline.PollTimeoutMs());
    if (r > 0) return Status::Ok();  // readiness or error: the next transfer reports which
    if (r == 0) return SystemError("timed out waiting to %s", what);
    if (errno != EINTR) return SystemError("poll failed while waiting to %s: %s", what, strerror(errno));
  }
}

Status ClosedAfter(size_t got, size_t want) {
  if (got == 0) {
    return want == 0 ? EndOfStream("connection closed by peer")
                     : EndOfStream("connection closed by peer after 0 of %zu bytes", want);
  }
  if (want == 0) return SystemError("connection closed by peer in the middle of a frame (%zu bytes of it)", got);
  return SystemError("connection closed by peer after %zu of %zu bytes", got, want);
}

Status ReadFull(int fd, void* buf, size_t len, Deadline deadline) {
  return ReadWithFd(fd, buf, len, nullptr, deadline);
}

Status ReadWithFd(int fd, void* buf, size_t len, UniqueFd* received, Deadline deadline) {
  char* p = static_cast<char*>(buf);
  size_t done = 0;
  while (done < len) {
    iovec iov{p + done, len - done};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (received != nullptr) {
      msg.msg_control = control;
      msg.msg_controllen = sizeof(control);
    }
    ssize_t r = recvmsg(fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (r > 0) {
      if (received != nullptr && msg.msg_controllen > 0) {
        for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
          if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            int got;
            memcpy(&got, CMSG_DATA(c), sizeof(got));
            received->reset(got);
          }
        }
      }
      done += static_cast<size_t>(r);
      continue;
    }
    if (r == 0) return ClosedAfter(done, len);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      CONDUIT_RETURN_IF_ERROR(WaitFd(fd, POLLIN, deadline, "receive"));
      continue;
    }
    return SystemError("receive failed: %s", strerror(errno));
  }
  return Status::Ok();
}

Status WriteFull(int fd, const void* buf, size_t len, Deadline deadline) {
  iovec iov{const_cast<void*>(buf), len};
  return WriteFullV(fd, &iov, 1, deadline);
}

Status WriteFullV(int fd, const iovec* iov, int n, Deadline deadline) {
  return WriteWithFd(fd, iov, n, -1, deadline);
}

void AttachFds(msghdr* msg, FdControl* control, const int* fds, int n) {
  n = std::clamp(n, 0, kMaxAttachedFds);
  if (n == 0) return;
  msg->msg_control = control->bytes;
  msg->msg_controllen = CMSG_SPACE(sizeof(int) * n);
  cmsghdr* c = CMSG_FIRSTHDR(msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int) * n);
  memcpy(CMSG_DATA(c), fds, sizeof(int) * n);
}

Status WriteWithFd(int fd, const iovec* iov_in, int n, int pass_fd, Deadline deadline) {
  std::vector<iovec> iov(iov_in, iov_in + n);
  size_t first = 0;
  bool fd_pending = pass_fd >= 0;
  while (first < iov.size()) {
    if (iov[first].iov_len == 0) {
      ++first;
      continue;
    }
    FdControl control;
    msghdr msg{};
    msg.msg_iov = &iov[first];
    msg.msg_iovlen = iov.size() - first;
    if (fd_pending) AttachFds(&msg, &control, &pass_fd, 1);
    ssize_t r = sendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (r >= 0) {
      fd_pending = false;
      size_t left = static_cast<size_t>(r);
      while (left > 0 && first < iov.size()) {
        size_t take = left < iov[first].iov_len ? left : iov[first].iov_len;
        iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + take;
        iov[first].iov_len -= take;
        left -= take;
        if (iov[first].iov_len == 0) ++first;
      }
      continue;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      CONDUIT_RETURN_IF_ERROR(WaitFd(fd, POLLOUT, deadline, "send"));
      continue;
    }
    if (errno == EPIPE || errno == ECONNRESET) return SystemError("connection closed by peer while sending");
    return SystemError("send failed: %s", strerror(errno));
  }
  return Status::Ok();
}

Status InputOnlyPollFd(int fd, UniqueFd* out) {
  UniqueFd set(epoll_create1(EPOLL_CLOEXEC));
  if (!set.valid()) return SystemError("epoll_create1: %s", strerror(errno));
  epoll_event ev{};
  ev.events = EPOLLIN;  // level-triggered: every new input wakes the set's own watchers
  if (epoll_ctl(set.get(), EPOLL_CTL_ADD, fd, &ev) != 0) return SystemError("epoll_ctl: %s", strerror(errno));
  *out = std::move(set);
  return Status::Ok();
}

UniqueFd TakeDescriptor(std::vector<UniqueFd>* fds, uint32_t position) {
  if (position == 0 || position > fds->size()) return UniqueFd();
  return std::move((*fds)[position - 1]);
}

Status TakeDescriptor(std::vector<UniqueFd>* fds, uint32_t position, UniqueFd* out) {
  *out = TakeDescriptor(fds, position);
  if (!out->valid()) return InvalidArgument("descriptor %u of %zu is not there, or named twice", position, fds->size());
  return Status::Ok();
}

Status DupFd(int fd, const char* what, UniqueFd* out) {
  out->reset(fcntl(fd, F_DUPFD_CLOEXEC, 0));
  if (!out->valid()) return SystemError("dup of %s: %s", what, strerror(errno));
  return Status::Ok();
}

}  // namespace conduit
