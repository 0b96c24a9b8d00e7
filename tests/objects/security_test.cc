// The object store against hostile local users, with real daemons in 2 network namespaces
// and real users (created here with useradd when absent) whose programs (hoplite-tool,
// objects_probe) run under setpriv: owners, group and world read, who may delete, per-uid
// quotas, immutability after PutDone (kernel seals), frames that stall, and admission by
// the executable the kernel names.
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "../integration/integration_env.h"
#include "common/frame.h"
#include "object_cluster.h"
#include "protocol/object_protocol.h"
#include "protocol/shim_protocol.h"

namespace conduit::it {
namespace {

namespace op = objproto;

struct User {
  std::string name;
  uint32_t uid = 0;
  uint32_t gid = 0;
};

constexpr char kGroup[] = "cdt-objs";
constexpr uint64_t kQuotaBytes = 8u << 20;
constexpr int kQuotaObjects = 6;
constexpr int kFrameTimeoutMs = 5000;  // objects::ProgramSession::kFrameTimeoutMs

// owner: primary group kGroup; member: kGroup as a supplementary group; stranger: neither;
// op: listed as --admin-uid.
User g_owner, g_member, g_stranger, g_op;
std::string g_users_error;

bool LookUp(const std::string& name, User* u) {
  passwd* pw = getpwnam(name.c_str());
  if (pw == nullptr) return false;
  *u = User{name, pw->pw_uid, pw->pw_gid};
  return true;
}

// Creates the user (and the shared group) unless it exists already.
bool EnsureUser(const std::string& name, std::vector<std::string> how, User* u) {
  if (LookUp(name, u)) return true;
  if (getgrnam(kGroup) == nullptr) {
    std::string out;
    if (RunCommand({"/usr/sbin/groupadd", "-f", kGroup}, &out) != 0) {
      g_users_error = "groupadd " + std::string(kGroup) + ": " + out;
      return false;
    }
  }
  std::vector<std::string> argv = {"/usr/sbin/useradd", "-M", "-s", "/usr/sbin/nologin"};
  argv.insert(argv.end(), how.begin(), how.end());
  argv.push_back(name);
  std::string out;
  int rc = RunCommand(argv, &out);
  if (!LookUp(name, u)) {
    g_users_error = "useradd " + name + " (rc " + std::to_string(rc) + "): " + out;
    return false;
  }
  return true;
}

bool EnsureUsers() {
  if (::access("/usr/sbin/useradd", X_OK) != 0 || ::access("/usr/bin/setpriv", X_OK) != 0) {
    g_users_error = "useradd or setpriv is not installed";
    return false;
  }
  return EnsureUser("cdt-obj-owner", {"-N", "-g", kGroup}, &g_owner) &&
         EnsureUser("cdt-obj-member", {"-U", "-G", kGroup}, &g_member) &&
         EnsureUser("cdt-obj-stranger", {"-U"}, &g_stranger) && EnsureUser("cdt-obj-op", {"-U"}, &g_op);
}

class ObjectsSecurity : public SharedObjectClusterTest<ObjectsSecurity> {
 public:
  static ObjectCluster* MakeCluster() {
    EnsureUsers();
    return new ObjectCluster("osc", "10.86.0", 2,
                             {"--object-quota-bytes", std::to_string(kQuotaBytes), "--object-quota-objects",
                              std::to_string(kQuotaObjects), "--admin-uid", std::to_string(g_op.uid), "--deny-exe",
                              "denied_probe"});
  }

 protected:
  void SetUp() override {
    SharedObjectClusterTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    if (!g_users_error.empty()) GTEST_SKIP() << g_users_error;
    // The test's own directory holds the program sockets (mode 0666) and must be reachable.
    ASSERT_EQ(chmod(oc_->cluster().dir().c_str(), 0755), 0);
  }

