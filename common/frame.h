// Reading and writing frames (protocol/frame_format.h) on program connections and on
// connections to other daemons, with deadlines, size caps and descriptor passing.
#ifndef CONDUIT_DAEMON_COMMON_FRAME_H_
#define CONDUIT_DAEMON_COMMON_FRAME_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/conn.h"
#include "common/deadline.h"
#include "common/fd_io.h"
#include "common/status.h"
#include "protocol/frame_format.h"

namespace conduit {

struct Frame {
  FrameHeader header{};
  std::vector<uint8_t> payload;
  UniqueFd fd;  // a descriptor that arrived with the frame (Unix sockets only)
};

WireStatus ToWire(const Status& status);
Status FromWire(const WireStatus& wire);

// Reads one frame. Rejects a wrong magic/version and payloads over max_payload without
// reading them (the connection is then unusable and should be closed).
Status ReadFrame(int fd, uint32_t magic, uint16_t version, uint32_t max_payload, Frame* frame,
                 Deadline deadline, bool accept_fd = false);

// For connections that may idle between frames (a program between requests): waits for
// the first byte of the next frame without a deadline, then reads the whole frame within
// `frame_timeout_ms`, so a peer that starts a frame and goes silent is dropped.
Status ReadFrameAfterIdle(int fd, uint32_t magic, uint16_t version, uint32_t max_payload, Frame* frame,
                          int frame_timeout_ms, bool accept_fd = false);

// Waits for a whole frame header and checks it without consuming anything, so the
// connection can be handed, unread, to whoever owns the message type.
Status PeekFrameHeader(int fd, uint32_t magic, uint16_t version, FrameHeader* header, Deadline deadline);

// Writes one frame; attaches pass_fd (SCM_RIGHTS) when >= 0.
Status WriteFrame(int fd, uint32_t magic, uint16_t version, uint16_t type, uint32_t tag,
                  const void* payload, uint32_t length, Deadline deadline, int pass_fd = -1);

// The same on a connection to another daemon, which may be sealed (common/conn.h).
Status ReadFrame(Conn& conn, uint32_t magic, uint16_t version, uint32_t max_payload, Frame* frame, Deadline deadline);
Status PeekFrameHeader(Conn& conn, uint32_t magic, uint16_t version, FrameHeader* header, Deadline deadline);
Status WriteFrame(Conn& conn, uint32_t magic, uint16_t version, uint16_t type, uint32_t tag, const void* payload,
                  uint32_t length, Deadline deadline);

}  // namespace conduit

#endif  // CONDUIT_DAEMON_COMMON_FRAME_H_
