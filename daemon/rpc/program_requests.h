// Decoders of a program's setup requests on an RPC connection (docs/rpc-protocol.md), apart
// from the session so the fuzzer (tests/fuzz) runs the daemon's own code: each checks the
// exact size and reads the fixed text fields, which may lack their NUL.
#ifndef CONDUIT_DAEMON_RPC_PROGRAM_REQUESTS_H_
#define CONDUIT_DAEMON_RPC_PROGRAM_REQUESTS_H_

#include <string>
#include <string_view>

#include "common/status.h"
#include "protocol/rpc_protocol.h"

namespace conduit::rpc {

// False when the payload is not exactly one HelloRequest.
bool DecodeHello(std::string_view payload, rpcproto::HelloRequest* req, std::string* exe);
// False when the payload is not exactly one OpenChannelRequest; *target is its text
// (ParseTarget/ResolveTarget check it).
bool DecodeOpenChannel(std::string_view payload, rpcproto::OpenChannelRequest* req, std::string* target);

// OpenTlsChannel and ServeTls: a fixed request, a TlsChannelCredentials or
// TlsServerCredentials, and the PEM texts it counts, each within kMaxTlsPemBytes, exactly
// filling the payload. The texts are not parsed here (security/tls_session.h does that).
struct TlsChannelOpen {
  rpcproto::OpenChannelRequest req;
  std::string target;
  std::string roots, key, chain, name;
};
Status DecodeOpenTlsChannel(std::string_view payload, TlsChannelOpen* out);

struct TlsServe {
  rpcproto::ServeRequest req;
  uint32_t client_cert_mode = 0;
  std::string key, chain, roots;
};
Status DecodeServeTls(std::string_view payload, TlsServe* out);

}  // namespace conduit::rpc

#endif  // CONDUIT_DAEMON_RPC_PROGRAM_REQUESTS_H_
