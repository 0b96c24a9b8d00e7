// The daemon's answer to an RPC program's Hello (docs/rpc-protocol.md, HelloReply), as
// libmrpc-grpc reads it: apart from the shim so the fuzzer (tests/fuzz, rpc_program) runs
// this very code on whatever a socket may deliver.
#ifndef CONDUIT_DAEMON_COMMON_RPC_HELLO_REPLY_H_
#define CONDUIT_DAEMON_COMMON_RPC_HELLO_REPLY_H_

#include <cstdint>
#include <string_view>

#include "common/status.h"

namespace conduit {

// What an accepting HelloReply tells the program.
struct HelloAnswer {
  uint32_t timeout_ms = 0;
  uint32_t inline_max = 0;
  bool native_listeners = false;  // rpcproto::kHelloNativeListeners
  bool tls = false;               // rpcproto::kHelloTls
};

// Reads a frame of `type` carrying `payload`. Ok with *out when it is exactly one
// HelloReply accepting the program; the daemon's reason when it refused (never Ok, even
// if the daemon gave none); an error naming the type and size (and the status a daemon put
// first, if any) for anything else. Unknown flag bits are ignored.
Status DecodeHelloReply(uint16_t type, std::string_view payload, HelloAnswer* out);

}  // namespace conduit

#endif  // CONDUIT_DAEMON_COMMON_RPC_HELLO_REPLY_H_
