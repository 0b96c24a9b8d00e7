#include "daemon_connection.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>

#include "common/busy_poll.h"
#include "common/exe_name.h"
#include "protocol/shim_protocol.h"

namespace conduit {

std::string DaemonConnection::SocketPath() {
  const char* env = getenv(shimproto::kSocketEnv);
  return env != nullptr && *env != '\0' ? env : shimproto::kDefaultSocketPath;
}

Status DaemonConnection::Open(std::unique_ptr<DaemonConnection>* out, bool* refused) {
  if (refused != nullptr) *refused = false;
  const std::string path = SocketPath();
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) return SystemError("socket path too long: %s", path.c_str());
  addr.sun_family = AF_UNIX;
  memcpy(addr.sun_path, path.c_str(), path.size());
  auto conn = std::make_unique<DaemonConnection>();
  conn->fd_.reset(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!conn->fd_.valid()) return SystemError("socket: %s", strerror(errno));
  if (connect(conn->fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return SystemError("conduitd is not reachable at %s (%s)", path.c_str(), strerror(errno));
  }
  shimproto::HelloRequest hello{};
  hello.pid = static_cast<uint32_t>(getpid());
  hello.version = shimproto::kVersion;
  CopyCString(hello.exe, ExeName().c_str());
  Frame reply;
  SetBusyPollFromEnv();  // how long ReadReply spins (common/busy_poll.h)
  conn->timeout_ms_ = 10000;  // until the daemon tells us its own bound
  Status st = conn->Call(shimproto::kHello, &hello, sizeof(hello), shimproto::kHelloReply, &reply);
  shimproto::HelloReply head{};
  if (reply.payload.size() == sizeof(head)) memcpy(&head, reply.payload.data(), sizeof(head));
  if (!st.ok() || reply.payload.size() != sizeof(head) || head.accepted == 0) {
    if (refused != nullptr) *refused = true;
    if (st.ok()) st = SystemError("conduitd at %s sent a malformed Hello reply", path.c_str());
    return Status(st.code(), "conduitd at " + path + " refused this program: " + st.message());
  }
  conn->timeout_ms_ = head.timeout_ms;
  *out = std::move(conn);
  return Status::Ok();
}

Status DaemonConnection::Call(uint16_t type, const void* payload, size_t len, uint16_t reply_type, Frame* reply,
                              int pass_fd) {
  CONDUIT_RETURN_IF_ERROR(SendRequest(type, payload, len, pass_fd));
  return ReadReply(type, reply_type, reply);
}

Status DaemonConnection::SendRequest(uint16_t type, const void* payload, size_t len, int pass_fd) {
  Status st = WriteFrame(fd_.get(), shimproto::kMagic, shimproto::kVersion, type, 0, payload,
                         static_cast<uint32_t>(len), Deadline::AfterMs(30000), pass_fd);
  if (!st.ok()) {
    return SystemError("lost contact with conduitd at %s (did the daemon die?): %s", SocketPath().c_str(),
                       st.message().c_str());
  }
  return Status::Ok();
}

Status DaemonConnection::ReadReply(uint16_t type, uint16_t reply_type, Frame* reply) {
  // The daemon answers every request within its own timeout per wait; the margin covers
  // several waits in one group. A daemon that stops answering still cannot hang us.
  return ReadReply(type, reply_type, reply, ReplyDeadline());
}

Status DaemonConnection::ReadReply(uint16_t type, uint16_t reply_type, Frame* reply, Deadline deadline,
                                   int spin_micros) {
  // Most replies to small calls come within tens of microseconds: spin for them before
  // blocking, so the reply needs no wake-up of this thread (common/busy_poll.h).
  SpinUntilReady(fd_.get(), POLLIN, spin_micros);
  // A reply may carry a descriptor (AttachResult's area); any other is closed with `reply`.
  Status st = ReadFrame(fd_.get(), shimproto::kMagic, shimproto::kVersion, shimproto::kMaxPayload, reply, deadline,
                        /*accept_fd=*/true);
  if (!st.ok()) {
    return SystemError("lost contact with conduitd at %s (did the daemon die?): %s", SocketPath().c_str(),
                       st.message().c_str());
  }
  if (reply->payload.size() < sizeof(WireStatus)) {
    return SystemError("conduitd sent a reply too short to hold a status (%zu bytes)", reply->payload.size());
  }
  WireStatus wire;
  memcpy(&wire, reply->payload.data(), sizeof(wire));
  st = FromWire(wire);
  if (!st.ok()) return st;
  if (reply->header.type != reply_type) {
    return SystemError("conduitd answered request type %u with type %u", type, reply->header.type);
  }
  return Status::Ok();
}

}  // namespace conduit
