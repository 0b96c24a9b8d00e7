#include "common/frame.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <chrono>
#include <thread>

#include "common/busy_poll.h"

namespace conduit {

WireStatus ToWire(const Status& status) {
  WireStatus wire{};
  wire.result = status.code();
  CopyCString(wire.message, status.message().c_str());
  return wire;
}

Status FromWire(const WireStatus& wire) {
  if (wire.result < 0 || wire.result >= ncclNumResults) {
    return InternalError("peer sent unknown result code %d", wire.result);
  }
  return Status(static_cast<ncclResult_t>(wire.result), FromCString(wire.message));
}

namespace {

Status CheckHeader(const FrameHeader& h, uint32_t magic, uint16_t version) {
  if (h.magic != magic) {
    return InvalidUsage("bad frame magic 0x%08x (expected 0x%08x): peer speaks another protocol", h.magic, magic);
  }
  if (h.version != version) {
    return InvalidUsage("unsupported protocol version %u (this side speaks %u)", h.version, version);
  }
  return Status::Ok();
}

}  // namespace

Status PeekFrameHeader(int fd, uint32_t magic, uint16_t version, FrameHeader* header, Deadline deadline) {
  for (;;) {
    ssize_t r = recv(fd, header, sizeof(*header), MSG_PEEK | MSG_DONTWAIT);
    if (r == static_cast<ssize_t>(sizeof(*header))) return CheckHeader(*header, magic, version);
    if (r == 0) return ClosedAfter(0, sizeof(*header));
    if (r > 0) {
      // Part of a header: poll would report readable at once, so wait for the rest here.
      if (deadline.expired()) return SystemError("timed out waiting for a whole frame header");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return SystemError("receive failed: %s", strerror(errno));
    CONDUIT_RETURN_IF_ERROR(WaitFd(fd, POLLIN, deadline, "receive the first frame"));
  }
}

Status ReadFrame(int fd, uint32_t magic, uint16_t version, uint32_t max_payload, Frame* frame,
                 Deadline deadline, bool accept_fd) {
  frame->fd.reset();
  CONDUIT_RETURN_IF_ERROR(
      ReadWithFd(fd, &frame->header, sizeof(FrameHeader), accept_fd ? &frame->fd : nullptr, deadline));
  const FrameHeader& h = frame->header;
  CONDUIT_RETURN_IF_ERROR(CheckHeader(h, magic, version));
  if (h.length > max_payload) {
    return InvalidUsage("frame of type %u announces %u payload bytes, limit is %u", h.type, h.length, max_payload);
  }
  frame->payload.resize(h.length);
  if (h.length > 0) CONDUIT_RETURN_IF_ERROR(ReadFull(fd, frame->payload.data(), h.length, deadline));
  return Status::Ok();
}

Status ReadFrameAfterIdle(int fd, uint32_t magic, uint16_t version, uint32_t max_payload, Frame* frame,
                          int frame_timeout_ms, bool accept_fd) {
  // A program in a loop sends its next request soon after our reply: catch it without the
  // cost of a wake-up when we can (common/busy_poll.h).
  if (!SpinUntilReady(fd, POLLIN)) CONDUIT_RETURN_IF_ERROR(WaitFd(fd, POLLIN, Deadline::Never(), "receive"));
  return ReadFrame(fd, magic, version, max_payload, frame, Deadline::AfterMs(frame_timeout_ms), accept_fd);
}

Status ReadFrame(Conn& conn, uint32_t magic, uint16_t version, uint32_t max_payload, Frame* frame, Deadline deadline) {
  if (!conn.sealed()) return ReadFrame(conn.fd(), magic, version, max_payload, frame, deadline);
  frame->fd.reset();
  CONDUIT_RETURN_IF_ERROR(conn.ReadFull(&frame->header, sizeof(FrameHeader), deadline));
  const FrameHeader& h = frame->header;
  CONDUIT_RETURN_IF_ERROR(CheckHeader(h, magic, version));
  if (h.length > max_payload) {
    return InvalidUsage("frame of type %u announces %u payload bytes, limit is %u", h.type, h.length, max_payload);
  }
  frame->payload.resize(h.length);
  if (h.length > 0) CONDUIT_RETURN_IF_ERROR(conn.ReadFull(frame->payload.data(), h.length, deadline));
  return Status::Ok();
}

Status PeekFrameHeader(Conn& conn, uint32_t magic, uint16_t version, FrameHeader* header, Deadline deadline) {
  CONDUIT_RETURN_IF_ERROR(conn.Peek(header, sizeof(*header), deadline));
  return CheckHeader(*header, magic, version);
}

Status WriteFrame(Conn& conn, uint32_t magic, uint16_t version, uint16_t type, uint32_t tag, const void* payload,
                  uint32_t length, Deadline deadline) {
  FrameHeader h{magic, version, type, length, tag};
  iovec iov[2] = {{&h, sizeof(h)}, {const_cast<void*>(payload), length}};
  return conn.WriteV(iov, length > 0 ? 2 : 1, deadline);
}

Status WriteFrame(int fd, uint32_t magic, uint16_t version, uint16_t type, uint32_t tag,
                  const void* payload, uint32_t length, Deadline deadline, int pass_fd) {
  FrameHeader h{magic, version, type, length, tag};
  iovec iov[2] = {{&h, sizeof(h)}, {const_cast<void*>(payload), length}};
  return WriteWithFd(fd, iov, length > 0 ? 2 : 1, pass_fd, deadline);
}

}  // namespace conduit
