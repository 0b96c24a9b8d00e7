// Failures, with real daemons in 4 network namespaces killed with SIGKILL: senders and
// directory owners dying mid-broadcast (receivers resume from surviving copies), creators
// dying mid-Put, the only copy dying (a clear error, never a hang), reduce participants
// dying (routed around or a clear error), random kills, and the store's memory limit with
// LRU eviction. Object contents are checked by checksum after every failure.
#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <iostream>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "../integration/integration_env.h"
#include "object_cluster.h"

namespace conduit::it {
namespace {

using hoplite::Code;

constexpr int kHosts = 4;

// A Reduce source: `count` int32 values, ((i * step) + 1000 s) % mod, different for every s.
std::vector<uint8_t> Int32Source(size_t count, int s, size_t step, size_t mod) {
  std::vector<uint8_t> v(count * 4);
  for (size_t i = 0; i < count; ++i) {
    int32_t x = static_cast<int32_t>((i * step + s * 1000) % mod);
    memcpy(&v[i * 4], &x, 4);
  }
  return v;
}

// The int32 sum of `sources`, element by element.
std::vector<uint8_t> Int32Sum(const std::vector<const std::vector<uint8_t>*>& sources) {
  const size_t count = sources[0]->size() / 4;
  std::vector<uint8_t> sum(count * 4);
  for (size_t i = 0; i < count; ++i) {
    int32_t x = 0, y;
    for (const auto* v : sources) {
      memcpy(&y, &(*v)[i * 4], 4);
      x += y;
    }
    memcpy(&sum[i * 4], &x, 4);
  }
  return sum;
}

class ObjectsFailure : public ::testing::Test {
 protected:
  void SetUp() override { CONDUIT_SKIP_UNLESS_CLUSTER(); }
  // The daemons' logs say why a step failed (a flake in CI is otherwise a bare "false").
  void TearDown() override {
    if (HasFailure() && oc_ != nullptr) std::cerr << oc_->cluster().Describe();
  }
  void StartCluster(std::vector<std::string> args = {}) {
    oc_ = std::make_unique<ObjectCluster>("ofl", "10.84.0", kHosts, std::move(args));
    std::string error;
    ASSERT_TRUE(oc_->Start(&error)) << error;
  }
  bool WaitReady(int host, const std::string& id, size_t ready) {
    return WaitFor([&] { return oc_->ReadyOf(host, id) == static_cast<long long>(ready); });
  }
  std::unique_ptr<ObjectCluster> oc_;
};

TEST_F(ObjectsFailure, ReceiverResumesFromTheOriginWhenItsSenderDies) {
  StartCluster();
  const size_t size = 16u << 20;
  auto data = Pattern(size, 41);
  RawPutter origin;
  std::string error;
  ASSERT_TRUE(origin.Begin(oc_->cluster().Socket(0), "resume", size, &error)) << error;
  ASSERT_TRUE(origin.Write(data, 0, size / 2));
  hoplite::Status st1, st2;
  std::vector<uint8_t> got2;
  std::thread r1([&] {
    std::vector<uint8_t> got;
    st1 = oc_->Connect(1)->Get("resume", &got, 20000);
  });
  ASSERT_TRUE(WaitReady(1, "resume", size / 2));
  std::thread r2([&] { st2 = oc_->Connect(2)->Get("resume", &got2, 20000); });
  ASSERT_TRUE(WaitReady(2, "resume", size / 2)) << "host 2 should relay through host 1";
  oc_->cluster().KillDaemon(1);  // host 2's sender dies half-way
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_TRUE(origin.Write(data, size / 2, size));
  ASSERT_TRUE(origin.Finish(&error)) << error;
  r1.join();
  r2.join();
  EXPECT_EQ(st1.code(), Code::kUnavailable) << st1.ToString();  // its own daemon died
  ASSERT_TRUE(st2.ok()) << st2.ToString();
  EXPECT_EQ(Fnv(got2), Fnv(data));
  EXPECT_GE(oc_->Counter(0, "resumed"), 1) << "host 2 continued from its offset, not from byte 0";
  // Later receivers are not sent to the dead daemon.
  std::vector<uint8_t> got3;
  ASSERT_TRUE(oc_->Connect(3)->Get("resume", &got3, 10000).ok());
  EXPECT_EQ(Fnv(got3), Fnv(data));
}

TEST_F(ObjectsFailure, CreatorDyingMidPutFailsReceiversAndFreesTheId) {
  StartCluster();
  const size_t size = 8u << 20;
  auto data = Pattern(size, 42);
  auto putter = std::make_unique<RawPutter>();
  std::string error;
  ASSERT_TRUE(putter->Begin(oc_->cluster().Socket(1), "orphan", size, &error)) << error;
  ASSERT_TRUE(putter->Write(data, 0, size / 4));
  hoplite::Status st;
  std::thread r([&] {
    std::vector<uint8_t> got;
    st = oc_->Connect(2)->Get("orphan", &got, 15000);
  });
  ASSERT_TRUE(WaitReady(2, "orphan", size / 4));
  putter->Abandon();  // the program dies
  r.join();
  EXPECT_EQ(st.code(), Code::kLost) << st.ToString();
  // Once the partial copies are gone the id can be created again (the task is re-run).
  auto again = Pattern(size, 43);
  hoplite::Status put;
  for (int i = 0; i < 50; ++i) {
    put = oc_->Connect(3)->Put("orphan", again.data(), again.size());
    if (put.code() != Code::kExists) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(put.ok()) << put.ToString();
  std::vector<uint8_t> got;
  ASSERT_TRUE(oc_->Connect(2)->Get("orphan", &got, 10000).ok());
  EXPECT_EQ(Fnv(got), Fnv(again));
}

TEST_F(ObjectsFailure, AReadOnlyGetThatTimesOutLeavesItsCopyFillingInTheBackground) {
  // A read-only Get fetches on its session's own thread (Locate's fill_here): when its
  // deadline passes mid-transfer it must answer then, and the copy must still be finished
  // by a thread of the daemon's, from where the Get's thread stopped.
  StartCluster();
  const size_t size = 8u << 20;
  auto data = Pattern(size, 44);
  RawPutter origin;
  std::string error;
  ASSERT_TRUE(origin.Begin(oc_->cluster().Socket(0), "slow", size, &error)) << error;
  ASSERT_TRUE(origin.Write(data, 0, size / 8));
  auto c1 = oc_->Connect(1);
  std::shared_ptr<const hoplite::ObjectView> view;
  const auto asked = std::chrono::steady_clock::now();
  hoplite::Status st = c1->GetReadOnly("slow", &view, 3000);
  const auto waited = std::chrono::steady_clock::now() - asked;
  EXPECT_EQ(st.code(), Code::kTimeout) << st.ToString();
  EXPECT_LT(waited, std::chrono::seconds(8)) << "the Get ends at its deadline";
  EXPECT_GE(oc_->ReadyOf(1, "slow"), static_cast<long long>(size / 8)) << oc_->State(1);
  ASSERT_TRUE(origin.Write(data, size / 8, size));
  ASSERT_TRUE(origin.Finish(&error)) << error;
  EXPECT_TRUE(WaitReady(1, "slow", size)) << "the copy was finished in the background: " << oc_->State(1);
  ASSERT_TRUE(c1->GetReadOnly("slow", &view, 10000).ok());
  EXPECT_EQ(Fnv(view->data(), view->size()), Fnv(data));
  EXPECT_GE(oc_->Counter(0, "resumed"), 1) << "the background fetch went on from its offset, not from byte 0";
}

TEST_F(ObjectsFailure, ObjectsWithASurvivingCopyAreNeverLost) {
  StartCluster();
  // Several objects, so some directory shards live on the daemon that dies.
  std::vector<std::vector<uint8_t>> data;
  for (int i = 0; i < 12; ++i) {
    data.push_back(Pattern(i % 2 ? (1u << 20) + i : 1000 + i, 60 + i));
    std::string id = "survive-" + std::to_string(i);
    ASSERT_TRUE(oc_->Connect(1)->Put(id, data[i].data(), data[i].size()).ok());
    std::vector<uint8_t> got;
    ASSERT_TRUE(oc_->Connect(2)->Get(id, &got, 5000).ok());  // a second complete copy (large ones)
  }
  oc_->cluster().KillDaemon(1);
  ASSERT_TRUE(oc_->WaitLive(0, kHosts - 1));
  ASSERT_TRUE(oc_->WaitLive(2, kHosts - 1));
  for (int i = 1; i < 12; i += 2) {
    std::vector<uint8_t> got;
    hoplite::Status st = oc_->Connect(3)->Get("survive-" + std::to_string(i), &got, 10000);
    ASSERT_TRUE(st.ok()) << i << ": " << st.ToString();
    EXPECT_EQ(Fnv(got), Fnv(data[i])) << i;
  }
  // The dead daemon comes back empty; everything with a surviving copy is still there.
  std::string error;
  ASSERT_TRUE(oc_->RestartDaemon(1, &error)) << error;
  for (int i = 1; i < 12; i += 2) {
    std::vector<uint8_t> got;
    ASSERT_TRUE(oc_->Connect(1)->Get("survive-" + std::to_string(i), &got, 10000).ok()) << i;
    EXPECT_EQ(Fnv(got), Fnv(data[i])) << i;
  }
}

TEST_F(ObjectsFailure, LosingTheOnlyCopyIsAClearErrorNotAHang) {
  StartCluster();
  const size_t size = 8u << 20;
  auto data = Pattern(size, 44);
  RawPutter origin;
  std::string error;
  ASSERT_TRUE(origin.Begin(oc_->cluster().Socket(1), "only", size, &error)) << error;
  ASSERT_TRUE(origin.Write(data, 0, size / 2));
  hoplite::Status st;
  auto t0 = std::chrono::steady_clock::now();
  std::thread r([&] {
    std::vector<uint8_t> got;
    st = oc_->Connect(2)->Get("only", &got, 8000);
  });
  ASSERT_TRUE(WaitReady(2, "only", size / 2));
  oc_->cluster().KillDaemon(1);
  r.join();
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(st.code() == Code::kLost || st.code() == Code::kTimeout) << st.ToString();
  EXPECT_LT(ms, 12000);
  std::vector<uint8_t> got;
  EXPECT_EQ(oc_->Connect(3)->Get("only", &got, 500).code(), Code::kTimeout);
}

// SIGTERM is an orderly end for the object store too (docs/configuration.md, "Stopping"):
// requests waiting on the stopped daemon (a Get of an object nobody has put, a Wait, a
// Reduce whose sources never come) end at once with kUnavailable and the daemon's reason,
// not at their deadline nor with a connection cut after the grace period; the daemon exits
// 0 without its sockets once its threads have ended, and the other daemons go on.
TEST_F(ObjectsFailure, ATerminatedDaemonEndsWaitingRequestsWithItsReason) {
  StartCluster();
  auto get_client = oc_->Connect(1);
  auto wait_client = oc_->Connect(1);
  auto reduce_client = oc_->Connect(1);
  hoplite::Status get_st, wait_st, reduce_st;
  std::vector<std::thread> waiting;
  waiting.emplace_back([&] {
    std::vector<uint8_t> got;
    get_st = get_client->Get("never-put", &got, 30000);
  });
  waiting.emplace_back([&] {
    std::vector<size_t> ready;
    wait_st = wait_client->Wait({"never-a", "never-b"}, 1, 30000, &ready);
  });
  waiting.emplace_back([&] {
    reduce_st = reduce_client->Reduce("never-sum", {"never-c", "never-d"}, 2, hoplite::ReduceOp::kSum,
                                      hoplite::DataType::kFloat32, 30000);
  });
  std::this_thread::sleep_for(std::chrono::seconds(1));  // every request waits in the daemon
  Subprocess& daemon = oc_->cluster().daemon(1);
  daemon.Kill(SIGTERM);
  const auto t0 = std::chrono::steady_clock::now();
  for (auto& t : waiting) t.join();
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  for (const hoplite::Status* st : {&get_st, &wait_st, &reduce_st}) {
    EXPECT_EQ(st->code(), Code::kUnavailable) << st->ToString();
    EXPECT_NE(st->ToString().find("is shutting down (Terminated)"), std::string::npos)
        << "the error does not give the daemon's reason: " << st->ToString();
  }
  // The grace period (2 s) is what cuts connections whose requests did not end.
  EXPECT_LT(ms, 1500) << "the requests ended only when their connections were cut";
  ASSERT_TRUE(daemon.Wait(std::chrono::seconds(10))) << "conduitd did not exit after SIGTERM";
  EXPECT_EQ(daemon.exit_code(), 0) << daemon.Output();
  // Its loops (pings, reconnection, directory sweep, ...) ended, and so did the threads
  // serving the other daemons' connections to it, which they had not closed.
  EXPECT_NE(daemon.Output().find("stopped: every connection and loop thread ended"), std::string::npos)
      << daemon.Output();
  EXPECT_NE(access(oc_->cluster().Socket(1).c_str(), F_OK), 0) << "program socket left behind";
  EXPECT_NE(access(oc_->cluster().AdminSocket(1).c_str(), F_OK), 0) << "admin socket left behind";

  const auto data = Pattern(300000, 9);
  ASSERT_TRUE(oc_->Connect(2)->Put("after-stop", data.data(), data.size()).ok());
  std::vector<uint8_t> got;
  hoplite::Status st = oc_->Connect(3)->Get("after-stop", &got, 20000);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(got, data);
}

TEST_F(ObjectsFailure, ReduceRoutesAroundADeadDaemon) {
  StartCluster();
  using hoplite::DataType;
  const size_t count = (4u << 20) / 4;
  auto src = [&](int s) { return Int32Source(count, s, 13, 977); };
  // a: half written on host 1; b, c complete on hosts 2 and 3; d not there yet.
  auto a = src(0);
  RawPutter pa;
  std::string error;
  ASSERT_TRUE(pa.Begin(oc_->cluster().Socket(1), "ra", a.size(), &error)) << error;
  ASSERT_TRUE(pa.Write(a, 0, a.size() / 2));
  auto b = src(1), c = src(2), d = src(3);
  ASSERT_TRUE(oc_->Connect(2)->Put("rb", b.data(), b.size()).ok());
  ASSERT_TRUE(oc_->Connect(3)->Put("rc", c.data(), c.size()).ok());
  std::vector<size_t> used;
  hoplite::Status st, read;
  std::thread reducer([&] {
    st = oc_->Connect(0)->Reduce("rsum", {"ra", "rb", "rc", "rd"}, 3, hoplite::ReduceOp::kSum, DataType::kInt32, 20000,
                                 &used);
  });
  // A reader of the target from the start: the source swap must not show it wrong bytes.
  std::vector<uint8_t> early;
  std::thread reader([&] { read = oc_->Connect(3)->Get("rsum", &early, 20000); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  oc_->cluster().KillDaemon(1);  // a's host dies mid-reduce
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_TRUE(oc_->Connect(0)->Put("rd", d.data(), d.size()).ok());  // the replacement arrives
  reducer.join();
  reader.join();
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_TRUE(read.ok()) << read.ToString();
  EXPECT_EQ(std::set<size_t>(used.begin(), used.end()), (std::set<size_t>{1, 2, 3}));
  std::vector<uint8_t> got;
  ASSERT_TRUE(oc_->Connect(2)->Get("rsum", &got, 5000).ok());
  const std::vector<uint8_t> want = Int32Sum({&b, &c, &d});
  EXPECT_EQ(Fnv(got), Fnv(want));
  EXPECT_EQ(Fnv(early), Fnv(want));
}

// The coordinator's own source takes the tree's root, so its sink runs the root's task,
// combining that source, still being written, with the root's children straight into the
// target. A child's daemon dies mid-reduce: the sink starts again with the spare source in
// its place, and the result (and what an early reader got) holds the surviving sources.
TEST_F(ObjectsFailure, ReduceWhoseRootIsTheCoordinatorsRoutesAroundADeadChild) {
  StartCluster();
  using hoplite::DataType;
  const size_t count = (4u << 20) / 4;
  auto src = [&](int s) { return Int32Source(count, s, 7, 1013); };
  auto a = src(0), b = src(1), c = src(2), d = src(3);
  RawPutter pa;  // a on the coordinator's host, half written
  std::string error;
  ASSERT_TRUE(pa.Begin(oc_->cluster().Socket(0), "qa", a.size(), &error)) << error;
  ASSERT_TRUE(pa.Write(a, 0, a.size() / 2));
  ASSERT_TRUE(oc_->Connect(1)->Put("qb", b.data(), b.size()).ok());
  ASSERT_TRUE(oc_->Connect(2)->Put("qc", c.data(), c.size()).ok());
  std::vector<size_t> used;
  hoplite::Status st, read;
  std::thread reducer([&] {
    st = oc_->Connect(0)->Reduce("qsum", {"qa", "qb", "qc", "qd"}, 3, hoplite::ReduceOp::kSum, DataType::kInt32,
                                 20000, &used);
  });
  std::vector<uint8_t> early;
  std::thread reader([&] { read = oc_->Connect(2)->Get("qsum", &early, 20000); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  oc_->cluster().KillDaemon(1);  // b's host dies while the root waits for the rest of a
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_TRUE(oc_->Connect(3)->Put("qd", d.data(), d.size()).ok());  // the spare arrives
  ASSERT_TRUE(pa.Write(a, a.size() / 2, a.size()));
  ASSERT_TRUE(pa.Finish(&error)) << error;
  reducer.join();
  reader.join();
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_TRUE(read.ok()) << read.ToString();
  EXPECT_EQ(std::set<size_t>(used.begin(), used.end()), (std::set<size_t>{0, 2, 3}));
  const std::vector<uint8_t> want = Int32Sum({&a, &c, &d});
  std::vector<uint8_t> got;
  ASSERT_TRUE(oc_->Connect(3)->Get("qsum", &got, 5000).ok());
  EXPECT_EQ(Fnv(got), Fnv(want));
  EXPECT_EQ(Fnv(early), Fnv(want));
}

// Every source is in the tree, so the target's blocks are readable as they are reduced; a
// source's daemon dying then fails the Reduce, and its reader gets an error, not bytes.
TEST_F(ObjectsFailure, ReaderOfAFailedReduceGetsAnErrorNotBytes) {
  StartCluster();
  const size_t size = 8u << 20;
  auto a = Pattern(size, 7);
  ASSERT_TRUE(oc_->Connect(1)->Put("xa", a.data(), size).ok());
  ASSERT_TRUE(oc_->Connect(2)->Put("xb", a.data(), size).ok());
  RawPutter pc;  // half written: the Reduce is still running when the kill comes
  std::string error;
  ASSERT_TRUE(pc.Begin(oc_->cluster().Socket(3), "xc", size, &error)) << error;
  ASSERT_TRUE(pc.Write(a, 0, size / 2));
  hoplite::Status st, read;
  std::thread reducer([&] {
    st = oc_->Connect(0)->Reduce("xsum", {"xa", "xb", "xc"}, 3, hoplite::ReduceOp::kMax, hoplite::DataType::kUint8, 20000);
  });
  std::vector<uint8_t> got;
  std::thread reader([&] { read = oc_->Connect(2)->Get("xsum", &got, 6000); });
  EXPECT_TRUE(WaitFor([&] { return oc_->ReadyOf(2, "xsum") > 0; })) << "the reader got no final block";
  oc_->cluster().KillDaemon(1);
  reducer.join();
  reader.join();
  EXPECT_EQ(st.code(), Code::kLost) << st.ToString();
  // Lost once the directory sees the target's only complete-able copy gone; a timeout if the
  // dead daemon also owned the target's directory shard.
  EXPECT_TRUE(read.code() == Code::kLost || read.code() == Code::kTimeout) << read.ToString();
  pc.Abandon();
}

TEST_F(ObjectsFailure, ReduceWithTooFewSurvivorsFailsClearly) {
  StartCluster();
  const size_t size = 4u << 20;
  auto a = Pattern(size, 1);
  RawPutter pa;
  std::string error;
  ASSERT_TRUE(pa.Begin(oc_->cluster().Socket(3), "fa", size, &error)) << error;
  ASSERT_TRUE(pa.Write(a, 0, size / 2));
  auto put_b = oc_->Connect(1)->Put("fb", a.data(), size);
  ASSERT_TRUE(put_b.ok()) << put_b.ToString();
  auto put_c = oc_->Connect(2)->Put("fc", a.data(), size);
  ASSERT_TRUE(put_c.ok()) << put_c.ToString();
  hoplite::Status st;
  auto t0 = std::chrono::steady_clock::now();
  std::thread reducer([&] {
    st = oc_->Connect(0)->Reduce("fsum", {"fa", "fb", "fc"}, 3, hoplite::ReduceOp::kMax, hoplite::DataType::kUint8, 20000);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  pa.Abandon();  // the program creating fa dies: only 2 of the 3 needed objects remain
  reducer.join();
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(st.code(), Code::kLost) << st.ToString();
  EXPECT_NE(st.message().find("only 2 of its 3 sources"), std::string::npos) << st.message();
  EXPECT_LT(ms, 10000);
}

TEST_F(ObjectsFailure, RandomKillsDuringBroadcast) {
  StartCluster();
  std::mt19937 rng(20261123);
  const size_t size = 12u << 20;
  for (int round = 0; round < 4; ++round) {
    std::string id = "rk-" + std::to_string(round);
    auto data = Pattern(size, 300 + round);
    ASSERT_TRUE(oc_->Connect(0)->Put(id, data.data(), size).ok());
    int victim = 1 + static_cast<int>(rng() % 3);
    int delay_ms = static_cast<int>(rng() % 25);
    std::vector<hoplite::Status> st(kHosts);
    std::vector<uint64_t> sum(kHosts, 0);
    std::vector<std::thread> rs;
    for (int h = 1; h < kHosts; ++h) {
      rs.emplace_back([&, h] {
        std::vector<uint8_t> got;
        // The victim may be killed before this thread connects: no client, not a crash.
        auto client = oc_->Connect(h);
        if (client == nullptr) {
          st[h] = hoplite::Status(Code::kUnavailable, "could not connect to host " + std::to_string(h) + "'s daemon");
          return;
        }
        st[h] = client->Get(id, &got, 15000);
        if (st[h].ok()) sum[h] = Fnv(got);
      });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    oc_->cluster().KillDaemon(victim);
    for (auto& t : rs) t.join();
    for (int h = 1; h < kHosts; ++h) {
      if (h == victim) {
        EXPECT_TRUE(st[h].ok() || st[h].code() == Code::kUnavailable) << st[h].ToString();
        if (st[h].ok()) {
          EXPECT_EQ(sum[h], Fnv(data));
        }
        continue;
      }
      ASSERT_TRUE(st[h].ok()) << "round " << round << " host " << h << " (killed " << victim << " after " << delay_ms
                              << " ms): " << st[h].ToString();
      EXPECT_EQ(sum[h], Fnv(data)) << "round " << round << " host " << h;
    }
    std::string error;
    ASSERT_TRUE(oc_->RestartDaemon(victim, &error)) << error;
  }
}

TEST_F(ObjectsFailure, MemoryLimitAndLruEviction) {
  StartCluster({"--object-memory-bytes", std::to_string(40u << 20)});
  const size_t size = 24u << 20;
  auto a = Pattern(size, 1), b = Pattern(size, 2), c = Pattern(size, 3);
  ASSERT_TRUE(oc_->Connect(0)->Put("mem-a", a.data(), size).ok());
  hoplite::Status st = oc_->Connect(0)->Put("mem-x", b.data(), size);
  EXPECT_EQ(st.code(), Code::kOutOfMemory) << st.ToString();
  EXPECT_NE(st.message().find("object store full"), std::string::npos) << st.message();
  ASSERT_TRUE(oc_->Connect(2)->Put("mem-b", b.data(), size).ok());
  ASSERT_TRUE(oc_->Connect(3)->Put("mem-c", c.data(), size).ok());
  auto c1 = oc_->Connect(1);
  std::vector<uint8_t> got;
  ASSERT_TRUE(c1->Get("mem-a", &got, 5000).ok());
  // Host 1's copy of mem-a is not pinned and host 0 has it too: evicted to make room.
  std::shared_ptr<const hoplite::ObjectView> vb;
  st = c1->GetReadOnly("mem-b", &vb, 5000);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(Fnv(vb->data(), vb->size()), Fnv(b));
  std::string s1 = oc_->State(1);
  EXPECT_EQ(s1.find("\"id\":\"mem-a\",\"size\":25165824,\"ready\""), std::string::npos) << s1;
  // mem-b is in use by our view, so nothing can make room for mem-c.
  st = c1->Get("mem-c", &got, 5000);
  EXPECT_EQ(st.code(), Code::kOutOfMemory) << st.ToString();
  vb.reset();  // released: now mem-b can go
  ASSERT_TRUE(c1->Get("mem-c", &got, 5000).ok());
  EXPECT_EQ(Fnv(got), Fnv(c));
  // Evicted copies were the extra ones: every object is still readable (here mem-c's
  // extra copy makes room for mem-a again).
  for (auto [id, want] : {std::pair{"mem-a", &a}, std::pair{"mem-b", &b}}) {
    st = c1->Get(id, &got, 5000);
    ASSERT_TRUE(st.ok()) << id << ": " << st.ToString();
    EXPECT_EQ(Fnv(got), Fnv(*want)) << id;
  }
}

}  // namespace
}  // namespace conduit::it
