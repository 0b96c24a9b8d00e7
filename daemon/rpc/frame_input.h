// Reading untrusted frame payloads so that memory follows the bytes that arrive, not the
// length a header announced: a frame announcing 64 MiB and sending 10 bytes costs about
// 64 KiB, and a sender that stops is dropped at the frame's deadline.
#ifndef CONDUIT_DAEMON_RPC_FRAME_INPUT_H_
#define CONDUIT_DAEMON_RPC_FRAME_INPUT_H_

#include <string>

#include "common/frame_stream.h"

namespace conduit::rpc {

// Bytes the first read of a payload may reserve before any of them arrived; after that
// the buffer at most doubles what already arrived.
inline constexpr size_t kFirstReadStep = 64 << 10;

// Reads the next `n` bytes of the current frame into *out (replacing its contents),
// growing it as they arrive; all of them must arrive before `deadline`.
Status ReadArriving(FrameReader& reader, size_t n, std::string* out, Deadline deadline);

// Reads and drops the next `n` bytes of the current frame, before `deadline`.
Status SkipArriving(FrameReader& reader, size_t n, Deadline deadline);

}  // namespace conduit::rpc

#endif  // CONDUIT_DAEMON_RPC_FRAME_INPUT_H_
