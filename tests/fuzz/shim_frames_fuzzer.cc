// What the daemon reads from a program on its Unix socket, through its own code: frames as
// the buffered reader takes them off a socket (headers, lengths, payloads), the Group
// request's layout, and the ncclUniqueId a program passes back in CommInit. The first byte
// picks the decoder, the rest is its bytes.
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/frame_stream.h"
#include "common/unique_id.h"
#include "fuzz_check.h"
#include "protocol/shim_protocol.h"
#include "session/group_request.h"

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

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  switch (data[0] % 3) {
    case 0: Group(data + 1, size - 1); break;
    case 1: UniqueId(data + 1, size - 1); break;
    case 2: Frames(data + 1, size - 1); break;
  }
  return 0;
}
