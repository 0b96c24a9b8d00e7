// The device path end to end on a host without a GPU: conduitd and the programs load the
// CUDA driver test double (tests/cuda_double: device memory, streams, interprocess events
// and kernels on host memory) in place of libcuda.so.1, so the shim's device path, the
// daemon's mapping of programs' allocations, its per-communicator stream and its combine
// kernels all run as on a GPU host. What it proves is the logic; a GPU run (tools/gpu-check,
// docs/gpu.md) proves the path.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <thread>

#include "admin_call.h"
#include "cuda/cuda_driver.h"
#include "integration_env.h"
#include "linger.h"
#include "raw_shim_client.h"

namespace conduit::it {
namespace {

using namespace shimproto;

const char kDouble[] = CONDUIT_CUDA_DOUBLE_PATH;

// Where the daemon's double writes its context references (the one-host suite's daemon).
const std::string& ContextLog() {
  static const std::string path = "/tmp/conduit-gd-contexts-" + std::to_string(getpid());
  return path;
}

// The daemon sees two GPUs; programs use the first.
std::vector<std::string> DaemonWithTheDouble(bool context_log = false) {
  std::vector<std::string> env = {"env", std::string("CONDUIT_CUDA_DRIVER=") + kDouble, std::string("CONDUIT_NVRTC=") + kDouble,
                                  "CONDUIT_CUDA_DOUBLE_DEVICES=2"};
  if (context_log) env.push_back("CONDUIT_CUDA_DOUBLE_CONTEXT_LOG=" + ContextLog());
  return env;
}

// The last reference count the log gives for each of the two GPUs.
std::vector<int> ContextReferences() {
  std::vector<int> refs(2, -1);
  std::ifstream log(ContextLog());
  for (int device, n; log >> device >> n;) {
    if (device >= 0 && device < 2) refs[device] = n;
  }
  return refs;
}

// The probe's environment: the double as the process's CUDA driver, and `extra`.
// A probe runs for seconds; one that hangs exits on its own after kProbeDeadline, naming
// the call it hangs in, well before ctest's limit for this whole executable (300 s) would
// kill it without a word.
constexpr std::chrono::seconds kProbeDeadline{40 * kSanitizerSlowdown};

std::vector<std::string> ProbeEnv(std::vector<std::string> extra = {}) {
  extra.insert(extra.begin(), std::string("CONDUIT_CUDA_DRIVER=") + kDouble);
  extra.insert(extra.begin(), "CONDUIT_PROBE_DEADLINE_S=" + std::to_string(kProbeDeadline.count()));
  return extra;
}

// How long a probe that lingers keeps its communicator after its collectives, at most, so
// that the test can read the daemon's trace of them before the communicator goes: the test
// ends it sooner through its release file (linger.h) once it has read what it needs.
constexpr std::chrono::milliseconds kLinger{20000 * kSanitizerSlowdown};

// `args`, and with a `release_file` the arguments that make the probe linger until that
// exists (at most kLinger).
std::vector<std::string> Lingering(std::vector<std::string> args, const std::string& release_file) {
  if (!release_file.empty()) {
    args.insert(args.end(), {"--linger-ms", std::to_string(kLinger.count()), "--release-file", release_file});
  }
  return args;
}

// `device_probe hosts`: two ranks of an `nranks`-rank communicator, global ranks from
// `base`, rendezvous through `id_file`; with a `release_file`, it lingers until that exists.
std::vector<std::string> HostsProbeArgs(int nranks, int base, const std::string& id_file,
                                        const std::string& release_file = "") {
  return Lingering({Cluster::BinPath("device_probe"), "hosts", "--nranks", std::to_string(nranks), "--base",
                    std::to_string(base), "--ranks", "2", "--id-file", id_file},
                   release_file);
}

// `device_probe p2p` with `ranks` ranks, lingering until `release_file` exists.
std::vector<std::string> P2pProbeArgs(int ranks, const std::string& release_file) {
  return Lingering({Cluster::BinPath("device_probe"), "p2p", "--ranks", std::to_string(ranks)}, release_file);
}

bool Passed(Subprocess& p) { return p.exit_code() == 0 && p.Output().find("device_probe: all passed") != std::string::npos; }

// What the GPU writes for one collective on device buffers (docs/design.md "Copies per
// payload byte", device buffers), as host `host`'s daemon traced it. `s`: one rank's
// buffer (a block for AllGather and ReduceScatter), L ranks here of R, on `hosts` hosts.
struct DeviceWrites {
  uint64_t device_writes = 0, device_to_host = 0, host_to_device = 0;
  bool operator==(const DeviceWrites& o) const {
    return device_writes == o.device_writes && device_to_host == o.device_to_host && host_to_device == o.host_to_device;
  }
  std::string Text() const {
    return "device " + std::to_string(device_writes) + ", to host " + std::to_string(device_to_host) +
           ", to device " + std::to_string(host_to_device);
  }
};

DeviceWrites ExpectedDeviceWrites(const std::string& op, uint64_t s, uint64_t L, uint64_t R, int hosts, bool root_here) {
  DeviceWrites w;
  if (hosts == 1) {  // kernels and copies from the inputs straight into the outputs
    w.device_writes = op == "Reduce" ? s : op == "AllGather" ? L * R * s : L * s;
    return w;
  }
  // This host's part into pinned memory once, the result from it into every output.
  if (op == "AllReduce") {
    w.device_to_host = s;
    w.host_to_device = L * s;
  } else if (op == "Reduce") {
    w.device_to_host = s;
    w.host_to_device = root_here ? s : 0;
  } else if (op == "ReduceScatter") {
    w.device_to_host = R * s;
    w.host_to_device = L * s;
  } else if (op == "AllGather") {
    w.device_to_host = L * s;
    w.host_to_device = L * R * s;
  } else if (op == "Broadcast") {
    w.device_to_host = root_here ? s : 0;
    w.host_to_device = L * s;
  }
  return w;
}

// Checks every collective in host `host`'s trace of its one communicator against the table;
// returns the ops seen.
std::set<std::string> CheckDeviceTrace(const Cluster& cluster, int host, int hosts) {
  std::set<std::string> seen;
  // Communicators of programs that just exited may take a moment to go.
  AdminAnswer comms;
  for (int tries = 0; tries < 50; ++tries) {
    comms = AdminCall(cluster, host, "GET", "/v1/communicators");
    if (Field(comms.body, "communicators").size() == 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const Json& list = Field(comms.body, "communicators");
  EXPECT_TRUE(list.is_array() && list.size() == 1) << comms.text;
  if (!list.is_array() || list.size() != 1) return seen;
  const Json& comm = list.items()[0];
  const std::string key = Field(comm, "key").as_string();
  const uint64_t R = static_cast<uint64_t>(Field(comm, "nranks").as_int());
  std::vector<int64_t> local = Ints(&Field(comm, "local_ranks"));
  AdminAnswer trace = AdminCall(cluster, host, "GET", "/v1/communicators/" + key + "/trace?limit=1000");
  EXPECT_EQ(trace.status, 200) << trace.text;
  for (const Json& e : Field(trace.body, "trace").items()) {
    const std::string op = Field(e, "op").as_string();
    const uint64_t s = static_cast<uint64_t>(Field(e, "bytes").as_int());
    const bool root_here = std::count(local.begin(), local.end(), Field(e, "root").as_int()) > 0;
    const Json& memory = Field(e, "memory");
    const DeviceWrites got{Counter(memory, "device_writes"), Counter(memory, "device_to_host"),
                           Counter(memory, "host_to_device")};
    const DeviceWrites want = ExpectedDeviceWrites(op, s, local.size(), R, hosts, root_here);
    EXPECT_EQ(got, want) << op << " of " << s << " bytes on host " << host << " (" << local.size() << " of " << R
                         << " ranks here): measured " << got.Text() << "; the table says " << want.Text();
    // No host-memory copies of the programs' buffers: only the network staging's own.
    EXPECT_EQ(Counter(memory, "program_copies"), 0u) << op;
    EXPECT_EQ(Counter(memory, "local_copies"), 0u) << op;
    seen.insert(op);
  }
  return seen;
}

const std::set<std::string> kEveryCollective = {"AllReduce", "Reduce", "ReduceScatter", "AllGather", "Broadcast"};

// One send or receive of the probes' rings and all-to-all blocks: device_probe's kCount floats.
constexpr uint64_t kProbeBlockBytes = 1001 * sizeof(float);

// What host `host`'s daemon counted of its one communicator's point-to-point bytes on
// device buffers, by path ("device_p2p" in GET /v1/communicators).
struct P2pBytes {
  uint64_t direct = 0, through_host = 0;
};
P2pBytes DeviceP2pBytes(const Cluster& cluster, int host) {
  AdminAnswer comms = AdminCall(cluster, host, "GET", "/v1/communicators");
  const Json& list = Field(comms.body, "communicators");
  EXPECT_TRUE(list.is_array() && list.size() == 1) << comms.text;
  if (!list.is_array() || list.size() != 1) return {};
  const Json& p2p = Field(list.items()[0], "device_p2p");
  return {Counter(p2p, "direct_bytes"), Counter(p2p, "through_host_bytes")};
}

class DeviceDoubleTest : public ClusterSuiteTest<DeviceDoubleTest> {
 public:
  static ClusterConfig Config() {
    ClusterConfig c;
    c.prefix = "gd";
    c.subnet = "10.231.52";
    c.hosts = 1;
    c.timeout_ms = 30000;
    unlink(ContextLog().c_str());
    c.daemon_wrapper = DaemonWithTheDouble(/*context_log=*/true);
    return c;
  }
  static void TearDownTestSuite() {
    ClusterSuiteTest::TearDownTestSuite();
    unlink(ContextLog().c_str());
  }

 public:
  Subprocess& RunProbe(std::vector<std::string> args, std::vector<std::string> env = {}) {
    args.insert(args.begin(), Cluster::BinPath("device_probe"));
    Subprocess& p = cluster_->Launch(0, "device_probe", args, ProbeEnv(std::move(env)));
    Finish(p);
    return p;
  }
 protected:
  // Waits for a probe; when it failed, the daemons' logs too (a daemon that died is why).
  void Finish(Subprocess& p) {
    EXPECT_TRUE(p.Wait(kProbeDeadline + std::chrono::seconds(10))) << "device_probe hung\n"
                                                                  << p.Output() << cluster_->Describe();
    if (p.exit_code() != 0) std::printf("device_probe failed; the cluster:\n%s", cluster_->Describe().c_str());
  }
};

TEST_F(DeviceDoubleTest, DaemonServesDeviceBuffers) {
  RawShimClient c;
  ASSERT_TRUE(c.Connect(cluster_->Socket(0)));
  ASSERT_EQ(c.OpenSession(kShmSize, kReplyBound), "");
  ASSERT_TRUE(c.SendFrame(kDeviceInfo, nullptr, 0));
  std::vector<uint8_t> payload;
  ASSERT_EQ(c.ReadStatus(kReplyBound, &payload), 0) << c.last_message();
  DeviceInfoReply info{};
  ASSERT_GE(payload.size(), sizeof(info));
  memcpy(&info, payload.data(), sizeof(info));
  EXPECT_EQ(info.supported, 1) << FromCString(info.reason);
  EXPECT_EQ(info.ndevices, 2);
  EXPECT_EQ(info.driver_version, 13000);
  EXPECT_EQ(info.features, kDeviceFeatureP2p | kDeviceFeatureSpans);
  // Both GPUs were checked at start (kernels loaded) in contexts given back after.
  EXPECT_EQ(ContextReferences(), (std::vector<int>{0, 0}));
}

// Three ranks of one process on one GPU, each on its own stream, every collective on
// device buffers while a slow kernel of the program is still filling the inputs.
TEST_F(DeviceDoubleTest, CollectivesOnDeviceBuffers) {
  Subprocess& p = RunProbe({"local", "--ranks", "3"});
  EXPECT_TRUE(Passed(p)) << p.Output();
  EXPECT_NE(p.Output().find("ok: ncclMemAlloc returns device memory"), std::string::npos) << p.Output();
  // The re-allocation case proves something only if an address did come back.
  EXPECT_EQ(p.Output().find(" 0 of 2 re-allocations came back"), std::string::npos) << p.Output();
  EXPECT_TRUE(cluster_->DaemonAlive(0)) << cluster_->Describe();
}

// After collectives on GPU 0 the daemon holds a context there, and none on GPU 1, which no
// program used (a context costs GPU memory, and takes an EXCLUSIVE_PROCESS GPU).
TEST_F(DeviceDoubleTest, ContextsOnlyOnGpusInUse) {
  EXPECT_EQ(ContextReferences(), (std::vector<int>{1, 0}));
}

// Two ranks on one host, every collective: what the GPU writes matches the table.
TEST_F(DeviceDoubleTest, DeviceWritesMatchTheTable) {
  const std::string id_file = cluster_->NewIdFile(), release = cluster_->NewReleaseFile();
  Subprocess& p = cluster_->Launch(0, "device_probe", HostsProbeArgs(2, 0, id_file, release), ProbeEnv());
  ASSERT_TRUE(Cluster::WaitForOutput(p, "lingering", kProbeDeadline)) << p.Output() << cluster_->Describe();
  EXPECT_EQ(CheckDeviceTrace(*cluster_, 0, 1), kEveryCollective);
  ReleaseLingerers(release);
  Finish(p);
  EXPECT_TRUE(Passed(p)) << p.Output();
}

TEST_F(DeviceDoubleTest, OneRankAlone) {
  Subprocess& p = RunProbe({"local", "--ranks", "1"});
  EXPECT_TRUE(Passed(p)) << p.Output();
}

// A driver that will not export the allocations (cuIpcGetMemHandle and
// cuMemExportToShareableHandle fail, as for memory CUDA cannot share): the shim stages the
// buffers through host memory on the caller's stream, and every result is the same.
TEST_F(DeviceDoubleTest, BuffersCudaWillNotExportAreStaged) {
  Subprocess& p = RunProbe({"local", "--ranks", "2"}, {"CONDUIT_CUDA_DOUBLE_FAIL=cuIpcGetMemHandle,cuMemExportToShareableHandle",
                                                       "CONDUIT_LOG_LEVEL=debug"});
  EXPECT_TRUE(Passed(p)) << p.Output();
  EXPECT_NE(p.Output().find("staging this allocation instead"), std::string::npos) << p.Output();
}

// Bytes the program copied into device memory from host memory (the double's copy log) in
// each "broadcast root K" section `device_probe broadcast-in-place` marked.
std::map<int, uint64_t> CopiesIntoDevicePerBroadcast(const std::string& log) {
  std::map<int, uint64_t> into_device;
  std::ifstream in(log);
  int section = -1;
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string first, to, from;
    words >> first;
    if (first == "broadcast") {
      std::string root_word;
      words >> root_word >> section;
      into_device[section] += 0;
    } else if (first == "checking") {
      section = -1;
    } else if (first == "copy" && section >= 0) {
      uint64_t bytes = 0;
      words >> to >> from >> bytes;
      if (to == "device" && from != "device") into_device[section] += bytes;
    }
  }
  return into_device;
}

// Broadcasts in place, 3 ranks, from each in turn, on device buffers the daemon maps
// (`staged` false) or on staged ones: what each broadcast cost the program in copies into
// device memory, per root. The probe checks every result.
std::map<int, uint64_t> BroadcastsInPlace(DeviceDoubleTest& t, bool staged, Subprocess** probe) {
  const std::string log = "/tmp/conduit-gd-copies-" + std::to_string(getpid());
  unlink(log.c_str());
  std::vector<std::string> env{"CONDUIT_CUDA_DOUBLE_COPY_LOG=" + log};
  if (staged) env.push_back("CONDUIT_CUDA_DOUBLE_FAIL=cuIpcGetMemHandle,cuMemExportToShareableHandle");
  *probe = &t.RunProbe({"broadcast-in-place", "--ranks", "3"}, env);
  std::map<int, uint64_t> copies = CopiesIntoDevicePerBroadcast(log);
  unlink(log.c_str());
  return copies;
}

constexpr uint64_t kProbeBufferBytes = 1001 * sizeof(float);  // the probe's kCount floats

// Staged: the root's buffer already holds the result, so its shim copies it into the
// segment and nothing back (kOpOutputIsInput); every other rank copies the result out once.
TEST_F(DeviceDoubleTest, StagedBroadcastInPlaceRootCopiesNothingBack) {
  Subprocess* p = nullptr;
  const std::map<int, uint64_t> copies = BroadcastsInPlace(*this, /*staged=*/true, &p);
  EXPECT_TRUE(Passed(*p)) << p->Output();
  ASSERT_EQ(copies.size(), 3u) << p->Output();
  for (const auto& [root, bytes] : copies) EXPECT_EQ(bytes, 2 * kProbeBufferBytes) << "broadcast from rank " << root;
}

// On buffers the daemon maps, the program copies nothing at all.
TEST_F(DeviceDoubleTest, DeviceBroadcastInPlaceCopiesNothing) {
  Subprocess* p = nullptr;
  const std::map<int, uint64_t> copies = BroadcastsInPlace(*this, /*staged=*/false, &p);
  EXPECT_TRUE(Passed(*p)) << p->Output();
  ASSERT_EQ(copies.size(), 3u) << p->Output();
  for (const auto& [root, bytes] : copies) EXPECT_EQ(bytes, 0u) << "broadcast from rank " << root;
}

// Interprocess events unavailable (cuIpcGetEventHandle fails): one warning, the buffers
// are staged, every result is right.
TEST_F(DeviceDoubleTest, BuffersAreStagedWhenEventsCannotBeShared) {
  Subprocess& p = RunProbe({"local", "--ranks", "2"}, {"CONDUIT_CUDA_DOUBLE_FAIL=cuIpcGetEventHandle"});
  EXPECT_TRUE(Passed(p)) << p.Output();
  const std::string out = p.Output();
  const size_t warning = out.find("CUDA will not share an event with conduitd here");
  EXPECT_NE(warning, std::string::npos) << out;
  EXPECT_EQ(out.find("CUDA will not share an event", warning + 1), std::string::npos) << "logged more than once\n" << out;
}

// The path that orders by interprocess events and returns once conduitd has run the group
// (proven on an H200; the fallback where stream memory operations are unavailable).
TEST_F(DeviceDoubleTest, EventOrderedPath) {
  Subprocess& p = RunProbe({"local", "--ranks", "3"}, {"CONDUIT_DEVICE_SYNC=events"});
  EXPECT_TRUE(Passed(p)) << p.Output();
}

// A driver without stream memory operations: one warning, then the event-ordered path.
TEST_F(DeviceDoubleTest, WithoutStreamMemoryOperations) {
  Subprocess& p = RunProbe({"local", "--ranks", "2"}, {"CONDUIT_CUDA_DOUBLE_FAIL=cuStreamWriteValue32"});
  EXPECT_TRUE(Passed(p)) << p.Output();
  EXPECT_NE(p.Output().find("cannot be ordered by stream memory operations"), std::string::npos) << p.Output();
}

// A daemon whose CUDA will not open the program's interprocess event (the event-ordered
// path): it runs nothing of the group and says so; the shim sends the group again staged
// and stages from then on, with one warning; every result is right.
// What a run of `device_probe local --ranks 2` on a one-host cluster printed, whose daemon's
// double refuses `entry` (CONDUIT_CUDA_DOUBLE_FAIL); the probe had `env` and passed.
struct RefusedRun {
  std::string probe;
  std::string daemon;
};
void RunWithDaemonRefusing(const char* entry, std::vector<std::string> env, RefusedRun* out) {
  ClusterConfig config = DeviceDoubleTest::Config();
  config.daemon_wrapper = DaemonWithTheDouble();
  config.daemon_wrapper.push_back(std::string("CONDUIT_CUDA_DOUBLE_FAIL=") + entry);
  Cluster cluster(config);
  CONDUIT_START_CLUSTER(cluster);
  Subprocess& p = cluster.Launch(0, "device_probe", {Cluster::BinPath("device_probe"), "local", "--ranks", "2"},
                                 ProbeEnv(std::move(env)));
  ASSERT_TRUE(p.Wait(kProbeDeadline + std::chrono::seconds(10))) << "device_probe hung\n" << cluster.Describe();
  EXPECT_TRUE(Passed(p)) << p.Output() << cluster.Describe();
  EXPECT_TRUE(cluster.DaemonAlive(0)) << cluster.Describe();
  out->probe = p.Output();
  out->daemon = cluster.daemon(0).Output();
}

TEST(DeviceDoubleEventsTest, EventsTheDaemonCannotOpenAreStaged) {
  CONDUIT_SKIP_UNLESS_CLUSTER();
  RefusedRun run;
  RunWithDaemonRefusing("cuIpcOpenEventHandle", {"CONDUIT_DEVICE_SYNC=events"}, &run);
  const std::string& out = run.probe;
  const size_t warning = out.find("conduitd: cuIpcOpenEventHandle of the program's ready event: "
                                  "CUDA_ERROR_NOT_SUPPORTED (operation not supported): CUDA will not share an event");
  EXPECT_NE(warning, std::string::npos) << out;
  EXPECT_EQ(out.find("CUDA will not share an event", out.find("CUDA will not share an event") + 1), std::string::npos)
      << "warned more than once\n" << out;
  EXPECT_NE(run.daemon.find("it stages them through host memory instead"), std::string::npos) << run.daemon;
}

// A live upgrade replaces the daemon, so each of these tests gets a cluster of its own,
// started fresh, instead of the suite's shared one.
class DeviceDoubleUpgradeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CONDUIT_SKIP_UNLESS_CLUSTER();
    ClusterConfig config = DeviceDoubleTest::Config();
    config.daemon_wrapper = DaemonWithTheDouble();
    cluster_ = std::make_unique<Cluster>(config);
    CONDUIT_START_CLUSTER(*cluster_);
  }
  std::unique_ptr<Cluster> cluster_;
};

// A live upgrade under a program running all-reduces on its device buffers through the
// asynchronous path: each daemon stops its sessions once their accepted groups have run
// and its stream has drained, hands over the registrations (the inputs' virtual-memory
// pages with their file descriptors and the spans across them, the outputs' IPC handles), and the new process
// maps the program's buffers again. The program sees no error and every result is right,
// through two upgrades.
TEST_F(DeviceDoubleUpgradeTest, DeviceBuffersMoveToTheNewDaemon) {
  Cluster& cluster = *cluster_;
  const std::string stop_file = cluster.dir() + "/stop-loop";
  Subprocess& p = cluster.Launch(0, "device_probe",
                                 {Cluster::BinPath("device_probe"), "loop", "--ranks", "2", "--inputs", "vmm",
                                  "--stop-file", stop_file},
                                 ProbeEnv());
  ASSERT_TRUE(Cluster::WaitForOutput(p, "loop running", std::chrono::seconds(20 * kSanitizerSlowdown)))
      << p.Output() << cluster.Describe();
  for (int upgrade = 0; upgrade < 2; ++upgrade) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    AdminAnswer a = AdminCall(cluster, 0, "POST", "/v1/upgrade", "{}");
    ASSERT_EQ(a.status, 200) << a.text << "\n" << cluster.Describe();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  { std::ofstream(stop_file) << "stop\n"; }
  ASSERT_TRUE(p.Wait(kProbeDeadline)) << "device_probe hung\n" << cluster.Describe();
  EXPECT_TRUE(Passed(p)) << p.Output() << cluster.Describe();
  const std::string log = cluster.daemon(0).Output();
  // Both of the program's connections moved, with their device buffers, twice.
  size_t moved = 0;
  for (size_t at = log.find("of 2 program sessions"); at != std::string::npos; at = log.find("of 2 program sessions", at + 1)) {
    moved += log.compare(at - 2, 2, "2 ") == 0;
  }
  EXPECT_EQ(moved, 2u) << log;
  EXPECT_EQ(AdminCall(cluster, 0, "GET", "/v1/status").status, 200) << "the new daemon does not answer";
}

// The point-to-point counts of a communicator (device to device, through host memory) go
// on in the daemon that takes over in a live upgrade rather than starting again at 0.
TEST_F(DeviceDoubleUpgradeTest, PointToPointCountsMoveToTheNewDaemon) {
  Cluster& cluster = *cluster_;
  const std::string release = cluster.NewReleaseFile();
  Subprocess& p = cluster.Launch(0, "device_probe", P2pProbeArgs(2, release), ProbeEnv());
  ASSERT_TRUE(Cluster::WaitForOutput(p, "lingering", kProbeDeadline)) << p.Output() << cluster.Describe();
  const P2pBytes before = DeviceP2pBytes(cluster, 0);
  EXPECT_GT(before.direct, 0u);
  EXPECT_GT(before.through_host, 0u);
  AdminAnswer a = AdminCall(cluster, 0, "POST", "/v1/upgrade", "{}");
  ASSERT_EQ(a.status, 200) << a.text << "\n" << cluster.Describe();
  const P2pBytes after = DeviceP2pBytes(cluster, 0);
  EXPECT_EQ(after.direct, before.direct);
  EXPECT_EQ(after.through_host, before.through_host);
  ReleaseLingerers(release);
  ASSERT_TRUE(p.Wait(kProbeDeadline)) << "device_probe hung\n" << cluster.Describe();
  EXPECT_TRUE(Passed(p)) << p.Output() << cluster.Describe();
}

// The shim's CUDA will not open conduitd's done event (the event-ordered path): the call
// that meets it waits on the host until conduitd's work has run (DeviceDrain) and later
// calls stage, with one warning; every result is right.
TEST_F(DeviceDoubleTest, DoneEventsTheShimCannotOpen) {
  Subprocess& p = RunProbe({"local", "--ranks", "2"}, {"CONDUIT_DEVICE_SYNC=events", "CONDUIT_CUDA_DOUBLE_FAIL=cuIpcOpenEventHandle"});
  EXPECT_TRUE(Passed(p)) << p.Output();
  const std::string out = p.Output();
  const size_t warning = out.find("cuIpcOpenEventHandle of conduitd's done event");
  EXPECT_NE(warning, std::string::npos) << out;
  EXPECT_EQ(out.find("CUDA will not share an event", out.find("CUDA will not share an event") + 1), std::string::npos)
      << "warned more than once\n" << out;
  EXPECT_TRUE(cluster_->DaemonAlive(0)) << cluster_->Describe();
}

// Point-to-point ops on device buffers (a ring in one group, all-to-all) go through
// conduitd asynchronously, as collectives do: the calls return before their inputs exist,
// every result is right; on the event-ordered path they are staged, with the same results.
// Between ranks of one daemon the bytes go device to device (the receiver's GPU copies
// from the sender's buffer), except a ring whose ranks receive into the buffer they send
// from, which goes through host memory.
TEST_F(DeviceDoubleTest, PointToPointOnDeviceBuffers) {
  const uint64_t n = 3;
  const std::string release = cluster_->NewReleaseFile();
  Subprocess& p = cluster_->Launch(0, "device_probe", P2pProbeArgs(static_cast<int>(n), release), ProbeEnv());
  ASSERT_TRUE(Cluster::WaitForOutput(p, "lingering", kProbeDeadline)) << p.Output() << cluster_->Describe();
  const P2pBytes bytes = DeviceP2pBytes(*cluster_, 0);
  ReleaseLingerers(release);
  // The ring twice (a block into every rank), the all-to-all (a block from every rank into
  // every rank); the ring in place.
  EXPECT_EQ(bytes.direct, (2 * n + n * n) * kProbeBlockBytes);
  EXPECT_EQ(bytes.through_host, n * kProbeBlockBytes);
  Finish(p);
  EXPECT_TRUE(Passed(p)) << p.Output();
  Subprocess& events = RunProbe({"p2p", "--ranks", "2"}, {"CONDUIT_DEVICE_SYNC=events"});
  EXPECT_TRUE(Passed(events)) << events.Output();
  EXPECT_TRUE(cluster_->DaemonAlive(0)) << cluster_->Describe();
}

// Two programs on one host, one on the asynchronous path and one on the event-ordered
// path (which stages its buffers, so conduitd sees host memory), in one communicator of 4
// ranks: the ring meets every pairing. 0->1: device to device; 1->2: a device send into a
// staged receive (the sender's GPU copies it out); 2->3: staged on both sides; 3->0: a
// staged send into a device receive, through pinned memory. Every result is right.
TEST_F(DeviceDoubleTest, PointToPointBetweenAsynchronousAndEventOrderedPrograms) {
  const std::string id_file = cluster_->NewIdFile(), release = cluster_->NewReleaseFile();
  Subprocess& async = cluster_->Launch(0, "device_probe", HostsProbeArgs(4, 0, id_file, release), ProbeEnv());
  Subprocess& events = cluster_->Launch(0, "device_probe", HostsProbeArgs(4, 2, id_file, release),
                                        ProbeEnv({"CONDUIT_DEVICE_SYNC=events"}));
  const bool lingering = Cluster::WaitForOutput(async, "lingering", kProbeDeadline) &&
                         Cluster::WaitForOutput(events, "lingering", kProbeDeadline);
  EXPECT_TRUE(lingering) << async.Output() << events.Output() << cluster_->Describe();
  if (lingering) {
    const P2pBytes bytes = DeviceP2pBytes(*cluster_, 0);
    EXPECT_EQ(bytes.direct, kProbeBlockBytes);            // into rank 1
    EXPECT_EQ(bytes.through_host, 2 * kProbeBlockBytes);  // into ranks 2 and 0
  }
  ReleaseLingerers(release);
  Finish(async);
  Finish(events);
  EXPECT_TRUE(Passed(async)) << async.Output();
  EXPECT_TRUE(Passed(events)) << events.Output();
  EXPECT_TRUE(cluster_->DaemonAlive(0)) << cluster_->Describe();
}

// Virtual-memory-managed allocations (PyTorch's expandable segments, ncclMemAlloc) are
// mapped in conduitd from the POSIX descriptors CUDA exports, a buffer across two of them
// as a span of both; what cannot go that way is staged, and every result is right.
// ncclMemAlloc's memory is open to every GPU that can reach it, as NCCL's.
TEST_F(DeviceDoubleTest, VirtualMemoryBuffersAreSharedByFileDescriptor) {
  // Two GPUs in the program too: ncclMemAlloc's memory must be open to the second.
  Subprocess& p = RunProbe({"vmm"}, {"NCCL_DEBUG=INFO", "NCCL_DEBUG_SUBSYS=REG", "CONDUIT_CUDA_DOUBLE_DEVICES=2"});
  EXPECT_TRUE(Passed(p)) << p.Output();
  const std::string out = p.Output();
  EXPECT_NE(out.find("(virtual memory, by file descriptor)"), std::string::npos) << out;
  EXPECT_NE(out.find("conduitd mapped a span of 2 device allocations"), std::string::npos) << out;
  // Only the buffer whose second page CUDA will not export is staged.
  EXPECT_NE(out.find("spans more than one allocation and an allocation after the first cannot be shared: staging"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("conduitd predates spans"), std::string::npos) << out;
  EXPECT_EQ(out.find("not another virtual-memory allocation"), std::string::npos) << out;
  EXPECT_TRUE(cluster_->DaemonAlive(0)) << cluster_->Describe();
}

// A daemon that cannot import the descriptor (cuMemImportFromShareableHandle refused):
// the program stages those buffers, every result is right.
TEST(DeviceDoubleImportTest, VirtualMemoryTheDaemonCannotImportIsStaged) {
  CONDUIT_SKIP_UNLESS_CLUSTER();
  RefusedRun run;
  RunWithDaemonRefusing("cuMemImportFromShareableHandle",
                        {"CONDUIT_CUDA_DOUBLE_FAIL=cuIpcGetMemHandle", "NCCL_DEBUG=INFO", "NCCL_DEBUG_SUBSYS=REG"}, &run);
  EXPECT_NE(run.probe.find("cuMemImportFromShareableHandle"), std::string::npos) << run.probe;
}

// ncclCommRegister and ncclCommWindowRegister map device buffers in conduitd at once.
TEST_F(DeviceDoubleTest, RegisteredBuffersAreMappedAhead) {
  Subprocess& p = RunProbe({"register"});
  EXPECT_TRUE(Passed(p)) << p.Output();
}

TEST_F(DeviceDoubleTest, FailureOfAnAcceptedGroupIsAnAsyncError) {
  Subprocess& p = RunProbe({"async-error"});
  EXPECT_TRUE(Passed(p)) << p.Output();
  EXPECT_TRUE(cluster_->DaemonAlive(0)) << cluster_->Describe();
}

TEST_F(DeviceDoubleTest, MappingsOfFreedBuffersAreDropped) {
  Subprocess& p = RunProbe({"release"});
  EXPECT_TRUE(Passed(p)) << p.Output();
}

TEST_F(DeviceDoubleTest, MappingsOfFreedBuffersAreDroppedWithNoCollectiveAfter) {
  Subprocess& p = RunProbe({"release-idle"});
  EXPECT_TRUE(Passed(p)) << p.Output();
}

TEST_F(DeviceDoubleTest, RevokeAndShrinkStopWorkInFlight) {
  Subprocess& p = RunProbe({"revoke"});
  EXPECT_TRUE(Passed(p)) << p.Output();
  EXPECT_TRUE(cluster_->DaemonAlive(0)) << cluster_->Describe();
}

// A program that exits with accepted groups whose inputs its GPU never computed: conduitd
// keeps serving (it must not run a kernel on mappings it closed, nor wait for good).
TEST_F(DeviceDoubleTest, ProgramVanishingWithGroupsInFlight) {
  Subprocess& p = RunProbe({"vanish"});
  EXPECT_NE(p.Output().find("vanishing with two accepted all-reduces"), std::string::npos) << p.Output();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the daemon tears its sessions down
  EXPECT_TRUE(cluster_->DaemonAlive(0)) << cluster_->Describe();
  Subprocess& after = RunProbe({"local", "--ranks", "1"});
  EXPECT_TRUE(Passed(after)) << after.Output();
  EXPECT_TRUE(cluster_->DaemonAlive(0)) << cluster_->Describe();
}

// conduitd dies (SIGKILL, as a crash or the OOM killer) while the program's stream waits on
// its done word for two accepted all-reduces: the shim releases the stream itself, reports
// ncclSystemError, and the communicator can be destroyed. The daemon is started again for
// the tests after this one.
TEST_F(DeviceDoubleTest, DaemonDyingWithGroupsInFlight) {
  Subprocess& p = cluster_->Launch(0, "device_probe", {Cluster::BinPath("device_probe"), "daemon-dies"}, ProbeEnv());
  const bool ready = Cluster::WaitForOutput(p, "waiting for conduitd to die", kProbeDeadline);
  cluster_->KillDaemon(0);
  EXPECT_TRUE(ready) << p.Output();
  Finish(p);
  EXPECT_TRUE(Passed(p)) << p.Output();
  std::string error;
  ASSERT_TRUE(cluster_->StartDaemon(0, &error)) << error;
}

TEST_F(DeviceDoubleTest, AbortWithDeviceWorkInFlight) {
  Subprocess& p = RunProbe({"abort"});
  EXPECT_TRUE(Passed(p)) << p.Output();
  EXPECT_TRUE(cluster_->DaemonAlive(0)) << cluster_->Describe();
}

// The test double loaded into this process (as a program would load the driver), cuInit
// done, and the UUID of its device 0 in *uuid: what a test needs to forge a program's
// registrations by hand. Null (with a gtest failure) when that fails.
template <typename F>
F Sym(void* handle, const char* name) {
  return reinterpret_cast<F>(dlsym(handle, name));
}

void* LoadDoubleHere(cuda::Uuid* uuid) {
  void* h = dlopen(kDouble, RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    ADD_FAILURE() << dlerror();
    return nullptr;
  }
  auto init = Sym<cuda::CUresult (*)(unsigned)>(h, "cuInit");
  auto uuid_of = Sym<cuda::CUresult (*)(cuda::Uuid*, cuda::CUdevice)>(h, "cuDeviceGetUuid_v2");
  if (init == nullptr || uuid_of == nullptr || init(0) != cuda::kSuccess || uuid_of(uuid, 0) != cuda::kSuccess) {
    ADD_FAILURE() << "the test double's cuInit or cuDeviceGetUuid_v2 failed";
    return nullptr;
  }
  return h;
}

// The double's virtual-memory granularity (as a GPU's, 2 MiB).
constexpr size_t kDoubleGranularity = size_t{2} << 20;

// A virtual-memory allocation of `size` bytes made in this process by the double loaded at
// `h` (LoadDoubleHere), exported as a POSIX descriptor (returned; -1 after a failure).
int ExportedAllocation(void* h, size_t size) {
  using namespace cuda;
  auto create = Sym<CUresult (*)(CUmemGenericAllocationHandle*, size_t, const MemAllocationProp*, unsigned long long)>(
      h, "cuMemCreate");
  auto export_fd =
      Sym<CUresult (*)(void*, CUmemGenericAllocationHandle, int, unsigned long long)>(h, "cuMemExportToShareableHandle");
  MemAllocationProp prop{};
  prop.type = kMemAllocationTypePinned;
  prop.requested_handle_types = kMemHandleTypePosixFileDescriptor;
  prop.location = {kMemLocationTypeDevice, 0};
  CUmemGenericAllocationHandle alloc = 0;
  int fd = -1;
  const bool ok = create != nullptr && export_fd != nullptr && create(&alloc, size, &prop, 0) == kSuccess &&
                  export_fd(&fd, alloc, kMemHandleTypePosixFileDescriptor, 0) == kSuccess;
  if (!ok) ADD_FAILURE() << "the double's cuMemCreate or cuMemExportToShareableHandle failed";
  return ok ? fd : -1;
}

// An ordinary allocation of `size` bytes made in this process by the double loaded at `h`
// (in GPU 0's primary context, made current), and its CUDA IPC handle. False after a failure.
bool IpcAllocation(void* h, size_t size, cuda::IpcMemHandle* handle) {
  using namespace cuda;
  auto retain = Sym<CUresult (*)(CUcontext*, CUdevice)>(h, "cuDevicePrimaryCtxRetain");
  auto set = Sym<CUresult (*)(CUcontext)>(h, "cuCtxSetCurrent");
  auto alloc = Sym<CUresult (*)(CUdeviceptr*, size_t)>(h, "cuMemAlloc_v2");
  auto get_handle = Sym<CUresult (*)(IpcMemHandle*, CUdeviceptr)>(h, "cuIpcGetMemHandle");
  CUcontext ctx = nullptr;
  CUdeviceptr p = 0;
  const bool ok = retain != nullptr && set != nullptr && alloc != nullptr && get_handle != nullptr &&
                  retain(&ctx, 0) == kSuccess && set(ctx) == kSuccess && alloc(&p, size) == kSuccess &&
                  get_handle(handle, p) == kSuccess;
  if (!ok) ADD_FAILURE() << "the double's allocation or cuIpcGetMemHandle failed";
  return ok;
}

// A program that claims its allocation is larger than it is must not get the daemon to
// read or write past the end of the mapping (on a GPU: a fault in the daemon's context,
// which would end GPU work for every program on the host).
TEST_F(DeviceDoubleTest, RegisterBufferLargerThanTheAllocationIsRefused) {
  using namespace cuda;
  Uuid uuid;
  void* h = LoadDoubleHere(&uuid);
  ASSERT_NE(h, nullptr);
  IpcMemHandle handle;
  ASSERT_TRUE(IpcAllocation(h, 65536, &handle));

  RawShimClient c;
  ASSERT_TRUE(c.Connect(cluster_->Socket(0)));
  ASSERT_EQ(c.OpenSession(kShmSize, kReplyBound), "");
  RegisterBufferRequest reg{};
  reg.buffer_id = 1;
  reg.size = 1ull << 30;
  memcpy(reg.device.bytes, uuid.bytes, sizeof(reg.device.bytes));
  memcpy(reg.ipc_handle, handle.reserved, sizeof(reg.ipc_handle));
  ASSERT_TRUE(c.SendFrame(kRegisterBuffer, &reg, sizeof reg));
  EXPECT_EQ(c.ReadStatus(kReplyBound), ncclInvalidArgument) << c.last_message();
  EXPECT_NE(c.last_message().find("65536"), std::string::npos) << c.last_message();
  // The true size is accepted, on the same connection.
  reg.size = 65536;
  ASSERT_TRUE(c.SendFrame(kRegisterBuffer, &reg, sizeof reg));
  EXPECT_EQ(c.ReadStatus(kReplyBound), 0) << c.last_message();
  EXPECT_TRUE(cluster_->DaemonAlive(0)) << cluster_->Describe();
}

// RegisterVmmBuffer from a hostile program: no descriptor, an IPC handle where none
// belongs, a descriptor that is no allocation, a size beyond the allocation or off the
// granularity. Each is refused with a reason, the daemon keeps serving, and the true
// registration is accepted on the same connection.
TEST_F(DeviceDoubleTest, RegisterVmmBufferChecksWhatItIsGiven) {
  using namespace cuda;
  Uuid uuid;
  void* h = LoadDoubleHere(&uuid);
  ASSERT_NE(h, nullptr);
  const size_t kChunk = kDoubleGranularity;
  const int fd = ExportedAllocation(h, kChunk);
  ASSERT_GE(fd, 0);
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);

  RawShimClient c;
  ASSERT_TRUE(c.Connect(cluster_->Socket(0)));
  ASSERT_EQ(c.OpenSession(kShmSize, kReplyBound), "");
  RegisterBufferRequest reg{};
  reg.buffer_id = 1;
  reg.size = kChunk;
  memcpy(reg.device.bytes, uuid.bytes, sizeof(reg.device.bytes));
  struct Case {
    const char* what;
    uint64_t size;
    int fd;
    bool handle;
    const char* says;
  };
  const Case cases[] = {
      {"no descriptor", kChunk, -1, false, "without the allocation's file descriptor"},
      {"an IPC handle too", kChunk, fd, true, "must be all zero"},
      {"a pipe", kChunk, pipe_fds[0], false, "cuMemImportFromShareableHandle"},
      {"1 GiB claimed", 1ull << 30, fd, false, "cuMemMap"},
      {"off the granularity", kChunk - 4096, fd, false, "granularity"},
  };
  for (const Case& k : cases) {
    reg.ipc_handle[0] = k.handle ? 7 : 0;
    reg.size = k.size;
    ASSERT_TRUE(c.SendFrame(kRegisterVmmBuffer, &reg, sizeof reg, -1, kMagic, kVersion, k.fd)) << k.what;
    EXPECT_NE(c.ReadStatus(kReplyBound), 0) << k.what;
    EXPECT_NE(c.last_message().find(k.says), std::string::npos) << k.what << ": " << c.last_message();
  }
  ASSERT_TRUE(c.SendFrame(kRegisterVmmBuffer, &reg, sizeof reg - 1, -1, kMagic, kVersion, fd));
  EXPECT_NE(c.ReadStatus(kReplyBound), 0) << "a short request";
  reg.ipc_handle[0] = 0;
  reg.size = kChunk;
  ASSERT_TRUE(c.SendFrame(kRegisterVmmBuffer, &reg, sizeof reg, -1, kMagic, kVersion, fd));
  EXPECT_EQ(c.ReadStatus(kReplyBound), 0) << c.last_message();
  close(fd);
  close(pipe_fds[0]);
  close(pipe_fds[1]);
  EXPECT_TRUE(cluster_->DaemonAlive(0)) << cluster_->Describe();
}

// RegisterSpan from a hostile program: a span id without its top bit, one page, pages it
// never registered or registered by IPC handle, a page count its payload does not carry, a
// span as a page, a descriptor, a span id reused for other pages, a buffer registered under
// a span's id. Each is refused with a reason and the daemon keeps serving; the true span is
// accepted (twice, as the same one) and goes when one of its pages is released.
TEST_F(DeviceDoubleTest, RegisterSpanChecksWhatItIsGiven) {
  using namespace cuda;
  Uuid uuid;
  void* h = LoadDoubleHere(&uuid);
  ASSERT_NE(h, nullptr);
  const size_t kChunk = kDoubleGranularity;

  RawShimClient c;
  ASSERT_TRUE(c.Connect(cluster_->Socket(0)));
  ASSERT_EQ(c.OpenSession(kShmSize, kReplyBound), "");
  RegisterBufferRequest reg{};
  reg.size = kChunk;
  memcpy(reg.device.bytes, uuid.bytes, sizeof(reg.device.bytes));
  int fds[2] = {-1, -1};
  for (uint64_t id = 1; id <= 2; ++id) {  // two virtual-memory pages, ids 1 and 2
    fds[id - 1] = ExportedAllocation(h, kChunk);
    ASSERT_GE(fds[id - 1], 0);
    reg.buffer_id = id;
    ASSERT_TRUE(c.SendFrame(kRegisterVmmBuffer, &reg, sizeof reg, -1, kMagic, kVersion, fds[id - 1]));
    ASSERT_EQ(c.ReadStatus(kReplyBound), 0) << c.last_message();
  }
  IpcMemHandle handle;  // id 3: shared by IPC handle
  ASSERT_TRUE(IpcAllocation(h, 65536, &handle));
  reg.buffer_id = 3;
  reg.size = 65536;
  memcpy(reg.ipc_handle, handle.reserved, sizeof(reg.ipc_handle));
  ASSERT_TRUE(c.SendFrame(kRegisterBuffer, &reg, sizeof reg));
  ASSERT_EQ(c.ReadStatus(kReplyBound), 0) << c.last_message();

  const uint64_t kSpan = kSpanIdBit | 1;
  auto span = [&](uint64_t id, std::vector<uint64_t> pages, uint32_t claimed = 0, int fd = -1) {
    RegisterSpanRequest head{};
    head.span_id = id;
    memcpy(head.device.bytes, uuid.bytes, sizeof(head.device.bytes));
    head.pages = claimed != 0 ? claimed : static_cast<uint32_t>(pages.size());
    std::vector<uint8_t> payload(sizeof(head) + pages.size() * sizeof(uint64_t));
    memcpy(payload.data(), &head, sizeof(head));
    if (!pages.empty()) memcpy(payload.data() + sizeof(head), pages.data(), pages.size() * sizeof(uint64_t));
    EXPECT_TRUE(c.SendFrame(kRegisterSpan, payload.data(), static_cast<uint32_t>(payload.size()), -1, kMagic, kVersion, fd));
    return c.ReadStatus(kReplyBound);
  };
  struct Case {
    const char* what;
    uint64_t id;
    std::vector<uint64_t> pages;
    uint32_t claimed;
    int fd;
    const char* says;
  };
  const Case cases[] = {
      {"no top bit", 7, {1, 2}, 0, -1, "top bit"},
      {"one page", kSpan, {1}, 0, -1, "2 to 4096"},
      {"a page never registered", kSpan, {1, 9}, 0, -1, "not a registered buffer"},
      {"a page shared by IPC handle", kSpan, {1, 3}, 0, -1, "not a virtual-memory registration"},
      {"three pages claimed, two sent", kSpan, {1, 2}, 3, -1, "carries"},
      {"a span as a page", kSpan, {1, kSpanIdBit | 2}, 0, -1, "names page id"},
      {"a descriptor", kSpan, {1, 2}, 0, fds[0], "carries no descriptor"},
  };
  for (const Case& k : cases) {
    EXPECT_NE(span(k.id, k.pages, k.claimed, k.fd), 0) << k.what;
    EXPECT_NE(c.last_message().find(k.says), std::string::npos) << k.what << ": " << c.last_message();
  }
  EXPECT_EQ(span(kSpan, {1, 2}), 0) << c.last_message();
  EXPECT_EQ(span(kSpan, {1, 2}), 0) << "the same span again: " << c.last_message();
  EXPECT_NE(span(kSpan, {2, 1}), 0) << "its id for other pages";
  EXPECT_NE(c.last_message().find("other pages"), std::string::npos) << c.last_message();
  reg.buffer_id = kSpan;
  ASSERT_TRUE(c.SendFrame(kRegisterBuffer, &reg, sizeof reg));
  EXPECT_NE(c.ReadStatus(kReplyBound), 0) << "a buffer under a span's id";
  EXPECT_NE(c.last_message().find("name spans"), std::string::npos) << c.last_message();
  // The pages of a connection's spans are capped (each is mapped again): with the span
  // above (2 pages), spans of 4096 pages (the two pages over and over, which CUDA allows)
  // and one of 4094 reach 16384; one more page is refused until a span is released.
  std::vector<uint64_t> many(kMaxSpanPages);
  for (size_t i = 0; i < many.size(); ++i) many[i] = 1 + i % 2;
  for (uint64_t id = 2; id <= 4; ++id) EXPECT_EQ(span(kSpanIdBit | id, many), 0) << c.last_message();
  EXPECT_EQ(span(kSpanIdBit | 5, std::vector<uint64_t>(many.begin(), many.end() - 2)), 0) << c.last_message();
  EXPECT_NE(span(kSpanIdBit | 6, {1, 2}), 0) << "spans past the cap";
  EXPECT_NE(c.last_message().find("the most one may map"), std::string::npos) << c.last_message();
  ReleaseBufferRequest rel{kSpanIdBit | 3};
  ASSERT_TRUE(c.SendFrame(kReleaseBuffer, &rel, sizeof rel));
  EXPECT_EQ(c.ReadStatus(kReplyBound), 0) << c.last_message();
  EXPECT_EQ(span(kSpanIdBit | 6, {1, 2}), 0) << "a span once another was released: " << c.last_message();
  // Releasing page 2 releases the spans: releasing one then finds nothing.
  rel.buffer_id = 2;
  ASSERT_TRUE(c.SendFrame(kReleaseBuffer, &rel, sizeof rel));
  EXPECT_EQ(c.ReadStatus(kReplyBound), 0) << c.last_message();
  rel.buffer_id = kSpan;
  ASSERT_TRUE(c.SendFrame(kReleaseBuffer, &rel, sizeof rel));
  EXPECT_NE(c.ReadStatus(kReplyBound), 0) << "the span outlived its page";
  EXPECT_NE(c.last_message().find("not registered"), std::string::npos) << c.last_message();
  for (int fd : fds) close(fd);
  EXPECT_TRUE(cluster_->DaemonAlive(0)) << cluster_->Describe();
}

// Two hosts, two ranks each: the daemons stage device buffers through pinned memory and
// carry them over TCP.
class DeviceDoubleHostsTest : public ClusterSuiteTest<DeviceDoubleHostsTest> {
 public:
  static ClusterConfig Config() {
    ClusterConfig c;
    c.prefix = "gh";
    c.subnet = "10.231.53";
    c.hosts = 2;
    c.timeout_ms = 30000;
    c.daemon_wrapper = DaemonWithTheDouble();
    return c;
  }

