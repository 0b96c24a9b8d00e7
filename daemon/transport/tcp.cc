#include "transport/tcp.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <thread>

#include "common/busy_poll.h"
#include "transport/congestion.h"

namespace conduit {

size_t TotalBytes(const std::vector<ConstSpan>& spans) {
  size_t n = 0;
  for (const auto& s : spans) n += s.len;
  return n;
}
size_t TotalBytes(const std::vector<MutSpan>& spans) {
  size_t n = 0;
  for (const auto& s : spans) n += s.len;
  return n;
}

Status TcpListen(const std::string& addr, UniqueFd* listener, SockAddr* bound) {
  SockAddr sa;
  CONDUIT_RETURN_IF_ERROR(ParseListenAddr(addr, &sa));
  UniqueFd fd(socket(sa.storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return SystemError("socket: %s", strerror(errno));
  int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd.get(), sa.get(), sa.len) != 0) {
    return SystemError("cannot listen on %s: bind: %s", addr.c_str(), strerror(errno));
  }
  if (listen(fd.get(), 1024) != 0) return SystemError("listen on %s: %s", addr.c_str(), strerror(errno));
  bound->len = sizeof(bound->storage);
  getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound->storage), &bound->len);
  *listener = std::move(fd);
  return Status::Ok();
}

void TuneTcpSocket(int fd, int user_timeout_ms) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  int idle = 5, interval = 2, count = 3;
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
  if (user_timeout_ms > 0) {
    unsigned int t = static_cast<unsigned int>(user_timeout_ms);
    setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &t, sizeof(t));
  }
}

Status TcpConnect(const std::string& addr, Deadline deadline, UniqueFd* out, const std::string& source_ip) {
  SockAddr sa;
  CONDUIT_RETURN_IF_ERROR(ParseHostPort(addr, 0, &sa));
  SockAddr local;
  if (!source_ip.empty()) {
    const bool v6 = source_ip.find(':') != std::string::npos;
    CONDUIT_RETURN_IF_ERROR(ParseHostPort(v6 ? "[" + source_ip + "]:1" : source_ip + ":1", 0, &local));
    reinterpret_cast<sockaddr_in*>(&local.storage)->sin_port = 0;  // same offset in sockaddr_in6
  }
  int backoff_ms = 10;
  for (;;) {
    UniqueFd fd(socket(sa.storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd.valid()) return SystemError("socket: %s", strerror(errno));
    ApplyPeerCongestion(fd.get());  // before the first byte: see congestion.h
    if (!source_ip.empty() && bind(fd.get(), local.get(), local.len) != 0) {
      return SystemError("cannot bind a connection to %s to local address %s: %s", addr.c_str(), source_ip.c_str(),
                         strerror(errno));
    }
    int r = connect(fd.get(), sa.get(), sa.len);
    int err = r == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      pollfd p{fd.get(), POLLOUT, 0};
      int pr = poll(&p, 1, deadline.PollTimeoutMs());
      if (pr == 0) return SystemError("timed out connecting to daemon %s", addr.c_str());
      socklen_t len = sizeof(err);
      getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    }
    if (err == 0) {
      *out = std::move(fd);
      return Status::Ok();
    }
    bool retry = err == ECONNREFUSED || err == ENETUNREACH || err == EHOSTUNREACH || err == ETIMEDOUT;
    if (!retry || deadline.expired()) {
      return SystemError("cannot connect to daemon %s: %s", addr.c_str(), strerror(err));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(backoff_ms));
    backoff_ms = std::min(backoff_ms * 2, 200);
  }
}

TcpLink::TcpLink(UniqueFd fd, std::string peer_name) : fd_(std::move(fd)), peer_name_(std::move(peer_name)) {
  int flags = fcntl(fd_.get(), F_GETFL);
  fcntl(fd_.get(), F_SETFL, flags | O_NONBLOCK);
}

TcpLink::~TcpLink() = default;

void TcpLink::Shutdown() { shutdown(fd_.get(), SHUT_RDWR); }

namespace {

// Cursor over a list of spans, advanced as bytes move.
template <typename Span>
struct Cursor {
  const std::vector<Span>* spans;
  size_t index = 0;
  size_t offset = 0;
  size_t moved = 0;

