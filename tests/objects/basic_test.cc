// Put / Get / Delete / Wait across hosts with real daemons in 3 network namespaces, over
// sealed (encrypted) daemon connections:
// every size class (inline, shared memory, 0 bytes), copying and zero-copy reads, the
// directory's answers, blocking with timeouts, and pipelining from a Put in progress.
#include <sys/mman.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "../integration/integration_env.h"
#include "object_cluster.h"
#include "protocol/object_protocol.h"

namespace conduit::it {
namespace {

using hoplite::Code;

class ObjectsBasic : public SharedObjectClusterTest<ObjectsBasic> {
 public:
  // The daemons seal their traffic (--encrypt-peers): every transfer below crosses sealed
  // control and data connections (the other object suites run unsealed).
  static ObjectCluster* MakeCluster() { return new ObjectCluster("ob", "10.81.0", 3, {"--encrypt-peers"}); }
};

TEST_F(ObjectsBasic, PutThenGetEverySizeFromEveryHost) {
  const size_t sizes[] = {0, 1, 4096, 64 * 1024 - 1, 64 * 1024, (1 << 20) + 3, 24u << 20};
  auto putter = oc_->Connect(0);
  ASSERT_NE(putter, nullptr);
  for (size_t size : sizes) {
    std::string id = "basic-" + std::to_string(size);
    auto data = Pattern(size, size + 7);
    ASSERT_TRUE(putter->Put(id, data.data(), data.size()).ok()) << id;
    for (int h = 0; h < 3; ++h) {
      auto c = oc_->Connect(h);
      std::vector<uint8_t> got;
      hoplite::Status st = c->Get(id, &got, 10000);
      ASSERT_TRUE(st.ok()) << id << " on host " << h << ": " << st.ToString();
      EXPECT_EQ(got, data) << id << " on host " << h;
      std::shared_ptr<const hoplite::ObjectView> view;
      st = c->GetReadOnly(id, &view, 10000);
      ASSERT_TRUE(st.ok()) << st.ToString();
      ASSERT_EQ(view->size(), size);
      EXPECT_EQ(Fnv(view->data(), view->size()), Fnv(data)) << id << " read-only on host " << h;
    }
  }
}

// Sealed, and on the object protocol version the daemons negotiated (the same release: its
// newest).
TEST_F(ObjectsBasic, ConnectionsBetweenTheDaemonsAreSealed) {
  const std::string up = "is up (object protocol " + std::to_string(objproto::kNewestPeerVersion);
  for (int h = 0; h < 3; ++h) {
    std::string log = oc_->cluster().daemon(h).Output();
    EXPECT_NE(log.find(up + ", sealed)"), std::string::npos) << "host " << h << ":\n" << log;
    EXPECT_EQ(log.find(up + ")"), std::string::npos) << "an unsealed control connection on host " << h << ":\n" << log;
  }
}

// Above --object-store-copy-bytes (4096 by default) and below 64 KiB.
TEST_F(ObjectsBasic, SmallObjectsAreServedInlineByTheDirectory) {
  auto c0 = oc_->Connect(0);
  auto data = Pattern(8000, 3);
  ASSERT_TRUE(c0->Put("small-inline", data.data(), data.size()).ok());
  // Exactly one daemon owns the entry, and it holds the bytes.
  int owners = 0;
  for (int h = 0; h < 3; ++h) {
    std::string s = oc_->State(h);
    size_t at = s.find("\"directory\"");
    size_t entry = s.find("\"id\":\"small-inline\"", at);
    if (entry == std::string::npos) continue;
    ++owners;
    EXPECT_NE(s.find("\"inline\":true", entry), std::string::npos) << s;
  }
  EXPECT_EQ(owners, 1);
  auto c2 = oc_->Connect(2);
  std::vector<uint8_t> got;
  ASSERT_TRUE(c2->Get("small-inline", &got, 5000).ok());
  EXPECT_EQ(got, data);
  // Served from the directory: host 2 needed no transfer and keeps no copy.
  std::string s2 = oc_->State(2);
  EXPECT_EQ(s2.find("\"id\":\"small-inline\",\"size\":8000,\"ready\""), std::string::npos) << s2;
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Up to --object-store-copy-bytes the shard hands a new object to every other daemon, which
// keeps a cached copy and answers its programs' Gets itself. A Delete reaches those copies,
// and the next object under the same id is what every host reads, at once.
TEST_F(ObjectsBasic, SmallObjectsAreCopiedToEveryDaemonAndDeletedEverywhere) {
  auto c0 = oc_->Connect(0);
  auto first = Pattern(1000, 5);
  ASSERT_TRUE(c0->Put("handed", first.data(), first.size()).ok());
  const std::string copy = "\"id\":\"handed\",\"size\":1000,\"ready\":1000,\"complete\":true,\"pinned\":false";
  for (int h = 1; h < 3; ++h) {
    EXPECT_TRUE(WaitFor([&] { return oc_->State(h).find(copy) != std::string::npos; }, 5000))
        << "host " << h << ": " << oc_->State(h);
  }
  // Listed by the shard: the creator's copy and the two handed out.
  std::string entry = oc_->DirectoryEntry("handed");
  EXPECT_EQ(Count(entry, "\"complete\":true"), 3u) << entry;
  EXPECT_EQ(Count(entry, "\"handed\":true"), 2u) << entry;
  for (int h = 0; h < 3; ++h) {
    auto c = oc_->Connect(h);
    std::vector<uint8_t> got;
    ASSERT_TRUE(c->Get("handed", &got, 5000).ok()) << "host " << h;
    EXPECT_EQ(got, first) << "host " << h;
  }
  ASSERT_TRUE(c0->Delete("handed").ok());
  for (int h = 0; h < 3; ++h) {
    EXPECT_TRUE(WaitFor([&] { return oc_->State(h).find("\"id\":\"handed\",") == std::string::npos; }, 5000))
        << "host " << h << " still lists it: " << oc_->State(h);
  }
  // Put anew from another host right after a Delete (its DropCopies may still be on their
  // way): every host reads the new bytes.
  ASSERT_TRUE(c0->Put("handed-2", first.data(), first.size()).ok());
  ASSERT_TRUE(WaitFor([&] { return oc_->State(1).find("\"id\":\"handed-2\",\"size\":1000,\"ready\":1000") !=
                                   std::string::npos; }, 5000));
  ASSERT_TRUE(c0->Delete("handed-2").ok());
  auto c1 = oc_->Connect(1);
  auto second = Pattern(1000, 6);
  hoplite::Status st = c1->Put("handed-2", second.data(), second.size());
  ASSERT_TRUE(st.ok()) << st.ToString();
  for (int h = 0; h < 3; ++h) {
    auto c = oc_->Connect(h);
    std::vector<uint8_t> got;
    ASSERT_TRUE(c->Get("handed-2", &got, 5000).ok()) << "host " << h;
    EXPECT_EQ(got, second) << "host " << h << " read the deleted object's bytes";
  }
  ASSERT_TRUE(c1->Delete("handed-2").ok());
}

// Holds back what one host's daemon sends to the other daemons' listening port (its requests
// and one-way messages: DropCopy, DirStoreCopy) while its answers to their requests (from that
// port) go at once: the packets are dropped until Release, and TCP retransmits them after.
// (An iptables rule in the host's namespace: this kernel has no netem to delay them.)
class HeldSends {
 public:
  HeldSends(Cluster& cluster, int host) : cluster_(cluster), host_(host), rule_(Rule(cluster.config().port)) {
    std::vector<std::string> add = {"iptables", "-I"};
    add.insert(add.end(), rule_.begin(), rule_.end());
    std::string out;
    if (cluster_.RunIn(host_, add, &out) != 0) error_ = "iptables failed: " + out;
  }
  ~HeldSends() { Release(); }
  void Release() {
    if (released_.exchange(true) || !error_.empty()) return;
    std::vector<std::string> del = {"iptables", "-D"};
    del.insert(del.end(), rule_.begin(), rule_.end());
    std::string out;
    (void)cluster_.RunIn(host_, del, &out);
  }
  const std::string& error() const { return error_; }

 private:
  static std::vector<std::string> Rule(int port) {
    return {"OUTPUT", "-p", "tcp", "--dport", std::to_string(port), "-j", "DROP"};
  }
  Cluster& cluster_;
  int host_;
  std::vector<std::string> rule_;
  std::atomic<bool> released_{false};
  std::string error_;
};

// A Delete is answered once every daemon holding a copy has dropped it (DropCopy is
// acknowledged, object protocol 5). Before, the shard's DropCopy messages were one-way: a
// program that Deleted an id and Put it anew at once could have its new copy removed by the
// old object's DropCopy arriving after the new Put (the new object was then lost), and a Get
// on a host whose DropCopy was still on its way read the deleted object's bytes. Here the
// shard's messages to the other daemons are held back for 300 ms (then retransmitted), its
// answers are not.
TEST_F(ObjectsBasic, DeleteIsAnsweredOnceEveryCopyIsDropped) {
  // 1000 bytes: handed out to every daemon by the shard; 20000: inline (the shard keeps the
  // bytes), not handed out, so host 2's Get keeps no copy; 100000: in shared memory, fetched
  // by host 2.
  for (size_t size : {size_t{1000}, size_t{20000}, size_t{100000}}) {
    SCOPED_TRACE("size " + std::to_string(size));
    // An id whose directory shard is on host 0, Put on host 1; host 2 reads it.
    std::string id;
    auto c1 = oc_->Connect(1);
    auto c2 = oc_->Connect(2);
    for (int n = 0; n < 200 && id.empty(); ++n) {
      const std::string candidate = "drop-ack-" + std::to_string(size) + "-" + std::to_string(n);
      auto bytes = Pattern(size, n);
      ASSERT_TRUE(c1->Put(candidate, bytes.data(), bytes.size()).ok());
      const std::string s0 = oc_->State(0);
      if (s0.find("\"id\":\"" + candidate + "\",\"size\":", s0.find("\"directory\"")) != std::string::npos) {
        id = candidate;
      } else {
        ASSERT_TRUE(c1->Delete(candidate).ok());
      }
    }
    ASSERT_FALSE(id.empty()) << "no id of 200 had its shard on host 0";
    std::vector<uint8_t> got;
    ASSERT_TRUE(c2->Get(id, &got, 5000).ok());
    // An inline object that was not handed out leaves its reader no copy.
    const bool copy_on_2 = size != 20000;
    if (copy_on_2) {
      ASSERT_TRUE(WaitFor([&] { return oc_->ReadyOf(2, id) == static_cast<long long>(size); }, 5000))
          << oc_->State(2);
    }

    HeldSends held(oc_->cluster(), 0);
    ASSERT_TRUE(held.error().empty()) << held.error();
    std::thread release([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      held.Release();
    });
    const auto begin = std::chrono::steady_clock::now();
    hoplite::Status st = c1->Delete(id);
    const auto took = std::chrono::steady_clock::now() - begin;
    std::cerr << "size " << size << ": Delete with the shard's messages held back for 300 ms took "
              << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms\n";
    // Put anew at once, on the host that deleted it.
    auto fresh = Pattern(size, 4242);
    hoplite::Status put = st.ok() ? c1->Put(id, fresh.data(), fresh.size()) : st;
    // Host 2's copy of the deleted object is gone: its Get reads the new bytes.
    hoplite::Status read = put.ok() ? c2->Get(id, &got, 5000) : put;
    release.join();
    ASSERT_TRUE(st.ok()) << st.ToString();
    ASSERT_TRUE(put.ok()) << put.ToString();
    ASSERT_TRUE(read.ok()) << read.ToString();
    EXPECT_TRUE(got == fresh) << "host 2 read the deleted object's bytes";
    // After every message held back has been retransmitted, the new object is still everywhere.
    std::this_thread::sleep_for(std::chrono::milliseconds(2000));
    for (int h = 0; h < 3; ++h) {
      auto c = oc_->Connect(h);
      st = c->Get(id, &got, 3000);
      EXPECT_TRUE(st.ok()) << "host " << h << ": the new object is gone: " << st.ToString();
      EXPECT_TRUE(!st.ok() || got == fresh) << "host " << h << " read other bytes";
    }
    (void)c1->Delete(id);
  }
}

TEST_F(ObjectsBasic, ReadOnlyGetMapsTheStoreWithoutWriteAccess) {
  auto c0 = oc_->Connect(0);
  auto data = Pattern(8u << 20, 11);
  ASSERT_TRUE(c0->Put("ro-view", data.data(), data.size()).ok());
  auto c1 = oc_->Connect(1);
  std::shared_ptr<const hoplite::ObjectView> a, b;
  ASSERT_TRUE(c1->GetReadOnly("ro-view", &a, 5000).ok());
  ASSERT_TRUE(c1->GetReadOnly("ro-view", &b, 5000).ok());
  EXPECT_EQ(Fnv(a->data(), a->size()), Fnv(data));
  // The mapping is the daemon's memfd itself, shared and read-only: no copy was made.
  std::ifstream maps("/proc/self/maps");
  std::string line, found;
  uintptr_t addr = reinterpret_cast<uintptr_t>(a->data());
  while (std::getline(maps, line)) {
    uintptr_t lo, hi;
    if (sscanf(line.c_str(), "%lx-%lx", &lo, &hi) == 2 && addr >= lo && addr < hi) found = line;
  }
  EXPECT_NE(found.find(" r--s "), std::string::npos) << found;
  EXPECT_NE(found.find("memfd:hoplite:ro-view"), std::string::npos) << found;
  // Writing through a fresh writable shared mapping of the same descriptor is impossible:
  // the daemon hands out a read-only descriptor (checked by mprotect on our view).
  EXPECT_NE(mprotect(const_cast<uint8_t*>(a->data()), 4096, PROT_READ | PROT_WRITE), 0);
  // While viewed, the copy counts as in use.
  EXPECT_NE(oc_->State(1).find("\"id\":\"ro-view\",\"size\":8388608,\"ready\":8388608,\"complete\":true,"
                               "\"pinned\":false,\"internal\":false,\"users\":2"),
            std::string::npos)
      << oc_->State(1);
}

TEST_F(ObjectsBasic, PutOfAnExistingIdFails) {
  auto c0 = oc_->Connect(0);
  auto c1 = oc_->Connect(1);
  auto data = Pattern(200000, 1);
  ASSERT_TRUE(c0->Put("dup", data.data(), data.size()).ok());
  hoplite::Status st = c1->Put("dup", data.data(), data.size());
  EXPECT_EQ(st.code(), Code::kExists) << st.ToString();
  st = c0->Put("dup", data.data(), 10);
  EXPECT_EQ(st.code(), Code::kExists) << st.ToString();
}

TEST_F(ObjectsBasic, GetBlocksUntilPutAndTimesOut) {
  auto c2 = oc_->Connect(2);
  auto t0 = std::chrono::steady_clock::now();
  std::vector<uint8_t> got;
  hoplite::Status st = c2->Get("never-created", &got, 300);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(st.code(), Code::kTimeout) << st.ToString();
  EXPECT_GE(ms, 250);
  EXPECT_LT(ms, 3000);
  // A Get that starts before the Put returns the object once it is created.
  auto data = Pattern(3u << 20, 5);
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    auto c0 = oc_->Connect(0);
    EXPECT_TRUE(c0->Put("created-later", data.data(), data.size()).ok());
  });
  st = c2->Get("created-later", &got, 10000);
  later.join();
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(got, data);
}

TEST_F(ObjectsBasic, DeleteRemovesEveryCopy) {
  auto c0 = oc_->Connect(0);
  auto c1 = oc_->Connect(1);
  auto data = Pattern(2u << 20, 9);
  ASSERT_TRUE(c0->Put("to-delete", data.data(), data.size()).ok());
  std::vector<uint8_t> got;
  ASSERT_TRUE(c1->Get("to-delete", &got, 5000).ok());
  long long used0 = JsonNumber(oc_->State(0), "used");
  ASSERT_TRUE(c1->Delete("to-delete").ok());
  // Copies go away on both hosts (the owner tells every holder).
  for (int i = 0; i < 100 && (oc_->State(0).find("\"to-delete\"") != std::string::npos ||
                              oc_->State(1).find("\"to-delete\"") != std::string::npos);
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(oc_->State(0).find("\"to-delete\""), std::string::npos);
  EXPECT_EQ(oc_->State(1).find("\"to-delete\""), std::string::npos);
  EXPECT_EQ(JsonNumber(oc_->State(0), "used"), used0 - static_cast<long long>(data.size()));
  EXPECT_EQ(c0->Get("to-delete", &got, 200).code(), Code::kTimeout);
  // The id can be used again.
  EXPECT_TRUE(c0->Put("to-delete", data.data(), 100).ok());
}

TEST_F(ObjectsBasic, InvalidArgumentsAreRefused) {
  auto c = oc_->Connect(0);
  std::vector<uint8_t> got;
  EXPECT_EQ(c->Get("", &got, 100).code(), Code::kInvalid);
  EXPECT_EQ(c->Put(std::string(64, 'x'), "a", 1).code(), Code::kInvalid);
  EXPECT_EQ(c->Put("nulldata", nullptr, 5).code(), Code::kInvalid);
  std::vector<size_t> ready;
  EXPECT_EQ(c->Wait({}, 1, 100, &ready).code(), Code::kInvalid);
  EXPECT_EQ(c->Wait({"a"}, 2, 100, &ready).code(), Code::kInvalid);
}

TEST_F(ObjectsBasic, WaitForAnyReturnsTheFirstReady) {
  auto c1 = oc_->Connect(1);
  std::vector<size_t> ready;
  hoplite::Status st = c1->Wait({"wa-x", "wa-y", "wa-z"}, 1, 200, &ready);
  EXPECT_EQ(st.code(), Code::kTimeout);
  auto data = Pattern(300000, 2);
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    auto c2 = oc_->Connect(2);
    EXPECT_TRUE(c2->Put("wa-y", data.data(), data.size()).ok());
  });
  size_t index = 99;
  st = c1->WaitAny({"wa-x", "wa-y", "wa-z"}, 10000, &index);
  later.join();
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(index, 1u);
  auto c0 = oc_->Connect(0);
  ASSERT_TRUE(c0->Put("wa-z", data.data(), 10).ok());
  st = c1->Wait({"wa-x", "wa-y", "wa-z"}, 2, 5000, &ready);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_GE(ready.size(), 2u);
  EXPECT_EQ(std::count(ready.begin(), ready.end(), 0u), 0);
}

