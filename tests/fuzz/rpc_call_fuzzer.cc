// Call frames of the RPC protocol (docs/rpc-protocol.md), as a program or a peer daemon
// sends them: the payload is split into sections and inline message bytes by its head
// (PeekCallHead), the sections decoded (DecodeCallEvent) and turned into an owned Event,
// the way ProgramSession::HandleCall and PeerLink::HandleCall do. Whatever decodes walks
// its metadata safely, and encodes back (EncodeCallEvent) to bytes that decode to the same.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "common/rpc_event.h"
#include "fuzz_check.h"
#include "rpc/event.h"

using namespace conduit;
using namespace conduit::rpc;

namespace {

size_t WalkMetadata(const MetadataView& md, const std::string_view block) {
  size_t bytes = 0;
  uint32_t entries = 0;
  md.ForEach([&](std::string_view key, std::string_view value) {
    FUZZ_CHECK(!key.empty(), "empty metadata key");
    FUZZ_CHECK(key.data() >= block.data() && value.data() + value.size() <= block.data() + block.size(),
               "metadata outside its block");
    bytes += 8 + key.size() + value.size();
    ++entries;
  });
  FUZZ_CHECK(entries == md.count, "%u entries walked of %u", entries, md.count);
  FUZZ_CHECK(bytes == block.size(), "%zu bytes walked of %zu", bytes, block.size());
  return bytes;
}

bool SameMetadata(const MetadataView& a, const MetadataView& b) { return a.count == b.count && a.block == b.block; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view payload(reinterpret_cast<const char*>(data), size);
  CallHead head;
  if (!PeekCallHead(payload, &head).ok()) return 0;
  if (head.inline_bytes > payload.size() - sizeof(head)) return 0;  // the sessions refuse it so
  std::string_view sections = payload.substr(0, payload.size() - head.inline_bytes);
  std::string_view inline_data = payload.substr(payload.size() - head.inline_bytes);
  CallEvent ev;
  if (!DecodeCallEvent(sections, &ev).ok()) return 0;
  if (ev.has(kStart)) WalkMetadata(ev.initial_md, ev.initial_md.block);
  if (ev.has(kHeaders)) WalkMetadata(ev.headers, ev.headers.block);
  if (ev.has(kStatus)) WalkMetadata(ev.trailers, ev.trailers.block);
  if (ev.has(kMessage) && ev.message.segment == kInlineSegment) {
    FUZZ_CHECK(ev.message.fragment_length == inline_data.size(), "inline fragment %llu, %zu bytes follow",
               static_cast<unsigned long long>(ev.message.fragment_length), inline_data.size());
    ev.data = inline_data;
  }

  // Owned by the daemon, then encoded again for the other end.
  Event owned = Event::From(ev);
  CallEvent view = owned.View(ev.call);
  view.sections = ev.sections;
  view.message = ev.message;
  view.data = ev.data;
  std::string encoded;
  EncodeCallEvent(view, &encoded);
  // (Not byte for byte: reserved fields are ignored on decode and written as zero.)
  FUZZ_CHECK(encoded.size() == sections.size(), "re-encoded %zu bytes, was %zu", encoded.size(), sections.size());
  CallEvent again;
  Status st = DecodeCallEvent(encoded, &again);
  FUZZ_CHECK(st.ok(), "re-encoded frame refused: %s", st.message().c_str());
  FUZZ_CHECK(again.call == ev.call && again.sections == ev.sections && again.method == ev.method &&
                 again.authority == ev.authority && again.peer == ev.peer && again.timeout_us == ev.timeout_us &&
                 again.target == ev.target && SameMetadata(again.initial_md, ev.initial_md) &&
                 SameMetadata(again.headers, ev.headers) && SameMetadata(again.trailers, ev.trailers) &&
                 again.status_code == ev.status_code && again.status_details == ev.status_details &&
                 again.cancel_code == ev.cancel_code && again.cancel_details == ev.cancel_details &&
                 again.window == ev.window && memcmp(&again.message, &ev.message, sizeof(ev.message)) == 0,
             "round trip changed the event");
  return 0;
}
