// A deliberately low-level client of conduitd's Unix socket: it writes arbitrary bytes and
// frames (any magic, version, announced length) so tests can send what a correct shim never
// would, and reads replies with a bound so a daemon that stalls shows up as a timeout.
#ifndef CONDUIT_TESTS_INTEGRATION_RAW_SHIM_CLIENT_H_
#define CONDUIT_TESTS_INTEGRATION_RAW_SHIM_CLIENT_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "nccl.h"
#include "protocol/shim_protocol.h"

namespace conduit::it {

// What the suites that use this client give their daemons and wait for: a short daemon
// timeout, so a refusal that waits on it comes quickly; replies bounded well past it; a
// 1 MiB session segment.
constexpr int kDaemonTimeoutMs = 3000;
constexpr auto kReplyBound = std::chrono::milliseconds(kDaemonTimeoutMs + 5000);
constexpr size_t kShmSize = 1 << 20;

// A Group request carrying one op, laid out as the shim sends it.
struct OneOpGroup {
  shimproto::GroupRequest g;
  shimproto::OpDesc op;
};
// A float sum AllReduce of `count` elements at `offset` of the session's segment.
inline shimproto::OpDesc AllReduceFloat(uint64_t count, uint64_t offset) {
  shimproto::OpDesc op{};
  op.kind = shimproto::kAllReduce;
  op.dtype = ncclFloat32;
  op.redop = ncclSum;
  op.count = count;
  op.offset = offset;
  return op;
}

class RawShimClient {
 public:
  RawShimClient() = default;
  ~RawShimClient();
  RawShimClient(const RawShimClient&) = delete;
  RawShimClient& operator=(const RawShimClient&) = delete;

  bool Connect(const std::string& path);
  bool SendBytes(const void* data, size_t len);
  // Sends a header announcing `announced_len` (the real length when negative) and `len`
  // payload bytes, with `pass_fd` attached to the first byte when >= 0.
  bool SendFrame(uint16_t type, const void* payload, uint32_t len, int64_t announced_len = -1,
                 uint32_t magic = shimproto::kMagic, uint16_t version = shimproto::kVersion, int pass_fd = -1);
  void ShutdownWrite();

  enum class Reply { kFrame, kClosed, kTimeout, kBadFrame };
  // Reads one whole reply frame; kClosed on EOF or reset.
  Reply Read(std::chrono::milliseconds timeout, FrameHeader* header, std::vector<uint8_t>* payload);
  // Reads a reply and returns its WireStatus result, or -1 (closed), -2 (timeout), -3 (bad frame).
  int ReadStatus(std::chrono::milliseconds timeout, std::vector<uint8_t>* payload = nullptr);

  // Hello, GetUniqueId, a 1-rank CommInit and a shared segment of shm_size bytes: the state
  // in which the daemon accepts Group requests. Returns "" or what went wrong. With
  // `join_id`, the CommInit names that communicator id instead of a new one.
  std::string OpenSession(size_t shm_size, std::chrono::milliseconds timeout, const char* join_id = nullptr);
  // The communicator id of the last OpenSession.
  const char* comm_id() const { return comm_id_; }
  // The message of the last status ReadStatus parsed.
  const std::string& last_message() const { return last_message_; }

 private:
  bool ReadExact(void* dst, size_t len, std::chrono::steady_clock::time_point deadline, Reply* why);
  int fd_ = -1;
  int memfd_ = -1;
  uint32_t tag_ = 1;
  std::string last_message_;
  char comm_id_[128] = {};
};

}  // namespace conduit::it

#endif  // CONDUIT_TESTS_INTEGRATION_RAW_SHIM_CLIENT_H_
