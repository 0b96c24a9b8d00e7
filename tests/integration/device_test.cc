// The device-buffer messages of the shim protocol against a real conduitd. On a host
// without a GPU (CI) the daemon must say so plainly and refuse device work with a clear
// error while serving everything else; on a GPU host it must report its GPUs. Malformed
// device requests are refused and never take the daemon down either way.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>

#include "integration_env.h"
#include "raw_shim_client.h"

namespace conduit::it {
namespace {

using namespace shimproto;

class DeviceProtocolTest : public ClusterSuiteTest<DeviceProtocolTest> {
 public:
  static ClusterConfig Config() {
    ClusterConfig c;
    c.prefix = "dv";
    c.subnet = "10.231.28";
    c.hosts = 1;
    c.timeout_ms = kDaemonTimeoutMs;
    return c;
  }

 protected:
  void SetUp() override {
    ClusterSuiteTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_TRUE(client_.Connect(cluster_->Socket(0)));
    ASSERT_EQ(client_.OpenSession(kShmSize, kReplyBound), "");
  }
  // What DeviceInfo says, from a fresh connection.
  static DeviceInfoReply Info(std::vector<uint8_t>* payload) {
    RawShimClient c;
    EXPECT_TRUE(c.Connect(cluster_->Socket(0)));
    EXPECT_EQ(c.OpenSession(kShmSize, kReplyBound), "");
    EXPECT_TRUE(c.SendFrame(kDeviceInfo, nullptr, 0));
    EXPECT_EQ(c.ReadStatus(kReplyBound, payload), 0) << c.last_message();
    DeviceInfoReply info{};
    EXPECT_GE(payload->size(), sizeof(info));
    if (payload->size() >= sizeof(info)) memcpy(&info, payload->data(), sizeof(info));
    return info;
  }
  // The error must be an ncclResult_t the shim hands to the program, and the daemon must
  // keep serving this and other connections.
  void ExpectRefused(int status, const char* what) {
    EXPECT_GT(status, 0) << what << ": want an error reply, got " << status;
    EXPECT_TRUE(cluster_->DaemonAlive(0)) << cluster_->Describe();
    RawShimClient other;
    ASSERT_TRUE(other.Connect(cluster_->Socket(0)));
    EXPECT_EQ(other.OpenSession(kShmSize, kReplyBound), "") << "daemon stopped serving after " << what;
  }
  // A host-memory group of one float AllReduce of 16 elements at offset 4096 of the segment.
  static OneOpGroup HostGroup(uint8_t op_flags) {
    OneOpGroup msg{{1, 0}, AllReduceFloat(16, 4096)};
    msg.op.flags = op_flags;
    return msg;
  }
  // Sends HostGroup(op_flags): the daemon must refuse it with ncclInvalidArgument, a message
  // that says `reason`, and go on serving.
  void ExpectHostGroupRefused(uint8_t op_flags, const char* reason, const char* what) {
    OneOpGroup msg = HostGroup(op_flags);
    ASSERT_TRUE(client_.SendFrame(kGroup, &msg, sizeof msg));
    int st = client_.ReadStatus(kReplyBound);
    EXPECT_EQ(st, ncclInvalidArgument) << client_.last_message();
    EXPECT_NE(client_.last_message().find(reason), std::string::npos) << client_.last_message();
    ExpectRefused(st, what);
  }
  // A device group of one AllReduce on registered buffer 7, with a zeroed DeviceGroupHeader,
  // or DeviceAsyncHeader when `flags` has kGroupAsync.
  std::vector<uint8_t> DeviceGroup(uint32_t flags, uint8_t op_flags, size_t extra_bytes = 0) {
    GroupRequest g{1, flags};
    OpDesc op{};
    op.kind = kAllReduce;
    op.dtype = ncclFloat32;
    op.count = 16;
    op.flags = op_flags;
    const size_t header = (flags & kGroupAsync) ? sizeof(DeviceAsyncHeader) : sizeof(DeviceGroupHeader);
    DeviceOpRef ref{7, 0, 7, 0};
    std::vector<uint8_t> msg(sizeof g + sizeof op + header + sizeof ref + extra_bytes);
    uint8_t* p = msg.data();
    memcpy(p, &g, sizeof g);
    memcpy(p += sizeof g, &op, sizeof op);
    memcpy(p += sizeof op + header, &ref, sizeof ref);  // the header stays zero
    return msg;
  }

