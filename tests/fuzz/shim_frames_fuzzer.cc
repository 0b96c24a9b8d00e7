// What the daemon reads from a program on its Unix socket, through its own code: frames as
// the buffered reader takes them off a socket (headers, lengths, payloads), the Group
// request's layout, the ncclUniqueId a program passes back in CommInit, and the
// RegisterBuffer / RegisterVmmBuffer / RegisterSpan requests, an AttachResult request as the communicator's
// result area takes it; and the DeviceInfo reply as the shim reads it. The first byte picks
// the decoder, the rest is its bytes.
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "collectives/result_area.h"
#include "common/device_info_reply.h"
#include "common/frame_stream.h"
#include "common/unique_id.h"
#include "fuzz_check.h"
#include "protocol/shim_protocol.h"
#include "common/shm_segment.h"
#include "session/group_request.h"
#include "session/host_regions.h"

using namespace conduit;

namespace {

void Group(const uint8_t* data, size_t size) {
  ParsedGroup g;
  std::vector<uint8_t> payload(data, data + size);
  if (!ParseGroupRequest(payload, &g).ok()) return;
  FUZZ_CHECK(g.ops.size() == g.head.nops && g.head.nops <= shimproto::kMaxOpsPerGroup, "%zu ops for nops %u",
             g.ops.size(), g.head.nops);
  FUZZ_CHECK(g.device == ((g.head.flags & shimproto::kGroupDevice) != 0), "device flag");
  FUZZ_CHECK(!g.device || g.refs.size() == g.ops.size(), "%zu device refs for %zu ops", g.refs.size(), g.ops.size());
  FUZZ_CHECK(!(g.device && (g.head.flags & shimproto::kGroupStreamed)), "a streamed device group was accepted");
  FUZZ_CHECK(g.async == ((g.head.flags & shimproto::kGroupAsync) != 0) && (!g.async || g.device),
             "async flag (device %d, flags 0x%x)", g.device, g.head.flags);
  FUZZ_CHECK(g.regions == ((g.head.flags & shimproto::kGroupRegions) != 0), "regions flag");
  // A streamed or device group's reply is awaited on the socket, alongside the group's
  // other traffic: one that asks for the reply page must be refused.
  FUZZ_CHECK(!(g.head.flags & shimproto::kGroupReplyInPage) ||
                 !(g.head.flags & (shimproto::kGroupStreamed | shimproto::kGroupDevice)),
             "a reply in the page accepted for a streamed or device group (flags 0x%x)", g.head.flags);
  FUZZ_CHECK(!g.regions || (g.region_refs.size() == g.ops.size() && !g.device &&
                            !(g.head.flags & shimproto::kGroupStreamed)),
             "%zu region refs for %zu ops (device %d, flags 0x%x)", g.region_refs.size(), g.ops.size(), g.device,
             g.head.flags);
  if (!g.regions) return;
  // The refs against two attached regions (ids 1 and 2): whatever they say, what Resolve
  // accepts lies inside a region, and a needed buffer is never null.
  static HostRegions* regions = [] {
    auto* r = new HostRegions(1 << 20);
    for (uint64_t id : {1, 2}) {
      ShmSegment seg;
      UniqueFd fd;
      if (!seg.Create("fuzz-region", id * 4096, &fd).ok() || !r->Attach(id, std::move(fd), id * 4096).ok()) abort();
    }
    return r;
  }();
  const int nranks = 1 + static_cast<int>(g.head.nops % 8);
  const int rank = g.ops.empty() ? 0 : static_cast<int>(g.ops[0].count % static_cast<uint64_t>(nranks));
  std::vector<HostOpBuffers> out;
  int failed_op = -1;
  if (!regions->Resolve(g.ops, g.region_refs, rank, nranks, &out, &failed_op).ok()) {
    FUZZ_CHECK(failed_op >= 0 && static_cast<size_t>(failed_op) < g.ops.size(), "failed op %d", failed_op);
    return;
  }
  for (size_t i = 0; i < g.ops.size(); ++i) {
    if (!(g.ops[i].flags & shimproto::kOpRegion)) {
      FUZZ_CHECK(out[i].send == nullptr && out[i].recv == nullptr, "op %zu outside regions resolved", i);
      continue;
    }
    uint64_t send = 0, recv = 0;
    FUZZ_CHECK(OpBufferBytes(g.ops[i], nranks, &send, &recv).ok(), "op %zu's size was accepted", i);
    FUZZ_CHECK(shimproto::InputFitsRegions(g.ops[i].kind, send), "op %zu: a reduction over the regions limit accepted", i);
    FUZZ_CHECK(shimproto::OpNeedsRecv(g.ops[i], rank) ? out[i].recv != nullptr && regions->Holds(out[i].recv, recv)
                                           : out[i].recv == nullptr,
               "op %zu's output outside its region, or a send given one", i);
    FUZZ_CHECK(shimproto::OpNeedsSend(g.ops[i], rank) ? out[i].send != nullptr && regions->Holds(out[i].send, send)
                                           : out[i].send == nullptr,
               "op %zu's input outside its region, or a receive given one", i);
  }
}

void UniqueId(const uint8_t* data, size_t size) {
  if (size < 128) return;
  CommIdentity id;
  if (!DecodeUniqueId(reinterpret_cast<const char*>(data), &id).ok()) return;
  FUZZ_CHECK(id.key != 0 && !id.root_addr.empty() && id.root_addr.size() < 64, "identity");
  char again[128];
  EncodeUniqueId(id, again);
  CommIdentity back;
  FUZZ_CHECK(DecodeUniqueId(again, &back).ok(), "a decoded id does not decode again");
  FUZZ_CHECK(back.key == id.key && back.root_addr == id.root_addr && back.secret == id.secret, "round trip");
}

// A stream of frames on a socket, read the way the RPC program sessions read theirs.
void Frames(const uint8_t* data, size_t size) {
  UniqueFd reader(FuzzSocket(data, size));
  if (!reader.valid()) return;
  constexpr uint32_t kMax = 1 << 16;
  FrameReader frames(reader.get(), shimproto::kMagic, shimproto::kVersion, kMax, /*accept_fds=*/false);
  size_t consumed = 0;
  for (int i = 0; i < 256; ++i) {
    FrameHeader h;
    if (!frames.NextHeader(&h, Deadline::AfterMs(50)).ok()) break;
    FUZZ_CHECK(h.magic == shimproto::kMagic && h.version == shimproto::kVersion && h.length <= kMax,
               "header accepted: magic 0x%08x version %u length %u", h.magic, h.version, h.length);
    std::string payload;
    if (!frames.ReadString(h.length, &payload, Deadline::AfterMs(50)).ok()) break;
    consumed += sizeof(h) + payload.size();
    FUZZ_CHECK(consumed <= size, "read %zu bytes of %zu", consumed, size);
  }
}

// The DeviceInfo reply as the shim reads it: what is taken is exactly a head and the
// UUIDs it announces, and writes back to the same bytes.
void DeviceInfo(const uint8_t* data, size_t size) {
  shimproto::DeviceInfoReply head;
  std::vector<shimproto::DeviceUuid> devices;
  if (!DecodeDeviceInfoReply(std::string_view(reinterpret_cast<const char*>(data), size), &head, &devices).ok()) return;
  FUZZ_CHECK(head.ndevices >= 0 && static_cast<size_t>(head.ndevices) == devices.size() &&
                 size == sizeof(head) + devices.size() * sizeof(shimproto::DeviceUuid),
             "%zu bytes taken for %d devices", size, head.ndevices);
  const std::vector<uint8_t> again = EncodeDeviceInfoReply(head, devices);
  FUZZ_CHECK(again.size() == size && memcmp(again.data(), data, size) == 0, "the reply does not write back the same");
}

// A buffer registration: the first byte says which request (bit 0: RegisterVmmBuffer) and
// whether a descriptor came with it (bit 1).
void Registration(const uint8_t* data, size_t size) {
  if (size == 0) return;
  const uint16_t type = (data[0] & 1) ? shimproto::kRegisterVmmBuffer : shimproto::kRegisterBuffer;
  const bool has_fd = (data[0] & 2) != 0;
  const std::vector<uint8_t> payload(data + 1, data + size);
  shimproto::RegisterBufferRequest req;
  if (!ParseRegisterBuffer(type, payload, has_fd, &req).ok()) return;
  FUZZ_CHECK(payload.size() == sizeof(req) && memcmp(&req, payload.data(), sizeof(req)) == 0, "request bytes");
  if (type == shimproto::kRegisterVmmBuffer) {
    bool zero = true;
    for (uint8_t b : req.ipc_handle) zero &= b == 0;
    FUZZ_CHECK(has_fd && zero, "a RegisterVmmBuffer taken without its descriptor (%d) or with a handle", has_fd);
  }
}

// A RegisterSpan request: what is taken is a span id with its top bit, 2..kMaxSpanPages
// page ids that are neither 0 nor span ids, and exactly the bytes they fill.
void Span(const uint8_t* data, size_t size) {
  const std::vector<uint8_t> payload(data, data + size);
  shimproto::RegisterSpanRequest req;
  std::vector<uint64_t> pages;
  if (!ParseRegisterSpan(payload, &req, &pages).ok()) return;
  FUZZ_CHECK((req.span_id & shimproto::kSpanIdBit) != 0, "a span id without its top bit");
  FUZZ_CHECK(req.pages >= 2 && req.pages <= shimproto::kMaxSpanPages && pages.size() == req.pages, "%u pages", req.pages);
  FUZZ_CHECK(size == sizeof(req) + pages.size() * sizeof(uint64_t), "%zu bytes for %zu pages", size, pages.size());
  for (size_t i = 0; i < pages.size(); ++i) {
    uint64_t id;
    memcpy(&id, data + sizeof(req) + i * sizeof(id), sizeof(id));
    FUZZ_CHECK(id == pages[i] && id != 0 && (id & shimproto::kSpanIdBit) == 0, "page %zu", i);
  }
}

// An AttachResult request (exactly its size, as the daemon parses it) against one
// communicator's result area, which grows across inputs as a real one does, under a 4 MiB
// limit: what is given holds the bytes asked for, stays within the limit, and its
// descriptor can be mapped read-only but never writable (only conduitd writes results).
void AttachResult(const uint8_t* data, size_t size) {
  shimproto::AttachResultRequest req;
  if (size != sizeof(req)) return;
  memcpy(&req, data, sizeof(req));
  constexpr uint64_t kLimit = 4 << 20;
  static ResultArea* area = new ResultArea;
  UniqueFd fd;
  uint64_t bytes = 0, number = 0;
  if (!area->Attach(req.min_bytes, kLimit, &fd, &bytes, &number).ok()) {
    FUZZ_CHECK(req.min_bytes == 0 || req.min_bytes > kLimit, "%llu bytes refused",
               static_cast<unsigned long long>(req.min_bytes));
    return;
  }
  FUZZ_CHECK(fd.valid() && number != 0 && bytes >= req.min_bytes && bytes <= kLimit, "%llu bytes given for %llu",
             static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(req.min_bytes));
  void* w = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  FUZZ_CHECK(w == MAP_FAILED, "a program could map its result area writable");
  ShmSegment view;
  FUZZ_CHECK(view.Map(fd.get(), bytes, bytes, /*writable=*/false).ok(), "the area cannot be mapped read-only");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  switch (data[0] % 7) {
    case 0: Group(data + 1, size - 1); break;
    case 1: UniqueId(data + 1, size - 1); break;
    case 2: Frames(data + 1, size - 1); break;
    case 3: DeviceInfo(data + 1, size - 1); break;
    case 4: Registration(data + 1, size - 1); break;
    case 5: AttachResult(data + 1, size - 1); break;
    case 6: Span(data + 1, size - 1); break;
  }
  return 0;
}
