// A daemon serves many programs: one client sending garbage or impossible requests must get
// an error or lose its own connection, while the daemon stays up and keeps serving others.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <random>

#include "coll_run.h"
#include "protocol/call_page.h"
#include "integration_env.h"
#include "raw_shim_client.h"

namespace conduit::it {
namespace {

using namespace shimproto;

class MalformedTest : public ClusterSuiteTest<MalformedTest> {
 public:
  static ClusterConfig Config() {
    ClusterConfig c;
    c.prefix = "mf";
    c.subnet = "10.231.16";
    c.hosts = 2;
    c.timeout_ms = kDaemonTimeoutMs;
    return c;
  }

 protected:
  void SetUp() override {
    ClusterSuiteTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_TRUE(client_.Connect(cluster_->Socket(0)));
  }
  // Every case ends here: the bad client got an error or was dropped, the daemon lives,
  // and a different client still gets service on the same daemon.
  void ExpectRejectedAndDaemonServing(int status) {
    EXPECT_TRUE(status == -1 || status > 0) << "want an error reply or a closed connection, got "
                                            << (status == 0    ? "success"
                                                : status == -2 ? "no answer within the bound"
                                                               : "an unparsable reply");
    EXPECT_TRUE(cluster_->DaemonAlive(0)) << cluster_->Describe();
    RawShimClient other;
    ASSERT_TRUE(other.Connect(cluster_->Socket(0)));
    EXPECT_EQ(other.OpenSession(kShmSize, kReplyBound), "") << "daemon stopped serving new clients";
  }
  // A Group with one op on a fresh 1-rank session.
  int SendOp(const OpDesc& op) {
    std::string err = client_.OpenSession(kShmSize, kReplyBound);
    EXPECT_EQ(err, "");
    OneOpGroup msg{{1, 0}, op};
    EXPECT_TRUE(client_.SendFrame(kGroup, &msg, sizeof msg));
    return client_.ReadStatus(kReplyBound);
  }

