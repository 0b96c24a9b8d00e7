// A Group request from a program (shim protocol) as bytes: its layout checked and taken
// apart before the session touches a communicator (pure, so it is tested and fuzzed alone).
#ifndef CONDUIT_DAEMON_SESSION_GROUP_REQUEST_H_
#define CONDUIT_DAEMON_SESSION_GROUP_REQUEST_H_

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "protocol/shim_protocol.h"

namespace conduit {

struct ParsedGroup {
  shimproto::GroupRequest head{};
  std::vector<shimproto::OpDesc> ops;
  bool device = false;                       // kGroupDevice: dev and refs are set
  shimproto::DeviceGroupHeader dev{};
  std::vector<shimproto::DeviceOpRef> refs;  // one per op
};

// Checks sizes (at most kMaxOpsPerGroup ops, exactly the bytes they need), flags (known,
// not device and streamed at once) and copies the parts out. Ops themselves are checked
// against the communicator and segment by Communicator::ValidateOp.
Status ParseGroupRequest(const std::vector<uint8_t>& payload, ParsedGroup* out);

}  // namespace conduit

#endif  // CONDUIT_DAEMON_SESSION_GROUP_REQUEST_H_
