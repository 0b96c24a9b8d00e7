// A live upgrade of a daemon that stores objects and serves programs (docs/upgrade.md):
// its copies (Put origins, large and small, and a copy it fetched) move to the new process
// with their memfds, and a connected program's session moves with its connection and its
// read-only view, so the program goes on without reconnecting. Afterwards every object is
// readable from every host with the same bytes, the upgraded daemon serves its copies
// without fetching them again, and Delete, Put and Get work as before, on the moved
// connection too. Real daemons in 3 network namespaces.
#include <atomic>
#include <chrono>
#include <iostream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../integration/conduitctl_run.h"
#include "../integration/integration_env.h"
#include "object_cluster.h"

namespace conduit::it {
namespace {

struct Stored {
  std::string id;
  int host;  // where it was Put
  size_t size;
};

TEST(ObjectsUpgrade, StoredObjectsMoveToTheNewDaemon) {
  CONDUIT_SKIP_UNLESS_CLUSTER();
  ObjectCluster oc("oug", "10.88.0", 3);
  std::string error;
  ASSERT_TRUE(oc.Start(&error)) << error;

  const std::vector<Stored> objects = {
      {"up-big-0", 0, (3u << 20) + 5}, {"up-small-0", 0, 1000}, {"up-empty-0", 0, 0}, {"up-big-2", 2, 2u << 20}};
  for (const Stored& o : objects) {
    auto c = oc.Connect(o.host);
    ASSERT_NE(c, nullptr);
    auto data = Pattern(o.size, o.size + 11);
    hoplite::Status st = c->Put(o.id, data.data(), data.size());
    ASSERT_TRUE(st.ok()) << o.id << ": " << st.ToString();
  }
  {
    // Host 0 also holds a copy it fetched (not pinned there).
    auto c = oc.Connect(0);
    std::vector<uint8_t> got;
    ASSERT_TRUE(c->Get("up-big-2", &got, 10000).ok());
  }
  ASSERT_EQ(oc.ReadyOf(0, "up-big-2"), static_cast<long long>(2u << 20));

  // A program stays connected to host 0 through the upgrade, holding a read-only view.
  auto live = oc.Connect(0);
  ASSERT_NE(live, nullptr);
  std::shared_ptr<const hoplite::ObjectView> held;
  ASSERT_TRUE(live->GetReadOnly("up-big-0", &held, 10000).ok());
  const uint64_t held_fnv = Fnv(held->data(), held->size());

  // Host 0's transfer counters, which must go on in the new process.
  const std::string received = R"(conduit_objects_transfers_total{kind="received"} )";
  auto counter = [&oc](const std::string& series) {
    const std::string text = Ctl(oc.cluster(), 0, {"metrics"}).out;
    const size_t at = text.find(series);
    return at == std::string::npos ? -1.0 : std::atof(text.c_str() + at + series.size());
  };
  const double received_before = counter(received);
  EXPECT_GE(received_before, 1.0);

  CtlResult up = Ctl(oc.cluster(), 0, {"upgrade"});
  ASSERT_EQ(up.rc, 0) << up.out;
  EXPECT_GE(counter(received), received_before);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(up.out, m, std::regex(R"("new_pid":\s*([0-9]+))"))) << up.out;
  EXPECT_NE(std::stoll(m[1]), static_cast<long long>(oc.cluster().daemon(0).pid()));
  for (int h = 0; h < 3; ++h) EXPECT_TRUE(oc.WaitLive(h, 3)) << "host " << h;
  // The new process writes to the same log as the old one.
  EXPECT_NE(oc.cluster().daemon(0).Output().find("4 stored objects and 1 of 1 program sessions"), std::string::npos)
      << oc.cluster().daemon(0).Output();