  struct Run {
    int rc = -1;
    std::string out;
  };
  // argv run as `u` (real and effective uid and gid, its supplementary groups) with
  // CONDUIT_SOCKET pointing at `host`'s daemon.
  static Run As(const User& u, int host, std::vector<std::string> argv) {
    std::vector<std::string> full = {"/usr/bin/setpriv", "--reuid=" + std::to_string(u.uid),
                                     "--regid=" + std::to_string(u.gid), "--init-groups", "/usr/bin/env",
                                     "CONDUIT_SOCKET=" + oc_->cluster().Socket(host)};
    full.insert(full.end(), argv.begin(), argv.end());
    Run r;
    r.rc = RunCommand(full, &r.out, std::chrono::seconds(30));
    return r;
  }
  // hoplite-tool ARGS as `u` on `host`.
  static Run Tool(const User& u, int host, std::vector<std::string> args) {
    args.insert(args.begin(), Cluster::ToolPath("hoplite-tool"));
    return As(u, host, std::move(args));
  }
  static Run Root(int host, std::vector<std::string> args) {
    args.insert(args.begin(), Cluster::ToolPath("hoplite-tool"));
    args.insert(args.begin(), "CONDUIT_SOCKET=" + oc_->cluster().Socket(host));
    args.insert(args.begin(), "/usr/bin/env");
    Run r;
    r.rc = RunCommand(args, &r.out, std::chrono::seconds(30));
    return r;
  }
  static std::string Uid(const User& u) { return std::to_string(u.uid); }
  // The fnv=... of an "ok put/get" line.
  static std::string FnvOf(const std::string& out) {
    size_t at = out.find("fnv=");
    return at == std::string::npos ? "" : out.substr(at + 4, 16);
  }
};

#define EXPECT_DENIED(run, what)                                                      \
  do {                                                                                \
    Run r_ = (run);                                                                   \
    EXPECT_EQ(r_.rc, 1) << r_.out;                                                    \
    EXPECT_NE(r_.out.find("error 11: "), std::string::npos) << r_.out;               \
    EXPECT_NE(r_.out.find(what), std::string::npos) << r_.out;                        \
  } while (0)

TEST_F(ObjectsSecurity, AnotherUserCannotReadWaitOnReduceFromOrDeleteAnOwnerOnlyObject) {
  Run put = Tool(g_owner, 0, {"put", "sec-own", "1048576", "--seed", "3"});
  ASSERT_EQ(put.rc, 0) << put.out;
  ASSERT_EQ(Tool(g_owner, 0, {"put", "sec-own-small", "1000"}).rc, 0);
  const std::string refused = "may not read object sec-own: it belongs to uid " + Uid(g_owner);
  for (int host : {0, 1}) {
    EXPECT_DENIED(Tool(g_stranger, host, {"get", "sec-own", "--timeout", "5000"}),
                  "uid " + Uid(g_stranger) + " " + refused);
    EXPECT_DENIED(Tool(g_stranger, host, {"get", "sec-own", "--readonly", "--timeout", "5000"}), refused);
    // Owner only: being in the owner's group is not enough.
    EXPECT_DENIED(Tool(g_member, host, {"get", "sec-own", "--timeout", "5000"}), refused);
  }
  // A small object travels inline through the directory: checked all the same.
  EXPECT_DENIED(Tool(g_stranger, 1, {"get", "sec-own-small", "--timeout", "5000"}), "sec-own-small");
  EXPECT_DENIED(Tool(g_stranger, 1, {"wait", "1", "sec-own", "--timeout", "5000"}), refused);
  EXPECT_DENIED(Tool(g_stranger, 1, {"reduce", "sec-stolen", "1", "sec-own", "--timeout", "5000"}),
                "Reduce into sec-stolen: uid " + Uid(g_stranger) + " " + refused);
  EXPECT_DENIED(Tool(g_stranger, 0, {"delete", "sec-own"}),
                "uid " + Uid(g_stranger) + " may not delete object sec-own: it belongs to uid " + Uid(g_owner));
  EXPECT_DENIED(Tool(g_stranger, 1, {"delete", "sec-own"}), "may not delete object sec-own");
  // Nothing was lost, and the refused Get made no copy on host 1.
  Run own = Tool(g_owner, 1, {"get", "sec-own"});
  ASSERT_EQ(own.rc, 0) << own.out;
  EXPECT_EQ(FnvOf(own.out), FnvOf(put.out));
  EXPECT_EQ(Tool(g_stranger, 1, {"get", "sec-stolen", "--timeout", "300"}).out.find("ok"), std::string::npos)
      << "the refused Reduce must not have created its target";
  // Operators read everything and delete anything; owners delete their own.
  Run op = Tool(g_op, 1, {"get", "sec-own", "--readonly"});
  EXPECT_EQ(op.rc, 0) << op.out;
  EXPECT_EQ(FnvOf(op.out), FnvOf(put.out));
  Run del = Root(1, {"delete", "sec-own"});
  EXPECT_EQ(del.rc, 0) << del.out;
  EXPECT_NE(Tool(g_owner, 0, {"get", "sec-own", "--timeout", "300"}).rc, 0) << "deleted by root";
  Run mine = Tool(g_owner, 1, {"delete", "sec-own-small"});
  EXPECT_EQ(mine.rc, 0) << mine.out;
}

TEST_F(ObjectsSecurity, GroupAndWorldReadAreTheCreatorsChoice) {
  Run grp = Tool(g_owner, 0, {"put", "sec-grp", "1048576", "--access", "group", "--seed", "5"});
  ASSERT_EQ(grp.rc, 0) << grp.out;
  Run member = Tool(g_member, 1, {"get", "sec-grp"});  // kGroup is only a supplementary group of hers
  EXPECT_EQ(member.rc, 0) << member.out;
  EXPECT_EQ(FnvOf(member.out), FnvOf(grp.out));
  EXPECT_DENIED(Tool(g_stranger, 1, {"get", "sec-grp", "--timeout", "5000"}), "readable by its owner and group");

  Run wrl = Tool(g_owner, 0, {"put", "sec-wrl", "1048576", "--access", "world", "--seed", "6"});
  ASSERT_EQ(wrl.rc, 0) << wrl.out;
  for (int host : {0, 1}) {
    Run get = Tool(g_stranger, host, {"get", "sec-wrl", "--readonly"});
    EXPECT_EQ(get.rc, 0) << get.out;
    EXPECT_EQ(FnvOf(get.out), FnvOf(wrl.out));
  }
  Run wait = Tool(g_stranger, 1, {"wait", "1", "sec-wrl", "--timeout", "5000"});
  EXPECT_EQ(wait.rc, 0) << wait.out;
  // The stranger reduces from it into a target of its own (owner only by default).
  Run red = Tool(g_stranger, 1, {"reduce", "sec-wrl-sum", "1", "sec-wrl", "--timeout", "10000"});
  EXPECT_EQ(red.rc, 0) << red.out;
  EXPECT_DENIED(Tool(g_owner, 0, {"get", "sec-wrl-sum", "--timeout", "5000"}),
                "may not read object sec-wrl-sum: it belongs to uid " + Uid(g_stranger));
  // Reading is not owning.
  EXPECT_DENIED(Tool(g_stranger, 0, {"delete", "sec-wrl"}), "may not delete object sec-wrl");
  EXPECT_EQ(Tool(g_op, 0, {"delete", "sec-wrl"}).rc, 0);  // --admin-uid: an operator
  EXPECT_EQ(Tool(g_stranger, 1, {"delete", "sec-wrl-sum"}).rc, 0);
  EXPECT_EQ(Root(0, {"delete", "sec-grp"}).rc, 0);
}

TEST_F(ObjectsSecurity, QuotaRefusesOneUserWithAClearErrorAndNotTheOthers) {
  ASSERT_EQ(Tool(g_stranger, 0, {"put", "q-big", std::to_string(6u << 20)}).rc, 0);
  Run over = Tool(g_stranger, 0, {"put", "q-more", std::to_string(3u << 20)});
  EXPECT_EQ(over.rc, 1) << over.out;
  EXPECT_NE(over.out.find("error 12: uid " + Uid(g_stranger) + " is over its quota on this daemon"), std::string::npos)
      << over.out;
  EXPECT_NE(over.out.find("1 of 6 objects and 6291456 of 8388608 bytes"), std::string::npos) << over.out;
  // Others are not affected (their own quota; root has none), nor is another daemon.
  EXPECT_EQ(Tool(g_member, 0, {"put", "q-member", std::to_string(3u << 20)}).rc, 0);
  EXPECT_EQ(Root(0, {"put", "q-root", std::to_string(3u << 20)}).rc, 0);
  EXPECT_EQ(Tool(g_stranger, 1, {"put", "q-elsewhere", std::to_string(3u << 20)}).rc, 0);
  // The number of objects is capped too, Reduce targets included.
  for (int i = 0; i < kQuotaObjects - 1; ++i) {
    Run small = Tool(g_stranger, 0, {"put", "q-s" + std::to_string(i), "1000"});
    ASSERT_EQ(small.rc, 0) << small.out;
  }
  Run count = Tool(g_stranger, 0, {"put", "q-one-more", "10"});
  EXPECT_NE(count.out.find("error 12:"), std::string::npos) << count.out;
  EXPECT_NE(count.out.find("one more object; it has 6 of 6 objects"), std::string::npos) << count.out;
  Run red = Tool(g_stranger, 0, {"reduce", "q-red", "1", "q-s0", "--dtype", "uint8"});
  EXPECT_NE(red.out.find("error 12:"), std::string::npos) << red.out;
  // Deleting gives the quota back.
  ASSERT_EQ(Tool(g_stranger, 0, {"delete", "q-big"}).rc, 0);
  Run again = Tool(g_stranger, 0, {"put", "q-more", std::to_string(3u << 20)});
  EXPECT_EQ(again.rc, 0) << again.out;
  EXPECT_NE(oc_->State(0).find("{\"uid\":" + Uid(g_stranger) + ",\"bytes\":" + std::to_string((3u << 20) + 5000) +
                               ",\"objects\":6}"),
            std::string::npos)
      << oc_->State(0);
  for (const char* id : {"q-more", "q-elsewhere", "q-s0", "q-s1", "q-s2", "q-s3", "q-s4"}) {
    EXPECT_EQ(Tool(g_stranger, 0, {"delete", id}).rc, 0) << id;
  }
  EXPECT_EQ(Tool(g_member, 0, {"delete", "q-member"}).rc, 0);
  EXPECT_EQ(Root(0, {"delete", "q-root"}).rc, 0);
}

TEST_F(ObjectsSecurity, ACreatorThatKeepsItsWritableMappingCannotCompleteItsPut) {
  const size_t size = 1u << 20;
  auto data = Pattern(size, 9);
  RawPutter keep;
  std::string error;
  ASSERT_TRUE(keep.Begin(oc_->cluster().Socket(0), "seal-keep", size, &error, op::kAccessWorld)) << error;
  keep.KeepMapping();
  ASSERT_TRUE(keep.Write(data, 0, size));
  EXPECT_FALSE(keep.Finish(&error));
  EXPECT_NE(error.find("the creator still maps the object writable"), std::string::npos) << error;
  // The object was removed: nobody reads bytes its creator could still change, and the id
  // is free again.
  EXPECT_TRUE(WaitFor([&] { return oc_->ReadyOf(0, "seal-keep") == -1; })) << oc_->State(0);
  std::vector<uint8_t> got;
  EXPECT_FALSE(oc_->Connect(1)->Get("seal-keep", &got, 500).ok());
  keep.mapping()[0] ^= 1;  // its mapping is its own business now
  // The id is free again once the directory has dropped every copy made from the abandoned
  // one: host 1's Get may have been handed it and be withdrawing its partial copy (a Put
  // meanwhile is refused as existing, as CI saw once), so the Put is retried until then.
  auto c0 = oc_->Connect(0);
  hoplite::Status put;
  EXPECT_TRUE(WaitFor([&] {
    put = c0->Put("seal-keep", data.data(), size);
    return put.ok();
  })) << put.ToString() << "\n" << oc_->State(0);
  ASSERT_TRUE(c0->Delete("seal-keep").ok());
}

TEST_F(ObjectsSecurity, CompleteObjectsAreSealedAndReadersGetNothingWritable) {
  const size_t size = 1u << 20;
  auto data = Pattern(size, 10);
  RawPutter put;
  std::string error;
  ASSERT_TRUE(put.Begin(oc_->cluster().Socket(0), "seal-ok", size, &error, op::kAccessWorld)) << error;
  ASSERT_TRUE(put.Write(data, 0, size / 2));
  // While the Put is in progress a stranger's copying Get hands it the memfd: it cannot
  // write through it, nor reopen it writable.
  Run partial = As(g_stranger, 0, {Cluster::BinPath("objects_probe"), "try-write", oc_->cluster().Socket(0), "seal-ok",
                                   "--copying"});
  EXPECT_EQ(partial.rc, 0) << partial.out;
  EXPECT_NE(partial.out.find("reopen-rw: Permission denied"), std::string::npos) << partial.out;
  ASSERT_TRUE(put.Write(data, size / 2, size));
  ASSERT_TRUE(put.Finish(&error)) << error;
  EXPECT_EQ(put.mapping(), nullptr);
  // The creator's own descriptor is sealed: no write, no new writable mapping, no resize.
  const int seals = fcntl(put.memfd(), F_GET_SEALS);
  EXPECT_EQ(seals & (F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL),
            F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)
      << seals;
  EXPECT_EQ(pwrite(put.memfd(), "x", 1, 0), -1);
  EXPECT_EQ(errno, EPERM);
  EXPECT_EQ(mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, put.memfd(), 0), MAP_FAILED);
  EXPECT_EQ(ftruncate(put.memfd(), 0), -1);
  // Readers: on the creator's host (the origin memfd) and on another (a fetched copy).
  for (int host : {0, 1}) {
    Run probe = As(g_stranger, host, {Cluster::BinPath("objects_probe"), "try-write", oc_->cluster().Socket(host),
                                      "seal-ok"});
    EXPECT_EQ(probe.rc, 0) << "host " << host << ":\n" << probe.out;
    // The origin has F_SEAL_WRITE (0x8) with SEAL, SHRINK, GROW; a fetched copy has been
    // F_SEAL_FUTURE_WRITE (0x10) since it was made.
    EXPECT_NE(probe.out.find(host == 0 ? "seals=0xf\n" : "seals=0x17\n"), std::string::npos) << probe.out;
  }
  std::vector<uint8_t> got;
  ASSERT_TRUE(oc_->Connect(1)->Get("seal-ok", &got, 5000).ok());
  EXPECT_EQ(Fnv(got), Fnv(data));
  ASSERT_TRUE(oc_->Connect(0)->Delete("seal-ok").ok());
}

// A raw connection to the program socket that has said Hello.
UniqueFd HelloConnection(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return UniqueFd();
  op::HelloRequest hello{};
  hello.version = op::kVersion;
  Frame reply;
  if (!WriteFrame(fd.get(), shimproto::kMagic, shimproto::kVersion, op::kHello, 0, &hello, sizeof(hello),
                  Deadline::AfterMs(5000))
           .ok() ||
      !ReadFrame(fd.get(), shimproto::kMagic, shimproto::kVersion, op::kMaxPayload, &reply, Deadline::AfterMs(5000))
           .ok()) {
    return UniqueFd();
  }
  return fd;
}

// Milliseconds until the daemon closes `fd` (-1: still open after timeout_ms).
long long MsUntilClosed(int fd, std::chrono::steady_clock::time_point since, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, timeout_ms) <= 0) return -1;
  char c;
  if (recv(fd, &c, 1, MSG_DONTWAIT) != 0) return -1;
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - since).count();
}

