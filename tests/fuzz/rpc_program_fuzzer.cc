// The setup exchange of an RPC connection, both ways. A program's requests that carry text:
// Hello (its exe name, for admission and logs) and OpenChannel (the gRPC target, parsed by
// ParseTarget, the part of ResolveTarget before any name lookup); and the daemon's
// HelloReply as libmrpc-grpc reads it (DecodeHelloReply); and the TLS requests with their
// counted PEM texts (DecodeOpenTlsChannel, DecodeServeTls). The first byte picks: bit 1 a
// HelloReply (then its frame type, 2 bytes, and payload), else bit 2 an OpenTlsChannel,
// else bit 3 a ServeTls, else bit 0 a Hello, else an OpenChannel, whose payload is also
// taken as a target text directly.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "common/rpc_hello_reply.h"
#include "fuzz_check.h"
#include "protocol/rpc_protocol.h"
#include "rpc/program_requests.h"
#include "rpc/target.h"

using namespace conduit;
using namespace conduit::rpc;

namespace {

void CheckTarget(const std::string& text) {
  std::string host;
  uint32_t port = 0;
  if (!ParseTarget(text, &host, &port).ok()) return;
  FUZZ_CHECK(port >= 1 && port <= 65535, "port %u", port);
  FUZZ_CHECK(host.size() < text.size(), "host '%s' from '%s'", host.c_str(), text.c_str());
  FUZZ_CHECK(JoinHostPort(host, port).size() > host.size(), "JoinHostPort");
}

// A decoded TLS request must account for every byte of its payload, within the limits.
void CheckOpenTls(std::string_view payload) {
  TlsChannelOpen open;
  if (!DecodeOpenTlsChannel(payload, &open).ok()) return;
  const size_t fixed = sizeof(rpcproto::OpenChannelRequest) + sizeof(rpcproto::TlsChannelCredentials);
  FUZZ_CHECK(fixed + open.roots.size() + open.key.size() + open.chain.size() + open.name.size() == payload.size(),
             "credentials do not fill the payload");
  FUZZ_CHECK(!open.roots.empty() && open.roots.size() <= rpcproto::kMaxTlsPemBytes, "roots of %zu", open.roots.size());
  FUZZ_CHECK(open.key.empty() == open.chain.empty(), "key without chain or the reverse");
  FUZZ_CHECK(!open.name.empty() && open.name.size() <= rpcproto::kMaxTlsNameBytes &&
                 open.name.find('\0') == std::string::npos,
             "name of %zu", open.name.size());
  CheckTarget(open.target);
}

void CheckServeTls(std::string_view payload) {
  TlsServe serve;
  if (!DecodeServeTls(payload, &serve).ok()) return;
  const size_t fixed = sizeof(rpcproto::ServeRequest) + sizeof(rpcproto::TlsServerCredentials);
  FUZZ_CHECK(fixed + serve.key.size() + serve.chain.size() + serve.roots.size() == payload.size(),
             "credentials do not fill the payload");
  FUZZ_CHECK(!serve.key.empty() && !serve.chain.empty(), "no key or chain");
  FUZZ_CHECK(serve.client_cert_mode <= 4, "mode %u", serve.client_cert_mode);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view payload(reinterpret_cast<const char*>(data + 1), size - 1);
  if (data[0] & 2) {
    if (payload.size() < 2) return 0;
    uint16_t type;
    memcpy(&type, payload.data(), sizeof(type));
    HelloAnswer answer;
    Status st = DecodeHelloReply(type, payload.substr(2), &answer);
    // Only exactly one HelloReply that accepts is taken; a refusal is never success.
    const bool one_reply = type == rpcproto::kHelloReply && payload.size() - 2 == sizeof(rpcproto::HelloReply);
    FUZZ_CHECK(!st.ok() || one_reply, "took a frame of type 0x%04x and %zu bytes", type, payload.size() - 2);
    if (st.ok()) {
      rpcproto::HelloReply reply;
      memcpy(&reply, payload.data() + 2, sizeof(reply));
      FUZZ_CHECK(reply.accepted != 0, "took a refusal");
      FUZZ_CHECK(answer.timeout_ms == reply.timeout_ms && answer.inline_max == reply.inline_max, "fields");
    }
  } else if (data[0] & 4) {
    CheckOpenTls(payload);
  } else if (data[0] & 8) {
    CheckServeTls(payload);
  } else if (data[0] & 1) {
    rpcproto::HelloRequest req;
    std::string exe;
    if (DecodeHello(payload, &req, &exe)) {
      FUZZ_CHECK(exe.size() <= sizeof(req.exe) && exe.find('\0') == std::string::npos, "exe of %zu bytes", exe.size());
    }
  } else {
    rpcproto::OpenChannelRequest req;
    std::string target;
    if (DecodeOpenChannel(payload, &req, &target)) {
      FUZZ_CHECK(target.size() <= sizeof(req.target), "target of %zu bytes", target.size());
      CheckTarget(target);
    }
    CheckTarget(std::string(payload));
  }
  return 0;
}