  // The program goes on over the same connection: its view still reads the same bytes, and
  // its next requests are answered by the new daemon (which knows the view: the copy stays
  // pinned until the program releases it).
  EXPECT_EQ(Fnv(held->data(), held->size()), held_fnv);
  {
    std::vector<uint8_t> got;
    hoplite::Status st = live->Get("up-small-0", &got, 10000);
    ASSERT_TRUE(st.ok()) << "the moved connection: " << st.ToString();
    EXPECT_EQ(Fnv(got), Fnv(Pattern(1000, 1000 + 11)));
    const auto mine = Pattern(70000, 3);
    ASSERT_TRUE(live->Put("up-live", mine.data(), mine.size()).ok());
    ASSERT_TRUE(oc.Connect(2)->Get("up-live", &got, 10000).ok());
    EXPECT_EQ(got, mine);
  }

  // The new daemon has every copy the old one had, complete, before anyone asks.
  EXPECT_EQ(oc.ReadyOf(0, "up-big-0"), static_cast<long long>((3u << 20) + 5));
  EXPECT_EQ(oc.ReadyOf(0, "up-big-2"), static_cast<long long>(2u << 20));
  EXPECT_EQ(oc.ReadyOf(0, "up-small-0"), 1000);

  for (const Stored& o : objects) {
    const auto want = Pattern(o.size, o.size + 11);
    for (int h : {1, 2, 0}) {
      auto c = oc.Connect(h);
      ASSERT_NE(c, nullptr);
      std::vector<uint8_t> got;
      hoplite::Status st = c->Get(o.id, &got, 15000);
      ASSERT_TRUE(st.ok()) << o.id << " on host " << h << " after the upgrade: " << st.ToString();
      EXPECT_EQ(Fnv(got), Fnv(want)) << o.id << " on host " << h;
      std::shared_ptr<const hoplite::ObjectView> view;
      st = c->GetReadOnly(o.id, &view, 15000);
      ASSERT_TRUE(st.ok()) << st.ToString();
      EXPECT_EQ(Fnv(view->data(), view->size()), Fnv(want)) << o.id << " read-only on host " << h;
    }
  }
  // Host 1 fetched host 0's large object from the new daemon's handed-over copy (the
  // new daemon's counters start at 0).
  EXPECT_GT(oc.Counter(0, "served"), 0) << oc.State(0);

