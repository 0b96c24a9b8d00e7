// Decoders of a program's setup requests on an RPC connection (docs/rpc-protocol.md), apart
// from the session so the fuzzer (tests/fuzz) runs the daemon's own code: each checks the
// exact size and reads the fixed text fields, which may lack their NUL.
#ifndef CONDUIT_DAEMON_RPC_PROGRAM_REQUESTS_H_
#define CONDUIT_DAEMON_RPC_PROGRAM_REQUESTS_H_

#include <string>
#include <string_view>

#include "common/rpc_protocol.h"

namespace conduit::rpc {

// False when the payload is not exactly one HelloRequest.
bool DecodeHello(std::string_view payload, rpcproto::HelloRequest* req, std::string* exe);
// False when the payload is not exactly one OpenChannelRequest; *target is its text
// (ParseTarget/ResolveTarget check it).
bool DecodeOpenChannel(std::string_view payload, rpcproto::OpenChannelRequest* req, std::string* target);

}  // namespace conduit::rpc

#endif  // CONDUIT_DAEMON_RPC_PROGRAM_REQUESTS_H_
