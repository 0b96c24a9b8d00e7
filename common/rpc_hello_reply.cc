#include "common/rpc_hello_reply.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "common/frame.h"
#include "protocol/rpc_protocol.h"

namespace conduit {

Status DecodeHelloReply(uint16_t type, std::string_view payload, HelloAnswer* out) {
  rpcproto::HelloReply reply{};
  // A refusal of another shape (an older daemon, a status-only frame) still starts with
  // the status: say what it said.
  if (payload.size() >= sizeof(WireStatus)) memcpy(&reply, payload.data(), std::min(payload.size(), sizeof(reply)));
  if (type != rpcproto::kHelloReply || payload.size() != sizeof(reply)) {
    Status st = payload.size() >= sizeof(WireStatus) ? FromWire(reply.status) : Status::Ok();
    return SystemError("unexpected answer to Hello (type 0x%04x, %zu bytes)%s%s", type, payload.size(),
                       st.ok() ? "" : ": ", st.message().c_str());
  }
  if (reply.accepted == 0) {
    Status why = FromWire(reply.status);
    if (why.ok()) return SystemError("refused this program: the daemon gave no reason");
    return Status(why.code(), "refused this program: " + why.message());
  }
  out->timeout_ms = reply.timeout_ms;
  out->inline_max = reply.inline_max;
  out->native_listeners = (reply.flags & rpcproto::kHelloNativeListeners) != 0;
  out->tls = (reply.flags & rpcproto::kHelloTls) != 0;
  return Status::Ok();
}

}  // namespace conduit
