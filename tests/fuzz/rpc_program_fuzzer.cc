// A program's setup requests on an RPC connection that carry text: Hello (its exe name,
// for admission and logs) and OpenChannel (the gRPC target, parsed by ParseTarget, the part
// of ResolveTarget before any name lookup). The first byte picks the request; the rest is
// its payload, then (OpenChannel) also taken as a target text directly.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

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
  if (data[0] & 1) {
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