  bool done() const {
    size_t i = index;
    size_t off = offset;
    while (i < spans->size() && off == (*spans)[i].len) {
      ++i;
      off = 0;
    }
    return i >= spans->size();
  }
  // Fills up to `max` iovecs starting at the cursor, at most `cap` bytes in all.
  int Fill(iovec* iov, int max, size_t cap) const {
    int n = 0;
    size_t i = index, off = offset, total = 0;
    while (i < spans->size() && n < max && total < cap) {
      size_t len = (*spans)[i].len - off;
      if (len > 0) {
        len = std::min(len, cap - total);
        iov[n].iov_base = const_cast<char*>(static_cast<const char*>((*spans)[i].data)) + off;
        iov[n].iov_len = len;
        total += len;
        ++n;
      }
      ++i;
      off = 0;
    }
    return n;
  }
  void Advance(size_t bytes) {
    moved += bytes;
    while (bytes > 0) {
      size_t len = (*spans)[index].len - offset;
      size_t take = std::min(len, bytes);
      offset += take;
      bytes -= take;
      if (offset == (*spans)[index].len) {
        ++index;
        offset = 0;
      }
    }
  }
};

constexpr size_t kMaxBytesPerCall = 4u << 20;  // bounds the gap between progress callbacks
// Transfers up to this size spin before they block (see SendRecv).
constexpr size_t kSpinMaxBytes = 256u << 10;

// One non-blocking transfer step of at most `cap` bytes; *sent says how many went out.
// Returns false with *status set on error or EOF.
bool SendSome(int fd, Cursor<ConstSpan>& c, const std::string& peer, const SendGate& gate, size_t cap, size_t* sent,
              Status* status) {
  *sent = 0;
  iovec iov[16];
  int n = c.Fill(iov, 16, cap);
  if (gate) {
    for (int i = 0; i < n; ++i) {
      *status = gate(iov[i].iov_base, iov[i].iov_len);
      if (!status->ok()) return false;
    }
  }
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = n;
  ssize_t r = sendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
  if (r >= 0) {
    c.Advance(static_cast<size_t>(r));
    *sent = static_cast<size_t>(r);
    return true;
  }
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return true;
  *status = RemoteError("lost connection to daemon %s while sending: %s", peer.c_str(), strerror(errno));
  return false;
}

bool RecvSome(int fd, Cursor<MutSpan>& c, const std::string& peer, size_t cap, Status* status) {
  iovec iov[16];
  int n = c.Fill(iov, 16, std::min(cap, kMaxBytesPerCall));
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = n;
  ssize_t r = recvmsg(fd, &msg, MSG_DONTWAIT);
  if (r > 0) {
    c.Advance(static_cast<size_t>(r));
    return true;
  }
  if (r == 0) {
    *status = RemoteError("daemon %s closed the connection (it died or aborted the communicator)", peer.c_str());
    return false;
  }
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return true;
  *status = RemoteError("lost connection to daemon %s while receiving: %s", peer.c_str(), strerror(errno));
  return false;
}

}  // namespace

Status TcpLink::Send(const std::vector<ConstSpan>& out, Deadline deadline, const SendGate& gate) {
  static const std::vector<MutSpan> kNone;
  return SendRecv(out, *this, kNone, deadline, nullptr, gate);
}

Status TcpLink::Recv(const std::vector<MutSpan>& in, Deadline deadline, const RecvProgress& progress) {
  static const std::vector<ConstSpan> kNone;
  return SendRecv(kNone, *this, in, deadline, progress);
}