// A program that asks for a Put and hangs up before the reply (with the memfd) reaches it:
// its half-made copy, already listed, is abandoned at once, and the id is free for the next
// Put (it stayed taken, charged and unfinishable before).
TEST_F(ObjectsSecurity, APutWhoseReplyCannotBeSentIsAbandoned) {
  const size_t size = 1u << 20;
  const std::string id = "put-hangup";
  {
    UniqueFd fd = HelloConnection(oc_->cluster().Socket(0));
    ASSERT_TRUE(fd.valid());
    op::PutRequest put{};
    put.id.len = static_cast<uint8_t>(id.size());
    memcpy(put.id.bytes, id.data(), id.size());
    put.size = size;
    ASSERT_TRUE(WriteFrame(fd.get(), shimproto::kMagic, shimproto::kVersion, op::kPut, 0, &put, sizeof(put),
                           Deadline::AfterMs(5000))
                    .ok());
  }  // closed before the reply
  auto data = Pattern(size, 11);
  auto c0 = oc_->Connect(0);
  EXPECT_TRUE(WaitFor([&] { return c0->Put(id, data.data(), size).ok(); })) << oc_->State(0);
  std::vector<uint8_t> got;
  ASSERT_TRUE(oc_->Connect(1)->Get(id, &got, 5000).ok());
  EXPECT_EQ(Fnv(got), Fnv(data));
  ASSERT_TRUE(c0->Delete(id).ok());
}

