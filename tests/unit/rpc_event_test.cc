// The Call frame codec: what one side encodes the other decodes, and no input, however
// broken, makes the decoder read out of bounds or accept an inconsistent frame.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "common/rpc_event.h"

namespace conduit::rpc {
namespace {

std::string Encode(const CallEvent& ev) {
  std::string out;
  EncodeCallEvent(ev, &out);
  return out;
}

TEST(RpcEventTest, EverySectionRoundTrips) {
  std::string md;
  AppendMetadata(&md, "x-user", "alice");
  AppendMetadata(&md, "trace-bin", std::string("\0\1\2", 3));
  CallEvent ev;
  ev.call = 42;
  ev.sections = kStart | kHeaders | kMessage | kHalfClose | kStatus | kCancel | kWindow;
  ev.target = 7;
  ev.timeout_us = 1500;
  ev.method = "/pkg.Svc/Do";
  ev.authority = "host:1";
  ev.peer = "ipv4:1.2.3.4:5";
  ev.initial_md = MetadataView{2, md};
  std::string auth;
  AppendMetadata(&auth, "transport_security_type", "ssl");
  ev.auth = MetadataView{1, auth};
  ev.headers = MetadataView{2, md};
  ev.message = MessageWire{100, 20, 10, kInlineSegment, 0, 0};
  ev.data = "0123456789";
  ev.status_code = 5;
  ev.status_details = "not found";
  ev.trailers = MetadataView{2, md};
  ev.cancel_code = 1;
  ev.cancel_details = "bye";
  ev.window = 1 << 20;
  std::string body = Encode(ev);
  CallHead head;
  ASSERT_TRUE(PeekCallHead(body, &head).ok());
  EXPECT_EQ(head.inline_bytes, 10u);
  CallEvent got;
  ASSERT_TRUE(DecodeCallEvent(body, &got).ok());
  EXPECT_EQ(got.call, 42u);
  EXPECT_EQ(got.sections, ev.sections);
  EXPECT_EQ(got.method, "/pkg.Svc/Do");
  EXPECT_EQ(got.authority, "host:1");
  EXPECT_EQ(got.peer, "ipv4:1.2.3.4:5");
  EXPECT_EQ(got.auth.count, 1u);
  EXPECT_EQ(got.auth.block, auth);
  EXPECT_EQ(got.timeout_us, 1500);
  EXPECT_EQ(got.message.fragment_offset, 20u);
  EXPECT_EQ(got.status_details, "not found");
  EXPECT_EQ(got.cancel_details, "bye");
  EXPECT_EQ(got.window, 1u << 20);
  std::vector<std::pair<std::string, std::string>> entries;
  got.trailers.ForEach([&](std::string_view k, std::string_view v) { entries.emplace_back(k, v); });
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[1].first, "trace-bin");
  EXPECT_EQ(entries[1].second, std::string("\0\1\2", 3));
}

TEST(RpcEventTest, EveryTruncationIsRejected) {
  std::string md;
  AppendMetadata(&md, "k", "v");
  CallEvent ev;
  ev.call = 1;
  ev.sections = kStart | kStatus;
  ev.method = "/a/b";
  ev.initial_md = MetadataView{1, md};
  ev.status_details = "x";
  std::string body = Encode(ev);
  ASSERT_TRUE(DecodeCallEvent(body, &ev).ok());
  for (size_t n = 0; n < body.size(); ++n) {
    CallEvent got;
    EXPECT_FALSE(DecodeCallEvent(std::string_view(body).substr(0, n), &got).ok()) << n;
  }
  CallEvent got;
  EXPECT_FALSE(DecodeCallEvent(body + "!", &got).ok()) << "stray bytes accepted";
}

TEST(RpcEventTest, InconsistentFramesAreRejected) {
  CallEvent got;
  CallEvent ev;
  ev.call = 1;
  ev.sections = kMessage;
  ev.message = MessageWire{10, 8, 5, kInlineSegment, 0, 0};  // past the end
  ev.data = "12345";
  EXPECT_FALSE(DecodeCallEvent(Encode(ev), &got).ok());
  ev.message = MessageWire{10, 0, 5, kInlineSegment, 0, 0};
  ev.data = "123";  // announces 3 inline bytes for a 5-byte fragment
  EXPECT_FALSE(DecodeCallEvent(Encode(ev), &got).ok());
  ev.sections = kStatus;
  ev.status_code = 17;  // not a gRPC code
  EXPECT_FALSE(DecodeCallEvent(Encode(ev), &got).ok());
  ev.sections = kCancel;
  ev.cancel_code = 0;  // cancelling with OK
  EXPECT_FALSE(DecodeCallEvent(Encode(ev), &got).ok());
  ev.sections = 1u << 9;  // unknown section
  EXPECT_FALSE(DecodeCallEvent(Encode(ev), &got).ok());
  std::string md;
  AppendMetadata(&md, "k", "v");
  ev.sections = kHeaders;
  ev.headers = MetadataView{5, md};  // more entries than the block holds
  EXPECT_FALSE(DecodeCallEvent(Encode(ev), &got).ok());
  ev.sections = kStart;
  ev.method = "/a/b";
  ev.headers = MetadataView{};
  ev.auth = MetadataView{2, md};  // auth properties: more entries than the block holds
  EXPECT_FALSE(DecodeCallEvent(Encode(ev), &got).ok());
  ev.auth = MetadataView{1, md};
  std::string body = Encode(ev);
  ASSERT_TRUE(DecodeCallEvent(body, &got).ok());
  // auth_bytes (the last u32 of the Start section's fixed part) shorter than its count.
  const size_t auth_bytes_at = sizeof(CallHead) + sizeof(StartWire) - sizeof(uint32_t);
  uint32_t two = 2;
  memcpy(body.data() + auth_bytes_at, &two, sizeof(two));
  EXPECT_FALSE(DecodeCallEvent(body, &got).ok());
}

TEST(RpcEventTest, RandomBytesNeverCrashTheDecoder) {
  std::mt19937 rng(7);
  std::string buf;
  for (int i = 0; i < 20000; ++i) {
    buf.resize(rng() % 200);
    for (char& c : buf) c = static_cast<char>(rng());
    if (buf.size() >= 12 && (rng() & 1)) {
      uint32_t sections = rng() & kAllSections;  // plausible heads reach deeper
      memcpy(buf.data() + 8, &sections, 4);
    }
    CallEvent got;
    (void)DecodeCallEvent(buf, &got);
  }
}

}  // namespace
}  // namespace conduit::rpc
