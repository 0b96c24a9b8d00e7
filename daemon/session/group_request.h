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
  bool device = false;                       // kGroupDevice: dev (or async) and refs are set
  shimproto::DeviceGroupHeader dev{};
  bool async = false;                        // kGroupAsync: async instead of dev
  shimproto::DeviceAsyncHeader async_header{};
  std::vector<shimproto::DeviceOpRef> refs;  // one per op
  bool regions = false;                      // kGroupRegions: region_refs is set
  std::vector<shimproto::RegionOpRef> region_refs;  // one per op
};

// Checks sizes (at most kMaxOpsPerGroup ops, exactly the bytes they need), flags (known,
// at most one of streamed, device and regions) and copies the parts out. Ops themselves are checked
// against the communicator and segment by Communicator::ValidateOp.
Status ParseGroupRequest(const std::vector<uint8_t>& payload, ParsedGroup* out);

// A RegisterBuffer (kRegisterBuffer) or RegisterVmmBuffer (kRegisterVmmBuffer) request:
// exactly one RegisterBufferRequest; a RegisterVmmBuffer must carry the allocation's
// descriptor (`has_fd`) and an all-zero ipc_handle. What the GPU makes of it is
// DeviceSession::Register's to check.
Status ParseRegisterBuffer(uint16_t type, const std::vector<uint8_t>& payload, bool has_fd,
                           shimproto::RegisterBufferRequest* out);

// A RegisterSpan frame: the header, then exactly `pages` page ids; a span id with
// kSpanIdBit set, 2..kMaxSpanPages pages, none of them a span id or 0. Whether the pages
// are this connection's registrations is DeviceSession::RegisterSpan's to check.
Status ParseRegisterSpan(const std::vector<uint8_t>& payload, shimproto::RegisterSpanRequest* out,
                         std::vector<uint64_t>* pages);

// The bytes an op reads from its input buffer and writes to its output buffer when they
// are the program's own (device buffers, host regions) rather than one segment layout:
// ReduceScatter reads nranks blocks, AllGather writes them; all else one block each.
Status OpBufferBytes(const shimproto::OpDesc& op, int nranks, uint64_t* send, uint64_t* recv);

}  // namespace conduit

#endif  // CONDUIT_DAEMON_SESSION_GROUP_REQUEST_H_
