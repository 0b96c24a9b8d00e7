// Failures must surface as errors in bounded time, never as hangs: a rank or a daemon
// SIGKILLed mid-run makes the surviving ranks' calls fail within the daemon's timeout, and
// the daemons keep serving new communicators afterwards.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include "admin_call.h"
#include "coll_run.h"
#include "integration_env.h"
#include "linger.h"

namespace conduit::it {
namespace {

constexpr int kDaemonTimeoutMs = 3000;
// Detection may take one full timeout plus scheduling on a 2-core machine under load.
constexpr auto kErrorBound = std::chrono::milliseconds(kDaemonTimeoutMs + 7000);
constexpr auto kLoopingTimeout = std::chrono::seconds(60);

ClusterConfig FailureCluster() {
  ClusterConfig c;
  c.prefix = "fl";
  c.subnet = "10.231.15";
  c.hosts = 2;
  c.timeout_ms = kDaemonTimeoutMs;
  return c;
}

// The failure cluster with daemons that keep at most `cap` bytes of point-to-point sends
// waiting for receives not yet posted, and the given timeout.
ClusterConfig CappedCluster(uint64_t cap, int timeout_ms = kDaemonTimeoutMs) {
  ClusterConfig c = FailureCluster();
  c.timeout_ms = timeout_ms;
  c.daemon_args = {"--p2p-queue-bytes", std::to_string(cap)};
  return c;
}

const CollLaunch kLooping = Ranks(2, {"--expect-error", "--hold-ms", "20", "--max-seconds", "90"});

// A full, healthy run proving the daemons still serve new communicators.
void ExpectHealthyRun(Cluster& cluster) {
  auto procs = LaunchCollCheck(
      cluster, Ranks(2, {"--types", "float,int32,half", "--ops", "sum,max,premulsum", "--sizes", "0,1,1000"}));
  std::string failure = WaitCollCheck(cluster, procs, std::chrono::seconds(180));
  EXPECT_TRUE(failure.empty()) << failure;
}

void WaitAllLooping(Cluster& cluster, const std::vector<Subprocess*>& procs) {
  for (Subprocess* p : procs) {
    ASSERT_TRUE(Cluster::WaitForOutput(*p, "looping", kLoopingTimeout)) << "rank never completed an allreduce\n"
                                                                        << cluster.Describe();
  }
}

// Starts 2 ranks per host looping on allreduce and waits until all of them got going.
std::vector<Subprocess*> StartLooping(Cluster& cluster) {
  auto procs = LaunchCollCheck(cluster, kLooping);
  WaitAllLooping(cluster, procs);
  return procs;
}

// The survivor must exit 0 (it saw an error) within the bound after the kill.
void ExpectErrorInTime(Cluster& cluster, Subprocess& p, std::chrono::steady_clock::time_point killed_at,
                       const std::vector<std::string>& accepted) {
  ASSERT_TRUE(p.Wait(kErrorBound + std::chrono::seconds(30))) << "survivor hung\n" << cluster.Describe();
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(p.exit_time() - killed_at);
  EXPECT_EQ(p.exit_code(), 0) << cluster.Describe();
  EXPECT_LE(took.count(), kErrorBound.count()) << p.CommandLine() << " took " << took.count() << " ms to fail\n"
                                               << p.Output();
  std::string out = p.Output();
  bool named = false;
  for (const std::string& a : accepted) named = named || out.find("got " + a) != std::string::npos;
  EXPECT_TRUE(named) << p.CommandLine() << ": error is none of the accepted results\n" << out;
}

// Sends to another host that run ahead of their receives wait in the receiving daemon only
// up to --p2p-queue-bytes: here 1.5 MiB, and rank 0 sends rank 1 eight messages of 1 MiB
// that rank 1 receives only after 1.5 s. Over the cap the link waits (and the sender with
// it) instead of the daemon growing: every message arrives right, and the most the daemon
// kept at once is one message.
TEST(FailureTest, SendsAheadOfTheirReceivesWaitUnderTheCap) {
  CONDUIT_SKIP_UNLESS_CLUSTER();
  constexpr uint64_t kCap = 3 << 19, kMessage = 1 << 20;
  // The sender waits 1.5 s and more (sanitizers): well within the timeout.
  Cluster cluster(CappedCluster(kCap, 20000));
  CONDUIT_START_CLUSTER(cluster);
  const std::string release = cluster.NewReleaseFile();
  auto procs = LaunchCollCheck(cluster, Ranks(1, {"--colls", "backlog", "--types", "int8", "--sizes", "1MiB",
                                                   "--messages", "8", "--hold-ms", "1500", "--linger-ms", "30000",
                                                   "--release-file", release, "--verbose"}));
  ASSERT_TRUE(Cluster::WaitForOutput(*procs[1], "lingering", std::chrono::seconds(60 * kSanitizerSlowdown)))
      << procs[1]->Output() << cluster.Describe();
  AdminAnswer comms = AdminCall(cluster, 1, "GET", "/v1/communicators");
  const Json& list = Field(comms.body, "communicators");
  ASSERT_TRUE(list.is_array() && list.size() == 1) << comms.text;
  const Json& comm = list.items()[0];
  EXPECT_EQ(Counter(Field(comm, "options"), "p2p_queue_bytes"), kCap) << comms.text;
  const Json& waiting = Field(comm, "p2p_waiting");
  EXPECT_EQ(Counter(waiting, "bytes"), 0u) << comms.text;
  EXPECT_EQ(Counter(waiting, "peak_bytes"), kMessage + 64) << "more than one message waited: " << comms.text;
  ReleaseLingerers(release);
  std::string failure = WaitCollCheck(cluster, procs, std::chrono::seconds(60));
  EXPECT_TRUE(failure.empty()) << failure;
  EXPECT_NE(procs[1]->Output().find("ok rank 1: backlog type=int8 count=1048576 out-of-place message 7"),
            std::string::npos)
      << procs[1]->Output();
}

// A message whose receive is posted before it arrives is read straight into the
// receiving program's segment: it takes no memory of the daemon's (only its entry counts
// in p2p_waiting), even when it is larger than the cap, and arrives intact.
TEST(FailureTest, AMessageForAPostedReceiveTakesNoDaemonMemory) {
  CONDUIT_SKIP_UNLESS_CLUSTER();
  constexpr uint64_t kCap = 1 << 19;
  Cluster cluster(CappedCluster(kCap, 20000));
  CONDUIT_START_CLUSTER(cluster);
  const std::string release = cluster.NewReleaseFile();
  auto procs = LaunchCollCheck(cluster, Ranks(1, {"--colls", "backlog", "--types", "int8", "--sizes", "4MiB",
                                                   "--messages", "1", "--send-hold-ms", "1000", "--linger-ms", "30000",
                                                   "--release-file", release, "--verbose"}));
  ASSERT_TRUE(Cluster::WaitForOutput(*procs[1], "lingering", std::chrono::seconds(60 * kSanitizerSlowdown)))
      << procs[1]->Output() << cluster.Describe();
  AdminAnswer comms = AdminCall(cluster, 1, "GET", "/v1/communicators");
  const Json& list = Field(comms.body, "communicators");
  ASSERT_TRUE(list.is_array() && list.size() == 1) << comms.text;
  const Json& waiting = Field(list.items()[0], "p2p_waiting");
  EXPECT_EQ(Counter(waiting, "bytes"), 0u) << comms.text;
  EXPECT_EQ(Counter(waiting, "peak_bytes"), 64u) << "the message was kept in the daemon: " << comms.text;
  ReleaseLingerers(release);
  std::string failure = WaitCollCheck(cluster, procs, std::chrono::seconds(60));
  EXPECT_TRUE(failure.empty()) << failure;
  EXPECT_NE(procs[1]->Output().find("ok rank 1: backlog type=int8 count=4194304 out-of-place message 0"),
            std::string::npos)
      << procs[1]->Output();
}

// Grouped exchanges larger than the cap complete: with 2 ranks per host every rank sends
// 2 MiB to each rank of the other host and receives as much from each in one group (ring
// and all-pairs, then all-to-all), with the cap at 256 KiB. The messages of one link come in
// any order of the two senders, so a daemon that let in only what fits would hold one for
// a rank that waits for another behind it; the groups' posted receives let them all in
// (with that taken out, the ranks fail after half the timeout).
TEST(FailureTest, GroupedExchangesLargerThanTheCapComplete) {
  CONDUIT_SKIP_UNLESS_CLUSTER();
  Cluster cluster(CappedCluster(1 << 18, 20000));
  CONDUIT_START_CLUSTER(cluster);
  auto procs = LaunchCollCheck(cluster, Ranks(2, {"--colls", "sendrecv,alltoall", "--types", "int8", "--sizes",
                                                   "2MiB"}));
  std::string failure = WaitCollCheck(cluster, procs, std::chrono::seconds(120));
  EXPECT_TRUE(failure.empty()) << failure;
}

// A rank that sends to another host which never receives: messages that fit under the cap
// wait there, the next one neither fits nor has a receive posted, and after half the
// timeout the communicator fails on both hosts with the reason, in bounded time; the
// daemons serve the next program.
TEST(FailureTest, SendsNobodyReceivesFailWithTheReason) {
  CONDUIT_SKIP_UNLESS_CLUSTER();
  Cluster cluster(CappedCluster(1 << 20));
  CONDUIT_START_CLUSTER(cluster);
  const auto started = std::chrono::steady_clock::now();
  auto procs = LaunchCollCheck(cluster, Ranks(1, {"--colls", "backlog", "--types", "int8", "--sizes", "1MiB",
                                                   "--messages", "64", "--hold-ms", "15000"}));
  for (Subprocess* p : procs) {
    ASSERT_TRUE(p->Wait(std::chrono::seconds(60 * kSanitizerSlowdown))) << "rank hung\n" << cluster.Describe();
    EXPECT_EQ(p->exit_code(), 1) << p->Output();
    EXPECT_NE(p->Output().find("--p2p-queue-bytes"), std::string::npos) << p->Output();
  }
  // The sender failed well before the receiver's 15 s hold ended.
  const auto sender_took = std::chrono::duration_cast<std::chrono::milliseconds>(procs[0]->exit_time() - started);
  EXPECT_LT(sender_took.count(), kErrorBound.count() + 5000) << procs[0]->Output();
  EXPECT_TRUE(cluster.DaemonAlive(0) && cluster.DaemonAlive(1)) << cluster.Describe();
  ExpectHealthyRun(cluster);
}

// The receiving program destroys its communicator with sends still coming: its daemon's
// reader, waiting for room that no receive will make, lets go at once, so the destroy
// takes no part of the timeout; the sender fails.
TEST(FailureTest, DestroyWithSendsStillComingEndsAtOnce) {
  CONDUIT_SKIP_UNLESS_CLUSTER();
  Cluster cluster(CappedCluster(1 << 20, 60000));  // a reader would wait 30 s for room
  CONDUIT_START_CLUSTER(cluster);
  auto procs = LaunchCollCheck(cluster, Ranks(1, {"--colls", "backlog", "--types", "int8", "--sizes", "1MiB",
                                                   "--messages", "64", "--receives", "0", "--hold-ms", "1000"}));
  const auto started = std::chrono::steady_clock::now();
  for (Subprocess* p : procs) {
    ASSERT_TRUE(p->Wait(std::chrono::seconds(90))) << "rank hung\n" << cluster.Describe();
  }
  EXPECT_EQ(procs[1]->exit_code(), 0) << procs[1]->Output();
  EXPECT_EQ(procs[0]->exit_code(), 1) << procs[0]->Output();
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(procs[1]->exit_time() - started);
  EXPECT_LT(took.count(), 15000 * kSanitizerSlowdown) << procs[1]->Output();
  EXPECT_TRUE(cluster.DaemonAlive(0) && cluster.DaemonAlive(1)) << cluster.Describe();
}

TEST(FailureTest, KilledRankFailsThePeersAndDaemonsRecover) {
  CONDUIT_SKIP_UNLESS_CLUSTER();
  Cluster cluster(FailureCluster());
  CONDUIT_START_CLUSTER(cluster);
  auto procs = StartLooping(cluster);
  if (HasFatalFailure()) return;

  Subprocess* victim = procs.back();  // rank 3, on host 1
  victim->Kill(SIGKILL);
  auto killed_at = std::chrono::steady_clock::now();
  for (Subprocess* p : procs) {
    if (p != victim) ExpectErrorInTime(cluster, *p, killed_at, {"ncclRemoteError", "ncclSystemError"});
  }
  EXPECT_TRUE(cluster.DaemonAlive(0) && cluster.DaemonAlive(1)) << cluster.Describe();
  ExpectHealthyRun(cluster);
}

TEST(FailureTest, KilledDaemonFailsEveryRank) {
  CONDUIT_SKIP_UNLESS_CLUSTER();
  Cluster cluster(FailureCluster());
  CONDUIT_START_CLUSTER(cluster);
  auto procs = StartLooping(cluster);  // ranks 0,1 on host 0; 2,3 on host 1
  if (HasFatalFailure()) return;

  cluster.KillDaemon(1);
  auto killed_at = std::chrono::steady_clock::now();
  ExpectErrorInTime(cluster, *procs[0], killed_at, {"ncclRemoteError", "ncclSystemError"});
  ExpectErrorInTime(cluster, *procs[1], killed_at, {"ncclRemoteError", "ncclSystemError"});
  // Their own daemon is gone: the shim itself sees the socket die.
  ExpectErrorInTime(cluster, *procs[2], killed_at, {"ncclSystemError"});
  ExpectErrorInTime(cluster, *procs[3], killed_at, {"ncclSystemError"});
  EXPECT_TRUE(cluster.DaemonAlive(0)) << cluster.Describe();

  // A restarted daemon joins the surviving one for a new program.
  std::string error;
  ASSERT_TRUE(cluster.StartDaemon(1, &error)) << error;
  ExpectHealthyRun(cluster);
}

// SIGTERM is an orderly end (docs/configuration.md, "Stopping"): the ranks on the stopped
// daemon's host and on the other host all fail with its reason, not a dropped connection;
// the daemon removes its sockets, waits for its threads, and exits 0 within its grace
// period; a new daemon serves.
TEST(FailureTest, StoppedDaemonTellsEveryRankWhyAndExitsCleanly) {
  CONDUIT_SKIP_UNLESS_CLUSTER();
  Cluster cluster(FailureCluster());
  CONDUIT_START_CLUSTER(cluster);
  auto procs = StartLooping(cluster);  // ranks 0,1 on host 0; 2,3 on host 1
  if (HasFatalFailure()) return;

  Subprocess& daemon = cluster.daemon(1);
  daemon.Kill(SIGTERM);
  auto stopped_at = std::chrono::steady_clock::now();
  for (Subprocess* p : procs) {
    ExpectErrorInTime(cluster, *p, stopped_at, {"ncclSystemError", "ncclRemoteError"});
    EXPECT_NE(p->Output().find("is shutting down (Terminated)"), std::string::npos)
        << p->CommandLine() << ": the error does not give the daemon's reason\n" << p->Output();
  }
  // The default grace (2 s) plus the second for cut-off sessions, and a 2-core machine's slack.
  ASSERT_TRUE(daemon.Wait(std::chrono::seconds(10))) << "conduitd did not exit after SIGTERM\n" << cluster.Describe();
  EXPECT_EQ(daemon.exit_code(), 0) << cluster.Describe();
  // ... having waited for every thread that served a connection or ran a loop to end.
  EXPECT_NE(daemon.Output().find("stopped: every connection and loop thread ended"), std::string::npos)
      << daemon.Output();
  EXPECT_NE(access(cluster.Socket(1).c_str(), F_OK), 0) << "program socket left behind";
  EXPECT_NE(access(cluster.AdminSocket(1).c_str(), F_OK), 0) << "admin socket left behind";
  EXPECT_TRUE(cluster.DaemonAlive(0)) << cluster.Describe();

  std::string error;
  ASSERT_TRUE(cluster.StartDaemon(1, &error)) << error;
  ExpectHealthyRun(cluster);
}

// A frozen rank (SIGSTOP) keeps its sockets open, so only the daemon's timeout can notice:
// this is the path a SIGKILL, whose sockets close at once, never exercises.
TEST(FailureTest, FrozenRankTimesOut) {
  CONDUIT_SKIP_UNLESS_CLUSTER();
  Cluster cluster(FailureCluster());
  CONDUIT_START_CLUSTER(cluster);
  auto procs = StartLooping(cluster);
  if (HasFatalFailure()) return;

  Subprocess* victim = procs.back();
  victim->Kill(SIGSTOP);
  auto frozen_at = std::chrono::steady_clock::now();
  for (Subprocess* p : procs) {
    if (p != victim) ExpectErrorInTime(cluster, *p, frozen_at, {"ncclRemoteError", "ncclSystemError"});
  }
  victim->Kill(SIGKILL);
  EXPECT_TRUE(cluster.DaemonAlive(0) && cluster.DaemonAlive(1)) << cluster.Describe();
  ExpectHealthyRun(cluster);
}

// ncclCommAbort is safe while the communicator is busy on another thread (NCCL's contract
// for abort): a call waiting for a rank that never comes, and a non-blocking init waiting
// for one, both end within moments of the abort, not at the daemon's timeout (60 s here).
TEST(FailureTest, AbortEndsACallAndAnInitInProgress) {
  CONDUIT_SKIP_UNLESS_CLUSTER();
  ClusterConfig c;
  c.prefix = "fa";
  c.subnet = "10.231.48";
  c.hosts = 1;
  c.timeout_ms = 60000;
  Cluster cluster(c);
  CONDUIT_START_CLUSTER(cluster);
  Subprocess& probe = cluster.Launch(0, "abort_probe", {Cluster::BinPath("abort_probe")});
  ASSERT_TRUE(probe.Wait(std::chrono::seconds(45))) << "abort_probe hung (an abort waited for the daemon's timeout)\n"
                                                    << probe.Output() << cluster.Describe();
  EXPECT_EQ(probe.exit_code(), 0) << probe.Output();
  EXPECT_NE(probe.Output().find("abort_probe: ok"), std::string::npos) << probe.Output();
  EXPECT_TRUE(cluster.DaemonAlive(0)) << cluster.Describe();
}

}  // namespace
}  // namespace conduit::it
