// The setup exchange of an RPC connection, both ways. A program's requests that carry text:
// Hello (its exe name, for admission and logs) and OpenChannel (the gRPC target, parsed by
// ParseTarget, the part of ResolveTarget before any name lookup); and the daemon's
// HelloReply as libmrpc-grpc reads it (DecodeHelloReply). The first byte picks: bit 1 a
// HelloReply (then its frame type, 2 bytes, and payload), else bit 0 a Hello, else an
// OpenChannel, whose payload is also taken as a target text directly.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "common/rpc_hello_reply.h"
#include "common/rpc_protocol.h"
#include "fuzz_check.h"
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