Status TcpLink::SendRecv(const std::vector<ConstSpan>& out, Link& from_link, const std::vector<MutSpan>& in,
                         Deadline deadline, const RecvProgress& progress, const SendGate& gate,
                         const FlowLimits& limits) {
  auto& from = static_cast<TcpLink&>(from_link);
  Cursor<ConstSpan> send{&out};
  Cursor<MutSpan> recv{&in};
  Status status;
  const bool spin = TotalBytes(out) + TotalBytes(in) <= kSpinMaxBytes;
  // When the pacer refuses, sending pauses until then while receiving goes on.
  std::chrono::steady_clock::time_point paused_until{};
  for (;;) {
    bool send_left = !send.done();
    bool recv_left = !recv.done();
    if (!send_left && !recv_left) return Status::Ok();
    // Bytes each direction may move now under the caller's flow limits.
    size_t send_room = SIZE_MAX, recv_room = SIZE_MAX;
    if (send_left && limits.send_limit) {
      const size_t limit = limits.send_limit();
      send_room = limit > send.moved ? limit - send.moved : 0;
    }
    if (recv_left && limits.recv_limit) {
      const size_t limit = limits.recv_limit();
      recv_room = limit > recv.moved ? limit - recv.moved : 0;
    }
    if ((!send_left || send_room == 0) && (!recv_left || recv_room == 0)) {
      return InternalError("flow limits stalled a transfer with %s: sent %zu/%zu bytes, received %zu/%zu from %s",
                           peer_name_.c_str(), send.moved, TotalBytes(out), recv.moved, TotalBytes(in),
                           from.peer_name().c_str());
    }
    send_left = send_left && send_room > 0;
    recv_left = recv_left && recv_room > 0;
    int timeout_ms = deadline.PollTimeoutMs();
    if (send_left && pacer_ != nullptr) {
      auto now = std::chrono::steady_clock::now();
      if (now < paused_until) {
        send_left = false;
        int pause_ms = static_cast<int>(
            std::chrono::duration_cast<std::chrono::milliseconds>(paused_until - now).count()) + 1;
        if (timeout_ms < 0 || pause_ms < timeout_ms) timeout_ms = pause_ms;
      }
    }
    pollfd fds[2];
    int nfds = 0;
    int send_slot = -1, recv_slot = -1;
    if (send_left) {
      fds[nfds] = {fd_.get(), POLLOUT, 0};
      send_slot = nfds++;
    }
    if (recv_left) {
      if (send_slot >= 0 && from.fd() == fd_.get()) {
        fds[send_slot].events |= POLLIN;
        recv_slot = send_slot;
      } else {
        fds[nfds] = {from.fd(), POLLIN, 0};
        recv_slot = nfds++;
      }
    }
    // A small transfer's bytes often come within microseconds: spin for them before
    // blocking (common/busy_poll.h). A large one waits on the link's speed, where a wake-up
    // is a small part of the time and spinning would only take CPU from the copies.
    int r = spin ? SpinPollFor(fds, static_cast<nfds_t>(nfds), spin_micros_ >= 0 ? spin_micros_ : BusyPollMicros()) : 0;
    if (r == 0) r = poll(fds, static_cast<nfds_t>(nfds), timeout_ms);
    if (r == 0 && !deadline.expired()) continue;  // a pacer pause ended
    if (r == 0) {
      return RemoteError("timed out: sent %zu/%zu bytes to %s, received %zu/%zu bytes from %s", send.moved,
                         TotalBytes(out), peer_name_.c_str(), recv.moved, TotalBytes(in), from.peer_name().c_str());
    }
    if (r < 0) {
      if (errno == EINTR) continue;
      return SystemError("poll: %s", strerror(errno));
    }
    if (recv_slot >= 0 && fds[recv_slot].revents != 0 && (fds[recv_slot].revents & (POLLIN | POLLHUP | POLLERR))) {
      size_t before = recv.moved;
      if (!RecvSome(from.fd(), recv, from.peer_name(), recv_room, &status)) return status;
      if (progress && recv.moved != before) CONDUIT_RETURN_IF_ERROR(progress(recv.moved));
    }
    if (send_slot >= 0 && (fds[send_slot].revents & (POLLOUT | POLLERR | POLLHUP))) {
      size_t cap = std::min(kMaxBytesPerCall, send_room), sent = 0;
      if (pacer_ != nullptr) {
        std::chrono::microseconds wait{0};
        cap = pacer_->Grant(cap, &wait);
        if (cap == 0) {
          paused_until = std::chrono::steady_clock::now() + std::max(wait, std::chrono::microseconds(100));
          continue;
        }
      }
      bool ok = SendSome(fd_.get(), send, peer_name_, gate, cap, &sent, &status);
      if (pacer_ != nullptr) pacer_->Sent(cap, sent);
      if (!ok) return status;
      if (sent > 0 && limits.sent) CONDUIT_RETURN_IF_ERROR(limits.sent(send.moved));
    }
  }
}

}  // namespace conduit