  RawShimClient client_;
};

// The baseline: our client speaks the protocol well enough that rejections below mean
// something.
TEST_F(MalformedTest, ValidOpSucceeds) { EXPECT_EQ(SendOp(AllReduceFloat(16, 0)), 0); }

TEST_F(MalformedTest, GarbageBytes) {
  std::mt19937 gen(7);
  std::vector<unsigned char> junk(4096);
  for (auto& b : junk) b = static_cast<unsigned char>(gen());
  client_.SendBytes(junk.data(), junk.size());
  ExpectRejectedAndDaemonServing(client_.ReadStatus(kReplyBound));
}

TEST_F(MalformedTest, BadMagic) {
  HelloRequest hello{};
  client_.SendFrame(kHello, &hello, sizeof hello, -1, 0xdeadbeef);
  ExpectRejectedAndDaemonServing(client_.ReadStatus(kReplyBound));
}

TEST_F(MalformedTest, BadVersion) {
  HelloRequest hello{};
  client_.SendFrame(kHello, &hello, sizeof hello, -1, kMagic, 0x7777);
  ExpectRejectedAndDaemonServing(client_.ReadStatus(kReplyBound));
}

// The framing is right but the Hello speaks another version of the collective protocol: a
// refusal naming both versions (the shim then falls back to the native NCCL).
TEST_F(MalformedTest, HelloOfAnotherProtocolVersion) {
  HelloRequest hello{};
  hello.version = kVersion + 1;
  client_.SendFrame(kHello, &hello, sizeof hello);
  const int status = client_.ReadStatus(kReplyBound);
  EXPECT_NE(client_.last_message().find("version " + std::to_string(kVersion + 1) + " is not supported"),
            std::string::npos)
      << client_.last_message();
  ExpectRejectedAndDaemonServing(status);
}

TEST_F(MalformedTest, HugeAnnouncedLength) {
  client_.SendFrame(kHello, nullptr, 0, 0xfffffff0u);
  ExpectRejectedAndDaemonServing(client_.ReadStatus(kReplyBound));
}

TEST_F(MalformedTest, TruncatedThenHalfClosed) {
  HelloRequest hello{};
  client_.SendFrame(kHello, &hello, 10, sizeof hello);
  client_.ShutdownWrite();
  ExpectRejectedAndDaemonServing(client_.ReadStatus(kReplyBound));
}

TEST_F(MalformedTest, UnknownMessageType) {
  ASSERT_EQ(client_.OpenSession(kShmSize, kReplyBound), "");
  client_.SendFrame(999, nullptr, 0);
  ExpectRejectedAndDaemonServing(client_.ReadStatus(kReplyBound));
}

TEST_F(MalformedTest, GroupAnnouncingMoreOpsThanSent) {
  ASSERT_EQ(client_.OpenSession(kShmSize, kReplyBound), "");
  OneOpGroup msg{{5, 0}, AllReduceFloat(16, 0)};
  client_.SendFrame(kGroup, &msg, sizeof msg);
  ExpectRejectedAndDaemonServing(client_.ReadStatus(kReplyBound));
}

TEST_F(MalformedTest, TooManyOps) {
  ASSERT_EQ(client_.OpenSession(kShmSize, kReplyBound), "");
  GroupRequest g{0xffffffffu, 0};
  client_.SendFrame(kGroup, &g, sizeof g);
  ExpectRejectedAndDaemonServing(client_.ReadStatus(kReplyBound));
}

TEST_F(MalformedTest, CountBeyondSharedBuffer) { ExpectRejectedAndDaemonServing(SendOp(AllReduceFloat(kShmSize, 0))); }

TEST_F(MalformedTest, CountOverflowsByteSize) {
  // count * 4 wraps around 2^64 to a small number: a naive bounds check passes.
  ExpectRejectedAndDaemonServing(SendOp(AllReduceFloat((uint64_t{1} << 62) + 4, 0)));
}

TEST_F(MalformedTest, OffsetPlusSizeOverflows) {
  ExpectRejectedAndDaemonServing(SendOp(AllReduceFloat(16, ~uint64_t{0} - 8)));
}

TEST_F(MalformedTest, InvalidDatatype) {
  OpDesc op = AllReduceFloat(16, 0);
  op.dtype = 200;
  ExpectRejectedAndDaemonServing(SendOp(op));
}

TEST_F(MalformedTest, InvalidRedOp) {
  OpDesc op = AllReduceFloat(16, 0);
  op.redop = 77;
  ExpectRejectedAndDaemonServing(SendOp(op));
}

TEST_F(MalformedTest, InvalidOpKind) {
  OpDesc op = AllReduceFloat(16, 0);
  op.kind = 99;
  ExpectRejectedAndDaemonServing(SendOp(op));
}

TEST_F(MalformedTest, PeerOutOfRange) {
  OpDesc op = AllReduceFloat(16, 0);
  op.kind = kBroadcast;
  op.peer = 5;  // root of a 1-rank communicator can only be 0
  ExpectRejectedAndDaemonServing(SendOp(op));
}

TEST_F(MalformedTest, GroupBeforeSession) {
  OneOpGroup msg{{1, 0}, AllReduceFloat(16, 0)};
  client_.SendFrame(kGroup, &msg, sizeof msg);
  ExpectRejectedAndDaemonServing(client_.ReadStatus(kReplyBound));
}

// DeviceDrain: with a payload, or before the connection joined a communicator, refused;
// on a communicator that never ran on GPU buffers, answered at once.
TEST_F(MalformedTest, DeviceDrainRefusals) {
  ASSERT_EQ(client_.OpenSession(kShmSize, kReplyBound), "");
  uint32_t junk = 7;
  ASSERT_TRUE(client_.SendFrame(kDeviceDrain, &junk, sizeof junk));
  EXPECT_GT(client_.ReadStatus(kReplyBound), 0);
  ASSERT_TRUE(client_.SendFrame(kDeviceDrain, nullptr, 0));
  EXPECT_EQ(client_.ReadStatus(kReplyBound), 0) << client_.last_message();
  RawShimClient fresh;
  ASSERT_TRUE(fresh.Connect(cluster_->Socket(0)));
  HelloRequest hello{};
  hello.pid = static_cast<uint32_t>(::getpid());
  hello.version = kVersion;
  ASSERT_TRUE(fresh.SendFrame(kHello, &hello, sizeof hello));
  ASSERT_EQ(fresh.ReadStatus(kReplyBound), 0) << fresh.last_message();
  ASSERT_TRUE(fresh.SendFrame(kDeviceDrain, nullptr, 0));
  EXPECT_GT(fresh.ReadStatus(kReplyBound), 0) << "DeviceDrain before CommInit";
  ExpectRejectedAndDaemonServing(1);
}

// AttachResult (the communicator's result area): before the connection joined a
// communicator, with a payload of the wrong size, and, whatever the size asked for, on a
// communicator with one rank on this host (no other rank to share a result with): each
// refused with an error, the connection still served. (Sizes against the limit:
// result_area_test and the shim_frames fuzzer.)
TEST_F(MalformedTest, AttachResultRefusals) {
  AttachResultRequest req{1 << 20};
  HelloRequest hello{};
  hello.pid = static_cast<uint32_t>(::getpid());
  hello.version = kVersion;
  ASSERT_TRUE(client_.SendFrame(kHello, &hello, sizeof hello));
  ASSERT_EQ(client_.ReadStatus(kReplyBound), 0) << client_.last_message();
  ASSERT_TRUE(client_.SendFrame(kAttachResult, &req, sizeof req));
  EXPECT_GT(client_.ReadStatus(kReplyBound), 0) << "AttachResult before CommInit";
  RawShimClient session;
  ASSERT_TRUE(session.Connect(cluster_->Socket(0)));
  ASSERT_EQ(session.OpenSession(kShmSize, kReplyBound), "");
  ASSERT_TRUE(session.SendFrame(kAttachResult, &req, sizeof req - 1));
  EXPECT_GT(session.ReadStatus(kReplyBound), 0) << "a short AttachResult";
  for (uint64_t bytes : {uint64_t{0}, uint64_t{1} << 62, uint64_t{1} << 20}) {
    req.min_bytes = bytes;
    ASSERT_TRUE(session.SendFrame(kAttachResult, &req, sizeof req));
    std::vector<uint8_t> reply;
    EXPECT_GT(session.ReadStatus(kReplyBound, &reply), 0) << bytes << " bytes on a one-rank communicator";
    EXPECT_NE(session.last_message().find("one rank on this host"), std::string::npos) << session.last_message();
  }
  // Still served.
  OneOpGroup msg{{1, 0}, AllReduceFloat(16, 0)};
  ASSERT_TRUE(session.SendFrame(kGroup, &msg, sizeof msg));
  EXPECT_EQ(session.ReadStatus(kReplyBound), 0) << session.last_message();
  ExpectRejectedAndDaemonServing(1);
}

// UniqueIdFromAddress (NCCL_COMM_ID) with a short payload, an address that is not
// NUL-terminated or empty, a host that is not a numeric IPv4 address: each refused, the
// connection still served; the well-formed request then gets its id.
TEST_F(MalformedTest, UniqueIdFromAddressRefusals) {
  ASSERT_EQ(client_.OpenSession(kShmSize, kReplyBound), "");
  UniqueIdFromAddressRequest req{};
  ASSERT_TRUE(client_.SendFrame(kUniqueIdFromAddress, &req, sizeof req - 1));
  EXPECT_GT(client_.ReadStatus(kReplyBound), 0);
  ASSERT_TRUE(client_.SendFrame(kUniqueIdFromAddress, &req, sizeof req));  // empty address
  EXPECT_GT(client_.ReadStatus(kReplyBound), 0);
  memset(req.comm_id, 'x', sizeof req.comm_id);  // no terminator
  CopyCString(req.root_ip, "10.231.16.1");
  ASSERT_TRUE(client_.SendFrame(kUniqueIdFromAddress, &req, sizeof req));
  EXPECT_GT(client_.ReadStatus(kReplyBound), 0);
  CopyCString(req.comm_id, "10.231.16.1:29500");
  for (const char* host : {"", "host-name", "::1", "10.231.16.1:7650", "999.1.1.1"}) {
    CopyCString(req.root_ip, host);
    ASSERT_TRUE(client_.SendFrame(kUniqueIdFromAddress, &req, sizeof req));
    EXPECT_GT(client_.ReadStatus(kReplyBound), 0) << "root_ip \"" << host << "\"";
  }
  CopyCString(req.root_ip, "10.231.16.1");
  ASSERT_TRUE(client_.SendFrame(kUniqueIdFromAddress, &req, sizeof req));
  EXPECT_EQ(client_.ReadStatus(kReplyBound), 0);
  ExpectRejectedAndDaemonServing(1);
}

// DeriveIdFromParent: a parent id whose key is not its secret's (a forged or altered id),
// a short payload, no root: each refused; the session's own id then derives a child, the
// same one DeriveId on the session's communicator derives.
TEST_F(MalformedTest, DeriveIdFromParentRefusals) {
  ASSERT_EQ(client_.OpenSession(kShmSize, kReplyBound), "");
  DeriveIdFromParentRequest req{};
  memcpy(req.parent_id, client_.comm_id(), sizeof req.parent_id);
  req.generation = 5;
  req.color = 2;
  CopyCString(req.root, "10.231.16.1:7650");
  ASSERT_TRUE(client_.SendFrame(kDeriveIdFromParent, &req, sizeof req - 1));
  EXPECT_GT(client_.ReadStatus(kReplyBound), 0);
  DeriveIdFromParentRequest no_root = req;
  memset(no_root.root, 0, sizeof no_root.root);
  ASSERT_TRUE(client_.SendFrame(kDeriveIdFromParent, &no_root, sizeof no_root));
  EXPECT_GT(client_.ReadStatus(kReplyBound), 0);
  DeriveIdFromParentRequest forged = req;
  forged.parent_id[8] ^= 1;  // the key (bytes 8..15 of the id) no longer matches the secret
  ASSERT_TRUE(client_.SendFrame(kDeriveIdFromParent, &forged, sizeof forged));
  EXPECT_GT(client_.ReadStatus(kReplyBound), 0);
  EXPECT_NE(client_.last_message().find("does not match its secret"), std::string::npos) << client_.last_message();

  std::vector<uint8_t> from_parent, from_session;
  ASSERT_TRUE(client_.SendFrame(kDeriveIdFromParent, &req, sizeof req));
  ASSERT_EQ(client_.ReadStatus(kReplyBound, &from_parent), 0) << client_.last_message();
  DeriveIdRequest derive{req.generation, req.color, {}};
  CopyCString(derive.root, req.root);
  ASSERT_TRUE(client_.SendFrame(kDeriveId, &derive, sizeof derive));
  ASSERT_EQ(client_.ReadStatus(kReplyBound, &from_session), 0) << client_.last_message();
  EXPECT_EQ(from_parent, from_session);
  ExpectRejectedAndDaemonServing(1);
}

// Host regions (shim protocol): a region the client attaches, then ops whose refs lie.
class RegionSession {
 public:
  // A sealed memfd of `bytes`, or an unsealed one.
  static int Memfd(size_t bytes, bool sealed) {
    int fd = memfd_create("malformed-region", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0 || ftruncate(fd, static_cast<off_t>(bytes)) != 0) return -1;
    if (sealed && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) != 0) return -1;
    return fd;
  }
};

struct RegionGroup {
  GroupRequest g;
  OpDesc op;
  RegionOpRef ref;
};

constexpr size_t kRegionBytes = 1 << 16;

TEST_F(MalformedTest, HostRegionAttachRefusals) {
  ASSERT_EQ(client_.OpenSession(kShmSize, kReplyBound), "");
  AttachRegionRequest req{7, kRegionBytes};
  // No descriptor; an unsealed memfd; a size beyond the file; id 0.
  ASSERT_TRUE(client_.SendFrame(kAttachRegion, &req, sizeof req));
  EXPECT_GT(client_.ReadStatus(kReplyBound), 0);
  int unsealed = RegionSession::Memfd(kRegionBytes, false);
  ASSERT_TRUE(client_.SendFrame(kAttachRegion, &req, sizeof req, -1, kMagic, kVersion, unsealed));
  EXPECT_GT(client_.ReadStatus(kReplyBound), 0) << "an unsealed region was attached";
  close(unsealed);
  int fd = RegionSession::Memfd(kRegionBytes, true);
  AttachRegionRequest too_big{7, kRegionBytes * 2};
  ASSERT_TRUE(client_.SendFrame(kAttachRegion, &too_big, sizeof too_big, -1, kMagic, kVersion, fd));
  EXPECT_GT(client_.ReadStatus(kReplyBound), 0) << "a region larger than its file was attached";
  AttachRegionRequest zero{0, kRegionBytes};
  ASSERT_TRUE(client_.SendFrame(kAttachRegion, &zero, sizeof zero, -1, kMagic, kVersion, fd));
  EXPECT_GT(client_.ReadStatus(kReplyBound), 0);
  ASSERT_TRUE(client_.SendFrame(kAttachRegion, &req, sizeof req, -1, kMagic, kVersion, fd));
  EXPECT_EQ(client_.ReadStatus(kReplyBound), 0) << client_.last_message();
  ASSERT_TRUE(client_.SendFrame(kAttachRegion, &req, sizeof req, -1, kMagic, kVersion, fd));
  EXPECT_GT(client_.ReadStatus(kReplyBound), 0) << "one id attached twice";
  close(fd);
  ReleaseRegionRequest unknown{8};
  ASSERT_TRUE(client_.SendFrame(kReleaseRegion, &unknown, sizeof unknown));
  EXPECT_GT(client_.ReadStatus(kReplyBound), 0);
  ExpectRejectedAndDaemonServing(1);
}

// The reply page (protocol/call_page.h): refused unless it is a sealed memfd of a page,
// and a program that scribbles on it (here: asks to be woken while it is not asleep) gets
// its reply and one kReplyInPage frame, no more.
TEST_F(MalformedTest, ReplyPageRefusalsAndAScribbledWaitingWord) {
  ASSERT_EQ(client_.OpenSession(kShmSize, kReplyBound), "");
  const uint8_t junk[8] = {};
  ASSERT_TRUE(client_.SendFrame(kAttachReplyPage, nullptr, 0));  // no descriptor
  EXPECT_GT(client_.ReadStatus(kReplyBound), 0);
  int page_fd = RegionSession::Memfd(kCallPageBytes, true);
  ASSERT_TRUE(client_.SendFrame(kAttachReplyPage, junk, sizeof junk, -1, kMagic, kVersion, page_fd));
  EXPECT_GT(client_.ReadStatus(kReplyBound), 0) << "a page with a payload was taken";
  int unsealed = RegionSession::Memfd(kCallPageBytes, false);
  ASSERT_TRUE(client_.SendFrame(kAttachReplyPage, nullptr, 0, -1, kMagic, kVersion, unsealed));
  EXPECT_GT(client_.ReadStatus(kReplyBound), 0) << "an unsealed page was taken";
  close(unsealed);
  int small = RegionSession::Memfd(100, true);
  ASSERT_TRUE(client_.SendFrame(kAttachReplyPage, nullptr, 0, -1, kMagic, kVersion, small));
  EXPECT_GT(client_.ReadStatus(kReplyBound), 0) << "a page smaller than kCallPageBytes was taken";
  close(small);
  ASSERT_TRUE(client_.SendFrame(kAttachReplyPage, nullptr, 0, -1, kMagic, kVersion, page_fd));
  ASSERT_EQ(client_.ReadStatus(kReplyBound), 0) << client_.last_message();
  void* mapped = mmap(nullptr, kCallPageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, page_fd, 0);
  ASSERT_NE(mapped, MAP_FAILED);
  CallPage* page = CallPageOf(static_cast<uint8_t*>(mapped));

  // A streamed group cannot have its reply in the page: refused, on the socket.
  OneOpGroup streamed{{1, kGroupStreamed | kGroupReplyInPage}, AllReduceFloat(16, 0)};
  ASSERT_TRUE(client_.SendFrame(kGroup, &streamed, sizeof streamed));
  EXPECT_GT(client_.ReadStatus(kReplyBound), 0);
  EXPECT_EQ(page->seq.load(), 0u);

  // A good group asking for the page, with `waiting` already set: the reply is in the page
  // (the first there) and one kReplyInPage frame says so.
  page->waiting.store(1);
  OneOpGroup group{{1, kGroupReplyInPage}, AllReduceFloat(16, 0)};
  ASSERT_TRUE(client_.SendFrame(kGroup, &group, sizeof group));
  FrameHeader header{};
  std::vector<uint8_t> payload;
  ASSERT_EQ(client_.Read(kReplyBound, &header, &payload), RawShimClient::Reply::kFrame);
  EXPECT_EQ(header.type, kReplyInPage);
  EXPECT_TRUE(payload.empty());
  ASSERT_EQ(page->seq.load(), 1u);
  EXPECT_EQ(page->waiting.load(), 0u);
  EXPECT_EQ(page->type, kGroupReply);
  ASSERT_EQ(page->len, sizeof(GroupReply));
  GroupReply reply;
  memcpy(&reply, page->payload, sizeof reply);
  EXPECT_EQ(reply.status.result, 0) << reply.status.message;
  // Not asleep this time: the reply is in the page, and nothing comes on the socket.
  ASSERT_TRUE(client_.SendFrame(kGroup, &group, sizeof group));
  const auto until = std::chrono::steady_clock::now() + kReplyBound;
  while (page->seq.load() != 2u && std::chrono::steady_clock::now() < until) usleep(100);
  EXPECT_EQ(page->seq.load(), 2u);
  EXPECT_EQ(client_.Read(std::chrono::milliseconds(200), &header, &payload), RawShimClient::Reply::kTimeout);
  munmap(mapped, kCallPageBytes);
  close(page_fd);
  ExpectRejectedAndDaemonServing(1);
}

// A client's two pages (protocol/call_page.h), attached and mapped; unmapped and closed
// at the end of the scope.
struct MappedPages {
  CallPage* reply = nullptr;
  CallPage* request = nullptr;
  int fds[2] = {-1, -1};
  ~MappedPages() {
    if (reply != nullptr) munmap(reply, kCallPageBytes);
    if (request != nullptr) munmap(request, kCallPageBytes);
    for (int fd : fds) {
      if (fd >= 0) close(fd);
    }
  }
};

// Attaches both pages on `client`'s session; "" or what went wrong.
std::string AttachPages(RawShimClient& client, MappedPages* pages) {
  const uint16_t types[2] = {kAttachReplyPage, kAttachRequestPage};
  CallPage** maps[2] = {&pages->reply, &pages->request};
  for (int i = 0; i < 2; ++i) {
    pages->fds[i] = RegionSession::Memfd(kCallPageBytes, true);
    if (!client.SendFrame(types[i], nullptr, 0, -1, kMagic, kVersion, pages->fds[i])) return "send";
    if (client.ReadStatus(kReplyBound) != 0) return "attach: " + client.last_message();
    void* mapped = mmap(nullptr, kCallPageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, pages->fds[i], 0);
    if (mapped == MAP_FAILED) return "mmap";
    *maps[i] = CallPageOf(static_cast<uint8_t*>(mapped));
  }
  return "";
}

// Puts request `seq` in the request page as a program would, with a kRequestInPage frame
// whether or not the daemon asked for one (a frame that finds nothing new is ignored).
// `len` is what the page announces; `bytes` of `payload` are written (at most the page's).
bool PutRequest(RawShimClient& client, CallPage* page, uint32_t seq, uint16_t type, const void* payload, size_t bytes,
                uint32_t len) {
  page->type = type;
  page->len = len;
  if (bytes > 0) memcpy(page->payload, payload, std::min(bytes, kCallPagePayloadBytes));
  page->seq.store(seq);
  return client.SendFrame(kRequestInPage, nullptr, 0);
}

// Waits for reply `seq` in the reply page; its status, or -2 if it did not come.
int ReplyInPageStatus(CallPage* page, uint32_t seq) {
  const auto until = std::chrono::steady_clock::now() + kReplyBound;
  while (page->seq.load() != seq && std::chrono::steady_clock::now() < until) usleep(100);
  if (page->seq.load() != seq || page->len < sizeof(WireStatus)) return -2;
  WireStatus status;
  memcpy(&status, page->payload, sizeof status);
  return status.result;
}

// The request page: refused before the reply page and unless it is a sealed memfd of a
// page; requests there served in order, stray wake frames ignored; a request out of
// sequence, of another type, without kGroupReplyInPage or longer than the page, and a wake
// frame with a payload, each end that connection and no other.
TEST_F(MalformedTest, RequestPageRefusalsAndScribbles) {
  ASSERT_EQ(client_.OpenSession(kShmSize, kReplyBound), "");
  int early = RegionSession::Memfd(kCallPageBytes, true);
  ASSERT_TRUE(client_.SendFrame(kAttachRequestPage, nullptr, 0, -1, kMagic, kVersion, early));
  EXPECT_GT(client_.ReadStatus(kReplyBound), 0) << "a request page before the reply page was taken";
  close(early);
  MappedPages pages;
  ASSERT_EQ(AttachPages(client_, &pages), "");
  ASSERT_TRUE(client_.SendFrame(kAttachRequestPage, nullptr, 0));  // no descriptor
  EXPECT_GT(client_.ReadStatus(kReplyBound), 0);
  // (A failed attach may have let the page go: attach it again.)
  ASSERT_TRUE(client_.SendFrame(kAttachRequestPage, nullptr, 0, -1, kMagic, kVersion, pages.fds[1]));
  ASSERT_EQ(client_.ReadStatus(kReplyBound), 0) << client_.last_message();
  int unsealed = RegionSession::Memfd(kCallPageBytes, false);
  ASSERT_TRUE(client_.SendFrame(kAttachRequestPage, nullptr, 0, -1, kMagic, kVersion, unsealed));
  EXPECT_GT(client_.ReadStatus(kReplyBound), 0) << "an unsealed page was taken";
  close(unsealed);
  ASSERT_TRUE(client_.SendFrame(kAttachRequestPage, nullptr, 0, -1, kMagic, kVersion, pages.fds[1]));
  ASSERT_EQ(client_.ReadStatus(kReplyBound), 0) << client_.last_message();

  // Requests in the page, their replies in the reply page; stray wake frames between them.
  OneOpGroup group{{1, kGroupReplyInPage}, AllReduceFloat(16, 0)};
  for (uint32_t n = 1; n <= 3; ++n) {
    ASSERT_TRUE(PutRequest(client_, pages.request, n, kGroup, &group, sizeof group, sizeof group));
    EXPECT_EQ(ReplyInPageStatus(pages.reply, n), 0) << "request " << n;
    ASSERT_TRUE(client_.SendFrame(kRequestInPage, nullptr, 0));
  }
  // A request on the socket still works alongside, its reply on the socket.
  OneOpGroup on_socket{{1, 0}, AllReduceFloat(16, 0)};
  ASSERT_TRUE(client_.SendFrame(kGroup, &on_socket, sizeof on_socket));
  EXPECT_EQ(client_.ReadStatus(kReplyBound), 0) << client_.last_message();
  // Out of sequence: the connection ends. (The daemon may end it while it spins on the
  // page, before the wake frame is sent: that send may fail.)
  (void)PutRequest(client_, pages.request, 9, kGroup, &group, sizeof group, sizeof group);
  ExpectRejectedAndDaemonServing(client_.ReadStatus(kReplyBound));

  // Each of the others on a connection of its own.
  OneOpGroup no_flag{{1, 0}, AllReduceFloat(16, 0)};
  OneOpGroup streamed{{1, kGroupStreamed | kGroupReplyInPage}, AllReduceFloat(16, 0)};
  const struct {
    const char* what;
    uint16_t type;
    const void* payload;
    size_t bytes;
    uint32_t len;
  } bad[] = {
      {"a CommDestroy in the page", kCommDestroy, nullptr, 0, 0},
      {"a Group without kGroupReplyInPage", kGroup, &no_flag, sizeof no_flag, sizeof no_flag},
      {"a streamed Group", kGroup, &streamed, sizeof streamed, sizeof streamed},
      {"a Group longer than the page", kGroup, &group, sizeof group, static_cast<uint32_t>(kCallPageBytes)},
      {"a Group shorter than its head", kGroup, &group, 4, 4},
  };
  for (const auto& b : bad) {
    RawShimClient c;
    ASSERT_TRUE(c.Connect(cluster_->Socket(0)));
    ASSERT_EQ(c.OpenSession(kShmSize, kReplyBound), "");
    MappedPages p;
    ASSERT_EQ(AttachPages(c, &p), "");
    (void)PutRequest(c, p.request, 1, b.type, b.payload, b.bytes, b.len);  // the wake frame may find it closed
    const int status = c.ReadStatus(kReplyBound);
    EXPECT_TRUE(status == -1 || status > 0) << b.what << ": " << status;
    EXPECT_EQ(p.reply->seq.load(), 0u) << b.what << " was served";
  }
  RawShimClient c;
  ASSERT_TRUE(c.Connect(cluster_->Socket(0)));
  ASSERT_EQ(c.OpenSession(kShmSize, kReplyBound), "");
  MappedPages p;
  ASSERT_EQ(AttachPages(c, &p), "");
  const uint8_t junk[4] = {1, 2, 3, 4};
  ASSERT_TRUE(c.SendFrame(kRequestInPage, junk, sizeof junk));
  FrameHeader header{};
  std::vector<uint8_t> payload;
  EXPECT_EQ(c.Read(kReplyBound, &header, &payload), RawShimClient::Reply::kClosed) << "a wake frame with a payload";
  ExpectRejectedAndDaemonServing(1);
}

TEST_F(MalformedTest, HostRegionOpsOutsideTheirRegionsOrNotServedThere) {
  ASSERT_EQ(client_.OpenSession(kShmSize, kReplyBound), "");
  int fd = RegionSession::Memfd(kRegionBytes, true);
  AttachRegionRequest req{3, kRegionBytes};
  ASSERT_TRUE(client_.SendFrame(kAttachRegion, &req, sizeof req, -1, kMagic, kVersion, fd));
  ASSERT_EQ(client_.ReadStatus(kReplyBound), 0) << client_.last_message();
  close(fd);
  auto send = [&](OpDesc op, RegionOpRef ref, uint32_t flags = kGroupRegions) {
    op.flags = kOpRegion;
    RegionGroup msg{{1, flags}, op, ref};
    EXPECT_TRUE(client_.SendFrame(kGroup, &msg, sizeof msg));
    return client_.ReadStatus(kReplyBound);
  };
  const uint64_t n = kRegionBytes / 8;  // floats: input and output halves of the region
  // The baseline: in bounds, out of place, succeeds.
  EXPECT_EQ(send(AllReduceFloat(n, 0), RegionOpRef{3, 0, 3, kRegionBytes / 2}), 0) << client_.last_message();
  EXPECT_GT(send(AllReduceFloat(n, 0), RegionOpRef{3, 0, 3, kRegionBytes / 2 + 4}), 0) << "output past the end";
  EXPECT_GT(send(AllReduceFloat(n, 0), RegionOpRef{3, UINT64_MAX - 8, 3, 0}), 0) << "offset overflow";
  EXPECT_GT(send(AllReduceFloat(n, 0), RegionOpRef{9, 0, 3, 0}), 0) << "a region never attached";
  EXPECT_GT(send(AllReduceFloat(n, 0), RegionOpRef{0, 0, 3, 0}), 0) << "no input";
  EXPECT_GT(send(AllReduceFloat(UINT64_MAX / 2, 0), RegionOpRef{3, 0, 3, 0}), 0) << "count overflow";
  OpDesc reduce = AllReduceFloat(n, 0);  // rank 0, the root, of one
  reduce.kind = kReduce;
  EXPECT_EQ(send(reduce, RegionOpRef{3, 0, 3, 0}), 0) << "Reduce in regions, in place: " << client_.last_message();
  EXPECT_GT(send(reduce, RegionOpRef{3, 0, 0, 0}), 0) << "the root's Reduce without its output";
  OpDesc scatter = AllReduceFloat(n, 0);
  scatter.kind = kReduceScatter;
  EXPECT_EQ(send(scatter, RegionOpRef{3, 0, 3, kRegionBytes / 2}), 0) << "ReduceScatter in regions: " << client_.last_message();
  EXPECT_GT(send(scatter, RegionOpRef{3, kRegionBytes / 2 + 4, 3, 0}), 0) << "ReduceScatter input past the end";
  OpDesc premul = AllReduceFloat(n, 0);
  premul.redop = kRedOpPreMulSum;
  EXPECT_GT(send(premul, RegionOpRef{3, 0, 3, 0}), 0) << "PreMulSum in regions";
  EXPECT_GT(send(AllReduceFloat(n, 0), RegionOpRef{3, 0, 3, 0}, 0), 0) << "kOpRegion without the group's refs";
  EXPECT_GT(send(AllReduceFloat(n, 0), RegionOpRef{3, 0, 3, 0}, kGroupRegions | kGroupStreamed), 0) << "streamed";
  // Released: its ops are refused, and the daemon serves on.
  ReleaseRegionRequest rel{3};
  ASSERT_TRUE(client_.SendFrame(kReleaseRegion, &rel, sizeof rel));
  EXPECT_EQ(client_.ReadStatus(kReplyBound), 0);
  EXPECT_GT(send(AllReduceFloat(n, 0), RegionOpRef{3, 0, 3, kRegionBytes / 2}), 0) << "a released region";
  ExpectRejectedAndDaemonServing(1);
}

// Last (gtest runs a file's tests in order): after all the abuse, real programs still work.
// A program holding a communicator's id may send CommInit for it again. A rank another
// connection holds (or one the communicator placed on another host) is refused: the second
// connection would otherwise share that rank's queue (see its collectives' data) or, for a
// rank not on this host, index past the per-rank state. The holder goes on.
TEST_F(MalformedTest, ARankAnotherConnectionHoldsIsRefused) {
  ASSERT_EQ(client_.OpenSession(kShmSize, kReplyBound), "");
  RawShimClient intruder;
  ASSERT_TRUE(intruder.Connect(cluster_->Socket(0)));
  const std::string err = intruder.OpenSession(kShmSize, kReplyBound, client_.comm_id());
  EXPECT_NE(err.find("CommInit answered"), std::string::npos) << err;
  EXPECT_NE(err.find("held by another connection"), std::string::npos) << err;
  OneOpGroup msg{{1, 0}, AllReduceFloat(16, 0)};
  ASSERT_TRUE(client_.SendFrame(kGroup, &msg, sizeof msg));
  EXPECT_EQ(client_.ReadStatus(kReplyBound), 0) << client_.last_message();
  EXPECT_TRUE(cluster_->DaemonAlive(0)) << cluster_->Describe();
}

TEST_F(MalformedTest, ZZRealProgramStillRuns) {
  for (int h = 0; h < 2; ++h) EXPECT_TRUE(cluster_->DaemonAlive(h)) << cluster_->Describe();
  auto procs = LaunchCollCheck(*cluster_,
                               Ranks(2, {"--types", "float,int8,bfloat16", "--ops", "sum,min", "--sizes", "0,7,1000"}));
  std::string failure = WaitCollCheck(*cluster_, procs, std::chrono::seconds(180));
  EXPECT_TRUE(failure.empty()) << failure;
}

}  // namespace
}  // namespace conduit::it