 protected:
  // Two ranks per host; every probe passes. Returns their output. With `while_lingering`
  // the probes keep their communicators until it has run (once both reached that point).
  std::string RunAcrossHosts(std::vector<std::string> env, const std::function<void()>& while_lingering = nullptr) {
    const std::string id_file = cluster_->NewIdFile();
    const std::string release = while_lingering ? cluster_->NewReleaseFile() : "";
    std::vector<Subprocess*> ranks;
    for (int host = 0; host < 2; ++host) {
      ranks.push_back(&cluster_->Launch(host, "device_probe", HostsProbeArgs(4, 2 * host, id_file, release),
                                        ProbeEnv(env)));
    }
    if (while_lingering) {
      bool lingering = true;
      for (Subprocess* p : ranks) {
        lingering = lingering && Cluster::WaitForOutput(*p, "lingering", kProbeDeadline);
        EXPECT_TRUE(lingering) << p->Output() << cluster_->Describe();
      }
      if (lingering) while_lingering();
      ReleaseLingerers(release);
    }
    std::string out;
    for (Subprocess* p : ranks) {
      EXPECT_TRUE(p->Wait(std::chrono::seconds(90 * kSanitizerSlowdown))) << p->Output() << cluster_->Describe();
      EXPECT_TRUE(Passed(*p)) << p->Output();
      out += p->Output();
    }
    // The call times, for the log.
    for (size_t at = out.find("returned after"); at != std::string::npos; at = out.find("returned after", at + 1)) {
      const size_t begin = out.rfind('\n', at) + 1;
      std::cout << out.substr(begin, out.find('\n', at) - begin) << "\n";
    }
    return out;
  }
};

// Calls return before their inputs are even computed; results correct on every rank.
TEST_F(DeviceDoubleHostsTest, CollectivesAcrossHosts) {
  const std::string out = RunAcrossHosts({});
  EXPECT_NE(out.find("ok: the calls returned before the GPU work they wait for"), std::string::npos) << out;
}

// Every collective's staging through pinned memory on both hosts matches the table.
TEST_F(DeviceDoubleHostsTest, StagingWritesMatchTheTable) {
  RunAcrossHosts({}, [] {
    for (int host = 0; host < 2; ++host) EXPECT_EQ(CheckDeviceTrace(*cluster_, host, 2), kEveryCollective);
  });
}

TEST_F(DeviceDoubleHostsTest, EventOrderedPathAcrossHosts) { RunAcrossHosts({"CONDUIT_DEVICE_SYNC=events"}); }

}  // namespace
}  // namespace conduit::it