  RawShimClient client_;
};

TEST_F(DeviceProtocolTest, DeviceInfoReportsSupportOrWhyNot) {
  std::vector<uint8_t> payload;
  DeviceInfoReply info = Info(&payload);
  const std::string reason = FromCString(info.reason);
  if (info.supported == 0) {
    // A host without a usable GPU: the reason names what is missing.
    EXPECT_FALSE(reason.empty());
    EXPECT_EQ(info.ndevices, 0);
    EXPECT_EQ(info.features, 0u);
    EXPECT_EQ(payload.size(), sizeof(info));
    std::cout << "daemon without GPU support: " << reason << "\n";
  } else {
    EXPECT_GT(info.ndevices, 0);
    EXPECT_GT(info.driver_version, 0);
    EXPECT_EQ(payload.size(), sizeof(info) + info.ndevices * sizeof(DeviceUuid));
  }
}

TEST_F(DeviceProtocolTest, DeviceWorkWithoutGpuSupportIsRefusedClearly) {
  std::vector<uint8_t> payload;
  if (Info(&payload).supported != 0) GTEST_SKIP() << "this daemon has GPU support";
  RegisterBufferRequest reg{};
  reg.buffer_id = 7;
  reg.size = 4096;
  ASSERT_TRUE(client_.SendFrame(kRegisterBuffer, &reg, sizeof reg));
  int st = client_.ReadStatus(kReplyBound);
  EXPECT_EQ(st, ncclInvalidUsage);
  EXPECT_NE(client_.last_message().find("no GPU support"), std::string::npos) << client_.last_message();
  // A virtual-memory allocation's descriptor (here any file) meets the same answer.
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  ASSERT_TRUE(client_.SendFrame(kRegisterVmmBuffer, &reg, sizeof reg, -1, kMagic, kVersion, pipe_fds[0]));
  close(pipe_fds[0]);
  close(pipe_fds[1]);
  st = client_.ReadStatus(kReplyBound);
  EXPECT_EQ(st, ncclInvalidUsage);
  EXPECT_NE(client_.last_message().find("no GPU support"), std::string::npos) << client_.last_message();
  std::vector<uint8_t> group = DeviceGroup(kGroupDevice, kOpDevice);
  ASSERT_TRUE(client_.SendFrame(kGroup, group.data(), group.size()));
  st = client_.ReadStatus(kReplyBound);
  EXPECT_EQ(st, ncclInvalidUsage);
  EXPECT_NE(client_.last_message().find("no GPU support"), std::string::npos) << client_.last_message();
  // The same connection still runs host-memory work.
  OneOpGroup host = HostGroup(0);
  ASSERT_TRUE(client_.SendFrame(kGroup, &host, sizeof host));
  EXPECT_EQ(client_.ReadStatus(kReplyBound), 0) << client_.last_message();
  ExpectRefused(ncclInvalidUsage, "device requests");
}

TEST_F(DeviceProtocolTest, ReleasingAnUnknownBufferIsAnError) {
  ReleaseBufferRequest rel{12345};
  ASSERT_TRUE(client_.SendFrame(kReleaseBuffer, &rel, sizeof rel));
  ExpectRefused(client_.ReadStatus(kReplyBound), "ReleaseBuffer of an unknown id");
}

TEST_F(DeviceProtocolTest, MalformedRegisterBuffer) {
  uint8_t half[sizeof(RegisterBufferRequest) / 2] = {};
  ASSERT_TRUE(client_.SendFrame(kRegisterBuffer, half, sizeof half));
  ExpectRefused(client_.ReadStatus(kReplyBound), "a short RegisterBuffer");
}

TEST_F(DeviceProtocolTest, MalformedRegisterVmmBuffer) {
  uint8_t half[sizeof(RegisterBufferRequest) / 2] = {};
  ASSERT_TRUE(client_.SendFrame(kRegisterVmmBuffer, half, sizeof half));
  ExpectRefused(client_.ReadStatus(kReplyBound), "a short RegisterVmmBuffer");
  RegisterBufferRequest reg{};
  reg.buffer_id = 7;
  reg.size = 4096;
  ASSERT_TRUE(client_.SendFrame(kRegisterVmmBuffer, &reg, sizeof reg));
  ExpectRefused(client_.ReadStatus(kReplyBound), "a RegisterVmmBuffer without a descriptor");
  EXPECT_NE(client_.last_message().find("without the allocation's file descriptor"), std::string::npos)
      << client_.last_message();
}

TEST_F(DeviceProtocolTest, DeviceInfoWithAPayload) {
  uint32_t junk = 5;
  ASSERT_TRUE(client_.SendFrame(kDeviceInfo, &junk, sizeof junk));
  ExpectRefused(client_.ReadStatus(kReplyBound), "DeviceInfo with a payload");
}

TEST_F(DeviceProtocolTest, DeviceGroupOfTheWrongSize) {
  std::vector<uint8_t> group = DeviceGroup(kGroupDevice, kOpDevice, 8);
  ASSERT_TRUE(client_.SendFrame(kGroup, group.data(), group.size()));
  int st = client_.ReadStatus(kReplyBound);
  EXPECT_EQ(st, ncclInvalidArgument) << client_.last_message();
  ExpectRefused(st, "a device group with trailing bytes");
}

TEST_F(DeviceProtocolTest, StreamedDeviceGroup) {
  std::vector<uint8_t> group = DeviceGroup(kGroupDevice | kGroupStreamed, kOpDevice);
  ASSERT_TRUE(client_.SendFrame(kGroup, group.data(), group.size()));
  int st = client_.ReadStatus(kReplyBound);
  EXPECT_EQ(st, ncclInvalidArgument) << client_.last_message();
  ExpectRefused(st, "a streamed device group");
}

TEST_F(DeviceProtocolTest, DeviceOpOutsideADeviceGroup) {
  ExpectHostGroupRefused(kOpDevice, "device op outside", "a device op in a host group");
}

// The factor-in-device-memory flag belongs to device PreMulSum ops of asynchronous groups.
TEST_F(DeviceProtocolTest, ScalarWordOnAHostOp) {
  ExpectHostGroupRefused(kOpScalarWord, "kOpScalarWord", "kOpScalarWord on a host op");
}

// The in-place-root flag belongs to a staged broadcast's root only.
TEST_F(DeviceProtocolTest, OutputIsInputOnAnAllReduce) {
  ExpectHostGroupRefused(kOpOutputIsInput, "kOpOutputIsInput", "kOpOutputIsInput on an all-reduce");
}

// An asynchronous group on a daemon without GPU support is refused like any device group.
TEST_F(DeviceProtocolTest, AsyncGroupWithoutGpuSupport) {
  std::vector<uint8_t> payload;
  if (Info(&payload).supported != 0) GTEST_SKIP() << "this daemon has GPU support";
  std::vector<uint8_t> msg = DeviceGroup(kGroupDevice | kGroupAsync, kOpDevice);
  ASSERT_TRUE(client_.SendFrame(kGroup, msg.data(), msg.size()));
  int st = client_.ReadStatus(kReplyBound);
  EXPECT_EQ(st, ncclInvalidUsage) << client_.last_message();
  EXPECT_NE(client_.last_message().find("no GPU support"), std::string::npos) << client_.last_message();
  ExpectRefused(st, "an asynchronous device group without GPU support");
}

TEST_F(DeviceProtocolTest, UnknownOpFlags) {
  OneOpGroup msg = HostGroup(0x80);
  ASSERT_TRUE(client_.SendFrame(kGroup, &msg, sizeof msg));
  int st = client_.ReadStatus(kReplyBound);
  EXPECT_EQ(st, ncclInvalidArgument) << client_.last_message();
  ExpectRefused(st, "unknown op flags");
}

}  // namespace
}  // namespace conduit::it