// A receiver reads from a sender that is still receiving: the origin's program has copied
// only half of its object, host 1 fetches (and streams to its own program) that half,
// host 2 fetches from host 1's partial copy. The rest then flows through the chain.
TEST_F(ObjectsBasic, PipelinesFromSendersThatAreStillReceiving) {
  const size_t size = 16u << 20;
  auto data = Pattern(size, 77);
  RawPutter origin;
  std::string error;
  ASSERT_TRUE(origin.Begin(oc_->cluster().Socket(0), "pipe", size, &error)) << error;
  ASSERT_TRUE(origin.Write(data, 0, size / 2));
  std::vector<uint8_t> got1, got2;
  hoplite::Status st1, st2;
  std::atomic<size_t> got1_alloc{0};
  std::thread r1([&] {
    auto c = oc_->Connect(1);
    st1 = c->Get("pipe", [&](size_t n) { got1.resize(n); got1_alloc = n; return static_cast<void*>(got1.data()); }, 20000);
  });
  // Host 1 holds exactly the half that exists, while its program is still in Get.
  std::string s1;
  for (int i = 0; i < 200; ++i) {
    s1 = oc_->State(1);
    if (s1.find("\"id\":\"pipe\",\"size\":16777216,\"ready\":8388608") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_NE(s1.find("\"id\":\"pipe\",\"size\":16777216,\"ready\":8388608,\"complete\":false"), std::string::npos) << s1;
  std::thread r2([&] {
    auto c = oc_->Connect(2);
    st2 = c->Get("pipe", &got2, 20000);
  });
  std::string s2;
  for (int i = 0; i < 200; ++i) {
    s2 = oc_->State(2);
    if (s2.find("\"id\":\"pipe\",\"size\":16777216,\"ready\":8388608") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_NE(s2.find("\"id\":\"pipe\",\"size\":16777216,\"ready\":8388608,\"complete\":false"), std::string::npos) << s2;
  // The directory shows host 2 fetching from host 1 (the origin is busy sending to host 1).
  std::string dir;
  for (int h = 0; h < 3; ++h) {
    std::string s = oc_->State(h);
    if (s.find("\"directory\":{\"entries\"") != std::string::npos && s.find("\"id\":\"pipe\",\"size\":16777216,\"inline\"") != std::string::npos) dir = s;
  }
  EXPECT_NE(dir.find("\"at\":\"" + oc_->cluster().PeerAddr(2) + "\",\"complete\":false,\"origin\":false,\"sending_to\":\"\","
                     "\"fetching_from\":\"" + oc_->cluster().PeerAddr(1) + "\""),
            std::string::npos)
      << dir;
  ASSERT_TRUE(origin.Write(data, size / 2, size));
  ASSERT_TRUE(origin.Finish(&error)) << error;
  r1.join();
  r2.join();
  ASSERT_TRUE(st1.ok()) << st1.ToString();
  ASSERT_TRUE(st2.ok()) << st2.ToString();
  EXPECT_EQ(Fnv(got1), Fnv(data));
  EXPECT_EQ(Fnv(got2), Fnv(data));
}

// Object state is part of the admin API (conduitctl raw GET /v1/objects, /metrics).
TEST_F(ObjectsBasic, AdminApiShowsObjectState) {
  auto data = Pattern(200000, 8);
  ASSERT_TRUE(oc_->Connect(1)->Put("admin-visible", data.data(), data.size()).ok());
  std::string admin = oc_->cluster().Socket(1);
  admin = admin.substr(0, admin.size() - 5) + "-admin.sock";
  std::string out;
  ASSERT_EQ(RunCommand({Cluster::ToolPath("conduitctl"), "--socket", admin, "raw", "GET", "/v1/objects"}, &out), 0) << out;
  EXPECT_NE(out.find("\"admin-visible\""), std::string::npos) << out;
  EXPECT_NE(out.find("\"live\""), std::string::npos) << out;
  ASSERT_EQ(RunCommand({Cluster::ToolPath("conduitctl"), "--socket", admin, "metrics"}, &out), 0) << out;
  EXPECT_NE(out.find("conduit_objects_live_daemons 3"), std::string::npos) << out;
  EXPECT_NE(out.find("conduit_objects_local_copies"), std::string::npos) << out;
}

}  // namespace
}  // namespace conduit::it
