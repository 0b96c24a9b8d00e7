// Blocking-with-deadline I/O on sockets, and passing file descriptors over Unix sockets.
//
// Every call works whether or not the descriptor is in non-blocking mode: it waits with
// poll(2) and transfers with MSG_DONTWAIT, so a deadline is always honoured.
#ifndef CONDUIT_DAEMON_COMMON_FD_IO_H_
#define CONDUIT_DAEMON_COMMON_FD_IO_H_

#include <sys/socket.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/deadline.h"
#include "common/status.h"

namespace conduit {

// Owns a file descriptor; closes it on destruction.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

// Reads exactly `len` bytes. EOF before that is an error ("peer closed").
Status ReadFull(int fd, void* buf, size_t len, Deadline deadline);

// What a read returns when the other end closed the connection after `got` of the `want`
// bytes asked for (want 0: a frame whose length is not known yet): an end of stream
// (IsEndOfStream: the peer hung up between messages) when none had arrived, an error
// when it cut a message short.
Status ClosedAfter(size_t got, size_t want);
// Writes all of iov[0..n). The iovec array is not modified.
Status WriteFullV(int fd, const iovec* iov, int n, Deadline deadline);
Status WriteFull(int fd, const void* buf, size_t len, Deadline deadline);

// The most descriptors one AttachFds call attaches, and room for their control message.
inline constexpr int kMaxAttachedFds = 4;
struct FdControl {
  alignas(cmsghdr) char bytes[CMSG_SPACE(sizeof(int) * kMaxAttachedFds)];
};
// Attaches fds[0..n) to `msg` as one SCM_RIGHTS control message built in `control` (which
// must outlive the sendmsg); n is clamped to [0, kMaxAttachedFds], and 0 attaches nothing.
void AttachFds(msghdr* msg, FdControl* control, const int* fds, int n);

// Sends `len` bytes with `pass_fd` attached (SCM_RIGHTS); then the rest normally.
Status WriteWithFd(int fd, const iovec* iov, int n, int pass_fd, Deadline deadline);
// Reads exactly `len` bytes; if a descriptor arrives with them it is stored in *received
// (otherwise *received stays invalid).
Status ReadWithFd(int fd, void* buf, size_t len, UniqueFd* received, Deadline deadline);

// Waits until fd is readable/writable (events as for poll). Returns SystemError on timeout.
Status WaitFd(int fd, short events, Deadline deadline, const char* what);

// A descriptor that turns readable whenever `fd` has input, and reports nothing else: an
// epoll set holding `fd` for input only, for event loops that register every descriptor
// for output as well (gRPC's iomgr does, edge-triggered). A socket turns writable each
// time its peer reads, so watched directly it wakes such a loop for every message sent.
Status InputOnlyPollFd(int fd, UniqueFd* out);

// The descriptor at 1-based `position` of `fds`, taken out (a handover's state names its
// descriptors so); invalid when there is none there or it was taken already.
UniqueFd TakeDescriptor(std::vector<UniqueFd>* fds, uint32_t position);
// The same, an InvalidArgument naming the position when none is there or it was taken.
Status TakeDescriptor(std::vector<UniqueFd>* fds, uint32_t position, UniqueFd* out);

// A close-on-exec duplicate of `fd` (what a live upgrade hands over); `what` names it in
// the error ("dup of <what>: <errno text>").
Status DupFd(int fd, const char* what, UniqueFd* out);

}  // namespace conduit

#endif  // CONDUIT_DAEMON_COMMON_FD_IO_H_
