// The RPC service's checks on untrusted input that need no daemon: which calls a server's
// bind address admits (rpc/bind_address), reading frames so that memory follows the bytes
// that arrive (rpc/frame_input), the deadline on a half-sent frame header
// (FrameReader::NextHeader with idle and started deadlines), and the bound on a Call
// frame's sections (every section at its largest fits kMaxCallSectionsBytes), and the
// largest message a program may name in its send segment (rpc/program_memory).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "common/frame_stream.h"
#include "common/rpc_event.h"
#include "protocol/rpc_protocol.h"
#include "protocol/shim_protocol.h"
#include "rpc/bind_address.h"
#include "rpc/frame_input.h"
#include "rpc/program_memory.h"

namespace conduit::rpc {
namespace {

BindAddress Parse(const std::string& host) {
  BindAddress b;
  Status st = ParseBindHost(host, &b);
  EXPECT_TRUE(st.ok()) << host << ": " << st.message();
  return b;
}

TEST(BindAddressTest, EveryAddressAdmitsEveryone) {
  for (const char* host : {"", "0.0.0.0", "::", "[::]"}) {
    SCOPED_TRACE(host);
    BindAddress b = Parse(host);
    EXPECT_TRUE(b.any);
    EXPECT_TRUE(b.Admits("10.0.0.2", /*from_link=*/true));
    EXPECT_TRUE(b.Admits("127.0.0.1", /*from_link=*/false));
  }
}

TEST(BindAddressTest, LoopbackAdmitsOnlyThisHostsProgramsCallingLoopback) {
  for (const char* host : {"127.0.0.1", "::1", "[::1]", "localhost"}) {
    SCOPED_TRACE(host);
    BindAddress b = Parse(host);
    EXPECT_FALSE(b.any);
    EXPECT_TRUE(b.loopback_only());
    EXPECT_TRUE(b.Admits("127.0.0.1", /*from_link=*/false));
    EXPECT_TRUE(b.Admits("::1", /*from_link=*/false));
    EXPECT_TRUE(b.Admits("::ffff:127.0.0.1", /*from_link=*/false));
    // Another host's daemon, whatever address its link claims or came in on.
    EXPECT_FALSE(b.Admits("127.0.0.1", /*from_link=*/true));
    EXPECT_FALSE(b.Admits("10.0.0.2", /*from_link=*/true));
    // A program of this host calling an external address of it.
    EXPECT_FALSE(b.Admits("10.0.0.2", /*from_link=*/false));
    EXPECT_FALSE(b.Admits("", /*from_link=*/false));
    EXPECT_NE(b.Describe().find("loopback: this host only"), std::string::npos) << b.Describe();
  }
}

TEST(BindAddressTest, OneAddressAdmitsCallsThatReachedIt) {
  BindAddress b{false, {"10.0.0.2"}, "10.0.0.2"};
  EXPECT_TRUE(b.Admits("10.0.0.2", /*from_link=*/true));
  EXPECT_TRUE(b.Admits("::ffff:10.0.0.2", /*from_link=*/true));
  EXPECT_TRUE(b.Admits("10.0.0.2", /*from_link=*/false));
  EXPECT_FALSE(b.Admits("10.0.0.3", /*from_link=*/true));
  EXPECT_FALSE(b.Admits("127.0.0.1", /*from_link=*/false));
  EXPECT_FALSE(b.loopback_only());
}

TEST(BindAddressTest, AddressesOfOtherHostsAndUnknownNamesAreRefused) {
  BindAddress b;
  EXPECT_FALSE(ParseBindHost("192.0.2.1", &b).ok());  // TEST-NET-1: not this host's
  EXPECT_FALSE(ParseBindHost("2001:db8::1", &b).ok());
  EXPECT_FALSE(ParseBindHost("no-such-host.invalid", &b).ok());
  EXPECT_FALSE(ParseBindHost("ipv4:127.0.0.1", &b).ok());  // gRPC servers take no URI here either
}

TEST(BindAddressTest, OverlapsAsNativeBindsWould) {
  BindAddress any = BindAddress::Any();
  BindAddress loop = Parse("127.0.0.1");
  BindAddress loop6 = Parse("::1");
  BindAddress ext{false, {"10.0.0.2"}, "10.0.0.2"};
  BindAddress ext2{false, {"10.0.0.3"}, "10.0.0.3"};
  EXPECT_TRUE(any.Overlaps(loop));
  EXPECT_TRUE(ext.Overlaps(any));
  EXPECT_TRUE(loop.Overlaps(loop6));  // loopback counts as one address
  EXPECT_FALSE(loop.Overlaps(ext));
  EXPECT_FALSE(ext.Overlaps(ext2));
  EXPECT_TRUE(ext.Overlaps(ext));
}

class FrameInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    sender_.reset(sv[0]);
    receiver_.reset(sv[1]);
  }
  void Send(const std::string& bytes) {
    ASSERT_EQ(write(sender_.get(), bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  }
  std::string Header(uint32_t length) {
    FrameHeader h{shimproto::kMagic, shimproto::kVersion, rpcproto::kCall, length, 0};
    return std::string(reinterpret_cast<const char*>(&h), sizeof(h));
  }
  FrameReader Reader() {
    return FrameReader(receiver_.get(), shimproto::kMagic, shimproto::kVersion, rpcproto::kMaxFrame, false);
  }
  UniqueFd sender_, receiver_;
};

TEST_F(FrameInputTest, MemoryFollowsTheBytesThatArriveNotTheAnnouncedLength) {
  FrameReader reader = Reader();
  Send(Header(rpcproto::kMaxFrame) + std::string(1000, 'x'));
  FrameHeader h;
  ASSERT_TRUE(reader.NextHeader(&h, Deadline::AfterMs(1000)).ok());
  std::string payload;
  auto start = std::chrono::steady_clock::now();
  Status st = ReadArriving(reader, h.length, &payload, Deadline::AfterMs(300));
  EXPECT_FALSE(st.ok());  // the rest never comes: the frame's deadline ends it
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
  EXPECT_LE(payload.capacity(), 2 * kFirstReadStep) << "reserved for bytes that never arrived";
}

TEST_F(FrameInputTest, AWholePayloadArrivesIntact) {
  FrameReader reader = Reader();
  std::string body(3 * kFirstReadStep + 12345, '\0');
  for (size_t i = 0; i < body.size(); ++i) body[i] = static_cast<char>(i * 7);
  std::thread writer([&] { Send(Header(static_cast<uint32_t>(body.size())) + body + Header(5) + "hello"); });
  FrameHeader h;
  std::string payload;
  ASSERT_TRUE(reader.NextHeader(&h, Deadline::AfterMs(1000)).ok());
  ASSERT_TRUE(ReadArriving(reader, h.length, &payload, Deadline::AfterMs(5000)).ok());
  EXPECT_EQ(payload, body);
  ASSERT_TRUE(reader.NextHeader(&h, Deadline::AfterMs(1000)).ok());
  ASSERT_TRUE(SkipArriving(reader, h.length, Deadline::AfterMs(1000)).ok());
  writer.join();
}

TEST_F(FrameInputTest, AnIdleConnectionWaitsButAHalfHeaderIsBounded) {
  FrameReader reader = Reader();
  FrameHeader h;
  // Nothing sent: idle until the idle deadline (here short, so the test ends), not the
  // started one.
  auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(reader.NextHeader(&h, Deadline::AfterMs(400), /*started_ms=*/50).ok());
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(350));
  // Half a header: the started deadline applies although idle is Never.
  Send(Header(10).substr(0, 8));
  start = std::chrono::steady_clock::now();
  Status st = reader.NextHeader(&h, Deadline::Never(), /*started_ms=*/200);
  EXPECT_FALSE(st.ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

TEST_F(FrameInputTest, AHeaderArrivingInPiecesWithinTheBoundIsRead) {
  FrameReader reader = Reader();
  std::string header = Header(0);
  std::thread writer([&] {
    Send(header.substr(0, 5));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    Send(header.substr(5));
  });
  FrameHeader h;
  EXPECT_TRUE(reader.NextHeader(&h, Deadline::Never(), /*started_ms=*/2000).ok());
  writer.join();
}

TEST(CallSectionsBoundTest, EverySectionAtItsLargestFits) {
  std::string md_block;
  uint32_t count = 0;
  while (md_block.size() + 8 + 1 + 1000 <= rpcproto::kMaxSectionBytes) {
    AppendMetadata(&md_block, "k", std::string(1000, 'v'));
    ++count;
  }
  std::string method(4096, 'm'), authority(4096, 'a'), peer(256, 'p'), details(rpcproto::kMaxSectionBytes, 'd');
  CallEvent ev;
  ev.sections = kAllSections & ~kMessage;
  ev.method = method;
  ev.authority = authority;
  ev.peer = peer;
  ev.initial_md = MetadataView{count, md_block};
  ev.headers = MetadataView{count, md_block};
  ev.trailers = MetadataView{count, md_block};
  ev.status_details = details;
  ev.cancel_code = 1;
  ev.cancel_details = details;
  std::string frame;
  EncodeCallEvent(ev, &frame);
  CallEvent back;
  ASSERT_TRUE(DecodeCallEvent(frame, &back).ok());
  EXPECT_LE(frame.size() + sizeof(MessageWire), rpcproto::kMaxCallSectionsBytes);
}

// A send segment may be larger than a message can be (kMaxSendSegment): a message over
// kMaxMessageBytes is refused where the program names it, never handed to a link. The
// segment is sparse: its size costs nothing.
TEST(ProgramMemoryTest, AMessageOverTheLargestGrpcMessageIsRefused) {
  const uint64_t size = rpcproto::kMaxMessageBytes + 4096 + 1;
  UniqueFd fd(memfd_create("rpc-input-test", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  ASSERT_TRUE(fd.valid());
  ASSERT_EQ(ftruncate(fd.get(), static_cast<off_t>(size)), 0);
  ASSERT_EQ(fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK), 0);
  auto memory = std::make_shared<ProgramMemory>([](const rpcproto::FreeEntry&) {}, 1 << 20, uint64_t{16} << 30);
  ShmSegment control;  // the rings a released message goes back through
  UniqueFd control_fd;
  ASSERT_TRUE(control.Create("rpc-input-test-control", rpcproto::kControlRegionBytes, &control_fd).ok());
  ASSERT_TRUE(memory->MapControl(control_fd.get()).ok());
  ASSERT_TRUE(memory->AttachSend(rpcproto::SegmentInfo{0, 0, size}, fd.get()).ok());
  Message m;
  const Status st = memory->SendMessage(0, 0, rpcproto::kMaxMessageBytes + 1, &m);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("over the"), std::string::npos) << st.message();
  EXPECT_TRUE(memory->SendMessage(0, 4096, rpcproto::kMaxMessageBytes, &m).ok()) << "the largest is taken";
  EXPECT_EQ(memory->sends_in_flight(), 1u);
}

}  // namespace
}  // namespace conduit::rpc
