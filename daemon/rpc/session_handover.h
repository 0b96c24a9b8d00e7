// The state of a gRPC program's session that a live upgrade hands to the new process
// (docs/upgrade.md, "RPC programs"; wire format: RpcSession in
// protocol/upgrade_state.proto): its shared memory, channels, served ports, its calls in
// flight (each as this end knows it, rpc/call_handover.h), the requests it held during the
// park and the bytes it had read ahead of them.
//
// The decoder is where the new daemon meets the old one's bytes: it checks every count
// against the session limits, every descriptor position (each named once), every type and
// port, before anything is built from them (tests/fuzz/rpc_handover_fuzzer.cc).
#ifndef CONDUIT_DAEMON_RPC_SESSION_HANDOVER_H_
#define CONDUIT_DAEMON_RPC_SESSION_HANDOVER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/fd_io.h"
#include "common/status.h"
#include "rpc/program_memory.h"
#include "protocol/upgrade_state.pb.h"
#include "security/tls_session.h"

namespace conduit::rpc {

// A request as a session read it from its program: served, or held during a park.
struct ProgramFrame {
  uint16_t type = 0;
  uint32_t tag = 0;
  std::string payload;
  UniqueFd fd;  // AttachSegment's
};

struct HandedSession {
  struct Channel {
    uint64_t id = 0;
    std::string target;  // as the program wrote it
    std::optional<TlsClientConfig> tls;
  };
  struct Port {
    uint32_t port = 0;
    uint64_t server = 0;  // the program's server id
    std::string host;     // the bind address as the program wrote it
    std::optional<TlsServerConfig> tls;
  };
  ProgramMemory::Handed memory;
  std::vector<Channel> channels;
  std::vector<Port> ports;
  uint64_t next_incoming = 0;
  std::vector<ProgramFrame> held;
  std::string read_ahead;
  std::vector<UniqueFd> read_ahead_fds;
  std::vector<upgrade::v1::RpcCallState> calls;  // its calls in flight (rpc/call_handover.h)
};

// What one session may hold (RpcOptions' caps).
struct SessionLimits {
  size_t channels = 0;
  size_t ports = 0;
  size_t held = 0;
  size_t read_ahead = 0;  // a session's read buffer
  size_t calls = 0;       // calls in flight: those its program started and those to its servers
};

// Moves the descriptors into *fds; the state names them by 1-based position there.
Status EncodeHandedSession(HandedSession in, std::string* state, std::vector<UniqueFd>* fds);
// Takes the descriptors the state names (each once, common/fd_io TakeDescriptor) from `fds`.
Status DecodeHandedSession(const std::string& state, std::vector<UniqueFd> fds, const SessionLimits& limits,
                           HandedSession* out);

}  // namespace conduit::rpc

#endif  // CONDUIT_DAEMON_RPC_SESSION_HANDOVER_H_