TEST_F(ObjectsSecurity, AFrameThatStallsIsDroppedWithinTheBoundAndIdleProgramsAreKept) {
  const std::string sock = oc_->cluster().Socket(0);
  UniqueFd header_only = HelloConnection(sock), half_header = HelloConnection(sock), idle = HelloConnection(sock);
  ASSERT_TRUE(header_only.valid() && half_header.valid() && idle.valid());
  FrameHeader h{shimproto::kMagic, shimproto::kVersion, op::kGet, sizeof(op::GetRequest), 0};
  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(send(header_only.get(), &h, sizeof(h), 0), static_cast<ssize_t>(sizeof(h)));
  ASSERT_EQ(send(half_header.get(), &h, 8, 0), 8);
  const long long a = MsUntilClosed(header_only.get(), start, kFrameTimeoutMs + 3000);
  const long long b = MsUntilClosed(half_header.get(), start, kFrameTimeoutMs + 3000);
  EXPECT_GE(a, kFrameTimeoutMs - 100);
  EXPECT_LE(a, kFrameTimeoutMs + 2000);
  EXPECT_GE(b, kFrameTimeoutMs - 100);
  EXPECT_LE(b, kFrameTimeoutMs + 2000);
  // A program idle for longer than the bound between requests is still served.
  Frame reply;
  ASSERT_TRUE(WriteFrame(idle.get(), shimproto::kMagic, shimproto::kVersion, op::kState, 0, nullptr, 0,
                         Deadline::AfterMs(5000))
                  .ok());
  ASSERT_TRUE(ReadFrame(idle.get(), shimproto::kMagic, shimproto::kVersion, op::kMaxPayload, &reply,
                        Deadline::AfterMs(5000))
                  .ok());
  EXPECT_EQ(reply.header.type, op::kStateReply);
}

TEST_F(ObjectsSecurity, AdmissionGoesByTheExecutableTheKernelNamesNotTheHello) {
  // A copy of the probe under a denied name: claiming another name does not get it in...
  const std::string denied = oc_->cluster().dir() + "/denied_probe";
  std::string out;
  ASSERT_EQ(RunCommand({"/bin/cp", Cluster::BinPath("objects_probe"), denied}, &out), 0) << out;
  ASSERT_EQ(RunCommand({denied, "hello", oc_->cluster().Socket(0), "objects_probe"}, &out), 0) << out;
  EXPECT_NE(out.find("refused: 10 program 'denied_probe' is refused"), std::string::npos) << out;
  // ...and claiming the denied name does not keep an allowed program out.
  ASSERT_EQ(RunCommand({Cluster::BinPath("objects_probe"), "hello", oc_->cluster().Socket(0), "denied_probe"}, &out), 0)
      << out;
  EXPECT_NE(out.find("admitted"), std::string::npos) << out;
}

}  // namespace
}  // namespace conduit::it