  // The store works as before: a Put on the new daemon, a Delete of a handed-over object
  // (gone everywhere), and its quota released.
  auto c0 = oc.Connect(0);
  const auto fresh = Pattern(300000, 5);
  ASSERT_TRUE(c0->Put("up-after", fresh.data(), fresh.size()).ok());
  auto c1 = oc.Connect(1);
  std::vector<uint8_t> got;
  ASSERT_TRUE(c1->Get("up-after", &got, 10000).ok());
  EXPECT_EQ(got, fresh);
  held.reset();  // the view is released on the moved connection
  hoplite::Status del = live->Delete("up-big-0");
  ASSERT_TRUE(del.ok()) << del.ToString();
  // Every holder's copy goes (host 2 fetched one above; its DropCopy may still be on its
  // way when the Delete returns, docs/object-protocol.md).
  EXPECT_TRUE(WaitFor([&] {
    return oc.ReadyOf(0, "up-big-0") < 0 && oc.ReadyOf(1, "up-big-0") < 0 && oc.ReadyOf(2, "up-big-0") < 0;
  }));
  hoplite::Status gone = oc.Connect(2)->Get("up-big-0", &got, 500);
  EXPECT_FALSE(gone.ok());
  // The same id can be Put again once deleted.
  hoplite::Status again = c0->Put("up-big-0", fresh.data(), fresh.size());
  ASSERT_TRUE(again.ok()) << again.ToString() << "\n" << oc.State(0);
}

// A rolling upgrade: every daemon replaced in turn while a program on each host Puts its
// own objects and Gets the others' in a loop over one connection. No operation fails, every
// byte read is the byte written, and every program's session moves with its daemon.
TEST(ObjectsUpgrade, RollingUpgradeUnderPutsAndGets) {
  CONDUIT_SKIP_UNLESS_CLUSTER();
  ObjectCluster oc("oug", "10.88.0", 3);
  std::string error;
  ASSERT_TRUE(oc.Start(&error)) << error;
  constexpr size_t kSize = 300000;  // in a memfd (not inline), one block or two
  auto seed = [](int host, int k) { return static_cast<uint64_t>(host * 100000 + k); };
  std::atomic<bool> stop{false};
  std::atomic<int> created[3] = {0, 0, 0};
  std::atomic<int> ops{0};
  std::atomic<long long> slowest_us{0};
  std::vector<std::string> failures[3];
  std::vector<std::thread> programs;
  for (int h = 0; h < 3; ++h) {
    programs.emplace_back([&, h] {
      auto client = oc.Connect(h);
      if (client == nullptr) {
        failures[h].push_back("cannot connect");
        return;
      }
      for (int k = 0; !stop.load() && failures[h].size() < 5; ++k) {
        const auto start = std::chrono::steady_clock::now();
        const std::string mine = "roll-" + std::to_string(h) + "-" + std::to_string(k);
        const auto data = Pattern(kSize, seed(h, k));
        hoplite::Status st = client->Put(mine, data.data(), data.size());
        if (!st.ok()) failures[h].push_back("Put " + mine + ": " + st.ToString());
        created[h].store(k + 1);
        const int other = (h + 1 + k % 2) % 3;
        const int n = created[other].load();
        if (n > 0) {
          const int pick = k % n;
          const std::string id = "roll-" + std::to_string(other) + "-" + std::to_string(pick);
          std::vector<uint8_t> got;
          st = client->Get(id, &got, 20000);
          if (!st.ok()) {
            failures[h].push_back("Get " + id + ": " + st.ToString());
          } else if (Fnv(got) != Fnv(Pattern(kSize, seed(other, pick)))) {
            failures[h].push_back("Get " + id + ": other bytes than were Put");
          }
        }
        const long long us =
            std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start).count();
        for (long long seen = slowest_us.load(); us > seen && !slowest_us.compare_exchange_weak(seen, us);) {
        }
        ++ops;
      }
    });
  }
  while (ops.load() < 30) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  for (int h = 0; h < 3; ++h) {
    const int before = ops.load();
    CtlResult up = Ctl(oc.cluster(), h, {"upgrade"});
    EXPECT_EQ(up.rc, 0) << "host " << h << ": " << up.out;
    for (int g = 0; g < 3; ++g) EXPECT_TRUE(oc.WaitLive(g, 3)) << "host " << g << " after upgrading host " << h;
    // The programs go on after each upgrade.
    EXPECT_TRUE(WaitFor([&] { return ops.load() >= before + 15; }, 20000)) << "stalled after upgrading host " << h;
  }
  stop.store(true);
  for (std::thread& t : programs) t.join();
  bool failed = false;
  for (int h = 0; h < 3; ++h) failed = failed || !failures[h].empty();
  if (failed) {  // what each daemon said about its peers and copies, to tell why
    for (int h = 0; h < 3; ++h) {
      std::cout << "---- daemon " << h << " ----\n";
      std::istringstream lines(oc.cluster().daemon(h).Output());
      for (std::string line; std::getline(lines, line);) {
        if (line.find("objects:") != std::string::npos || line.find("upgrade") != std::string::npos) {
          std::cout << line << "\n";
        }
      }
    }
  }
  for (int h = 0; h < 3; ++h) {
    EXPECT_TRUE(failures[h].empty()) << "program on host " << h << ": " << failures[h].front();
    EXPECT_NE(oc.cluster().daemon(h).Output().find("and 1 of 1 program sessions"), std::string::npos)
        << oc.cluster().daemon(h).Output();
  }
  std::cout << "rolling upgrade: " << ops.load() << " Put+Get rounds, slowest " << slowest_us.load() / 1000.0
            << " ms\n";
}

