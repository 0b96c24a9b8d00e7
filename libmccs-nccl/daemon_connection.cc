#include "daemon_connection.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "common/busy_poll.h"
#include "common/exe_name.h"
#include "protocol/call_page.h"
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
  conn->reply_page_ = conn->AttachPage(shimproto::kAttachReplyPage, shimproto::kAttachReplyPageReply, "conduit-reply-page");
  // Requests through a page only where their replies come through one.
  if (conn->reply_page_ != nullptr) {
    conn->request_page_ =
        conn->AttachPage(shimproto::kAttachRequestPage, shimproto::kAttachRequestPageReply, "conduit-request-page");
  }
  *out = std::move(conn);
  return Status::Ok();
}

std::unique_ptr<ShmSegment> DaemonConnection::AttachPage(uint16_t type, uint16_t reply_type, const char* name) {
  auto page = std::make_unique<ShmSegment>();
  UniqueFd fd;
  Frame reply;
  if (!page->Create(name, kCallPageBytes, &fd).ok()) return nullptr;  // messages go on the socket
  if (!Call(type, nullptr, 0, reply_type, &reply, fd.get()).ok()) return nullptr;
  return page;
}

Status DaemonConnection::Call(uint16_t type, const void* payload, size_t len, uint16_t reply_type, Frame* reply,
                              int pass_fd) {
  CONDUIT_RETURN_IF_ERROR(SendRequest(type, payload, len, pass_fd));
  return ReadReply(type, reply_type, reply);
}

Status DaemonConnection::SendRequest(uint16_t type, const void* payload, size_t len, int pass_fd,
                                     bool reply_in_page) {
  reply_in_page_next_ = reply_in_page && reply_page_ != nullptr;
  Status st;
  if (reply_in_page_next_ && request_page_ != nullptr && type == shimproto::kGroup && pass_fd < 0 &&
      len <= kCallPagePayloadBytes) {
    // The daemon's session spins on the page between requests; a daemon asleep on the
    // socket asked for a kRequestInPage frame (protocol/call_page.h).
    if (!PutInPage(CallPageOf(request_page_->data()), ++requests_put_, type, payload, len)) return Status::Ok();
    st = WriteFrame(fd_.get(), shimproto::kMagic, shimproto::kVersion, shimproto::kRequestInPage, 0, nullptr, 0,
                    Deadline::AfterMs(30000));
  } else {
    st = WriteFrame(fd_.get(), shimproto::kMagic, shimproto::kVersion, type, 0, payload, static_cast<uint32_t>(len),
                    Deadline::AfterMs(30000), pass_fd);
  }
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
  if (reply_in_page_next_) {
    reply_in_page_next_ = false;
    CONDUIT_RETURN_IF_ERROR(ReadReplyInPage(reply, deadline, spin_micros));
    return CheckReply(type, reply_type, *reply);
  }
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
  return CheckReply(type, reply_type, *reply);
}

Status DaemonConnection::ReadReplyInPage(Frame* reply, Deadline deadline, int spin_micros) {
  CallPage* page = CallPageOf(reply_page_->data());
  const uint32_t count = replies_taken_ + 1;
  auto take = [&] {
    const uint32_t len = std::min<uint32_t>(page->len.load(std::memory_order_relaxed), kCallPagePayloadBytes);
    const uint32_t type = page->type.load(std::memory_order_relaxed);
    reply->header = FrameHeader{shimproto::kMagic, shimproto::kVersion, static_cast<uint16_t>(type), len, 0};
    reply->payload.assign(page->payload, page->payload + len);
    reply->fd.reset();
    replies_taken_ = count;
    return Status::Ok();
  };
  auto read_socket = [&](Frame* frame) {
    Status st = ReadFrame(fd_.get(), shimproto::kMagic, shimproto::kVersion, shimproto::kMaxPayload, frame, deadline,
                          /*accept_fd=*/true);
    if (!st.ok()) {
      return SystemError("lost contact with conduitd at %s (did the daemon die?): %s", SocketPath().c_str(),
                         st.message().c_str());
    }
    return Status::Ok();
  };
  // Spin for the reply (common/busy_poll.h), looking at the socket too now and then: a
  // daemon without this connection's page (one that predates pages) answers there.
  const int budget = spin_micros >= 0 ? spin_micros : BusyPollMicros();
  int tries = 0;
  bool on_socket = false;
  SpinUntilTrue(std::chrono::steady_clock::now() + std::chrono::microseconds(budget), [&] {
    if (InPage(page, count)) return true;
    if (++tries % 8 != 0) return false;
    pollfd p{fd_.get(), POLLIN, 0};
    on_socket = poll(&p, 1, 0) > 0;
    return on_socket;
  });
  if (!on_socket && InPage(page, count)) return take();
  bool daemon_took = false;
  for (;;) {
    // About to sleep on the socket: ask for a kReplyInPage frame (protocol/call_page.h).
    AnnounceSleep(page);
    switch (LookBeforeSleep(page, count)) {
      case LastLook::kTake:
        return take();
      case LastLook::kTakeAfterWakeFrame: {
        // The frame owed may be a late one for the previous reply (below); either way it
        // is the one frame that taking `waiting` owes.
        Frame wake;
        CONDUIT_RETURN_IF_ERROR(read_socket(&wake));
        if (wake.header.type != shimproto::kReplyInPage) {
          return SystemError("conduitd sent frame type %u where it owed a kReplyInPage", wake.header.type);
        }
        return take();
      }
      case LastLook::kSleep:
        break;
    }
    CONDUIT_RETURN_IF_ERROR(read_socket(reply));
    daemon_took = WriterTookWaiting(page);
    if (reply->header.type != shimproto::kReplyInPage) break;
    if (!daemon_took) {
      return SystemError("conduitd sent a kReplyInPage that nothing asked for (reply %u awaited, the page holds %u)",
                         count, page->seq.load());
    }
    if (InPage(page, count)) return take();
    // A late wake-up for the previous reply: conduitd stored that reply, we took it while
    // spinning and asked for this one, and only then did conduitd take `waiting` (its
    // thread was descheduled between the two). This reply is still to come: wait again.
  }
  // The reply itself came on the socket.
  if (daemon_took) return SystemError("conduitd answered both in the reply page and on the socket");
  return Status::Ok();
}

Status DaemonConnection::CheckReply(uint16_t type, uint16_t reply_type, const Frame& reply) {
  if (reply.payload.size() < sizeof(WireStatus)) {
    return SystemError("conduitd sent a reply too short to hold a status (%zu bytes)", reply.payload.size());
  }
  WireStatus wire;
  memcpy(&wire, reply.payload.data(), sizeof(wire));
  Status st = FromWire(wire);
  if (!st.ok()) return st;
  if (reply.header.type != reply_type) {
    return SystemError("conduitd answered request type %u with type %u", type, reply.header.type);
  }
  return Status::Ok();
}

}  // namespace conduit