// A rolling upgrade from the release before object protocol 5, whose daemons drop a deleted
// object's copies one-way: while any holder speaks 4, a Delete still works (answered, every
// copy gone soon after, a Put of the id anew read everywhere); once every daemon speaks 5,
// every copy is gone by the time the Delete is answered.
TEST(ObjectsUpgrade, DeletesAcrossARollingUpgradeFromObjectProtocol4) {
  CONDUIT_SKIP_UNLESS_CLUSTER();
  ObjectCluster oc("ou4", "10.89.0", 3, {}, "", Cluster::ToolPath("conduitd_objects_4"));
  std::string error;
  ASSERT_TRUE(oc.Start(&error)) << error;
  const std::string current = Cluster::ConduitdPath();
  for (int upgraded = 0; upgraded <= 3; ++upgraded) {
    SCOPED_TRACE(std::to_string(upgraded) + " of 3 daemons upgraded");
    if (upgraded > 0) {
      CtlResult up = Ctl(oc.cluster(), upgraded - 1, {"upgrade", current});
      ASSERT_EQ(up.rc, 0) << up.out;
      for (int h = 0; h < 3; ++h) ASSERT_TRUE(oc.WaitLive(h, 3)) << "host " << h;
    }
    // What each daemon's connection to every other negotiated last (the dialer logs it): 4
    // while either end is of the earlier release, 5 once both are upgraded.
    for (int h = 0; h < 3; ++h) {
      for (int g = 0; g < 3; ++g) {
        if (g == h) continue;
        const std::string up = "peer " + oc.cluster().PeerAddr(g) + " is up (object protocol ";
        const std::string want = h < upgraded && g < upgraded ? "5" : "4";
        auto last = [&] {
          const std::string log = oc.cluster().daemon(h).Output();
          const size_t at = log.rfind(up);
          return at == std::string::npos ? std::string() : log.substr(at + up.size(), 1);
        };
        EXPECT_TRUE(WaitFor([&] { return last() == want; }, 5000))
            << "host " << h << " to host " << g << ": protocol " << last() << ", expected " << want;
      }
    }
    for (size_t size : {size_t{1000}, size_t{100000}}) {
      const std::string id = "mixed-" + std::to_string(upgraded) + "-" + std::to_string(size);
      auto c0 = oc.Connect(0);
      auto c1 = oc.Connect(1);
      auto c2 = oc.Connect(2);
      const auto old_bytes = Pattern(size, 7 + upgraded);
      ASSERT_TRUE(c0->Put(id, old_bytes.data(), old_bytes.size()).ok());
      std::vector<uint8_t> got;
      ASSERT_TRUE(c2->Get(id, &got, 10000).ok());
      ASSERT_TRUE(WaitFor([&] { return oc.ReadyOf(2, id) == static_cast<long long>(size); }, 5000)) << oc.State(2);
      hoplite::Status st = c1->Delete(id);
      ASSERT_TRUE(st.ok()) << st.ToString();
      if (upgraded == 3) {
        EXPECT_EQ(oc.ReadyOf(0, id), -1) << "host 0 still holds the deleted object after the Delete was answered";
        EXPECT_EQ(oc.ReadyOf(2, id), -1) << "host 2 still holds the deleted object after the Delete was answered";
      } else {
        for (int h = 0; h < 3; ++h) {
          EXPECT_TRUE(WaitFor([&] { return oc.ReadyOf(h, id) == -1; }, 5000)) << "host " << h << ": " << oc.State(h);
        }
      }
      const auto new_bytes = Pattern(size, 70 + upgraded);
      st = c1->Put(id, new_bytes.data(), new_bytes.size());
      ASSERT_TRUE(st.ok()) << st.ToString();
      for (auto* c : {c0.get(), c1.get(), c2.get()}) {
        st = c->Get(id, &got, 10000);
        ASSERT_TRUE(st.ok()) << st.ToString();
        EXPECT_TRUE(got == new_bytes) << "read other bytes than the new Put's";
      }
      EXPECT_TRUE(c1->Delete(id).ok());
    }
  }
}

}  // namespace
}  // namespace conduit::it
