// Receiver-driven broadcast over 8 hosts (links shaped to 4 Gbit/s so transfers overlap):
// receivers arriving at different times form a tree instead of all pulling from the
// sender; many receivers on one host share one transfer; a 1 GiB object; all-to-all.
#include <atomic>
#include <mutex>
#include <thread>

#include "../integration/integration_env.h"
#include "object_cluster.h"

namespace conduit::it {
namespace {

constexpr int kHosts = 8;

class ObjectsBroadcast : public SharedObjectClusterTest<ObjectsBroadcast> {
 public:
  static ObjectCluster* MakeCluster() {
    return new ObjectCluster("obc", "10.82.0", kHosts, {"--object-memory-bytes", "4000000000"}, "4gbit");
  }

 protected:
  std::vector<long long> Served() {
    std::vector<long long> v;
    for (int h = 0; h < kHosts; ++h) v.push_back(oc_->Counter(h, "served"));
    return v;
  }
};

TEST_F(ObjectsBroadcast, ReceiversArrivingAtDifferentTimesFormATree) {
  const size_t size = 48u << 20;  // ~100 ms per hop at 4 Gbit/s
  auto data = Pattern(size, 1234);
  auto c0 = oc_->Connect(0);
  ASSERT_TRUE(c0->Put("bcast", data.data(), data.size()).ok());
  auto before = Served();
  std::vector<uint64_t> sums(kHosts, 0);
  std::vector<hoplite::Status> status(kHosts);
  std::vector<std::thread> receivers;
  for (int h = 1; h < kHosts; ++h) {
    receivers.emplace_back([&, h] {
      std::this_thread::sleep_for(std::chrono::milliseconds(15 * h));  // staggered arrivals
      auto c = oc_->Connect(h);
      std::shared_ptr<const hoplite::ObjectView> v;
      status[h] = c->GetReadOnly("bcast", &v, 30000);
      if (status[h].ok()) sums[h] = Fnv(v->data(), v->size());
    });
  }
  for (auto& t : receivers) t.join();
  for (int h = 1; h < kHosts; ++h) {
    ASSERT_TRUE(status[h].ok()) << "host " << h << ": " << status[h].ToString();
    EXPECT_EQ(sums[h], Fnv(data)) << "host " << h;
  }
  auto after = Served();
  long long total = 0;
  for (int h = 0; h < kHosts; ++h) total += after[h] - before[h];
  EXPECT_EQ(total, kHosts - 1) << "every receiver fetched exactly once";
  // A location handed out is busy until its transfer ends, so later receivers fetch from
  // earlier (partial) receivers: the sender does not serve everyone.
  EXPECT_LE(after[0] - before[0], 3) << "the sender served most receivers itself";
  int relays = 0;
  for (int h = 1; h < kHosts; ++h) relays += after[h] > before[h] ? 1 : 0;
  EXPECT_GE(relays, 2);
}

TEST_F(ObjectsBroadcast, ManyReceiversOnOneHostShareOneTransfer) {
  const size_t size = 6u << 20;
  auto data = Pattern(size, 99);
  auto c1 = oc_->Connect(1);
  ASSERT_TRUE(c1->Put("shared", data.data(), data.size()).ok());
  long long received = oc_->Counter(3, "received");
  std::vector<std::thread> readers;
  std::atomic<int> good{0};
  for (int i = 0; i < 12; ++i) {
    readers.emplace_back([&, i] {
      auto c = oc_->Connect(3);
      std::vector<uint8_t> got;
      std::shared_ptr<const hoplite::ObjectView> v;
      bool ok = i % 2 == 0 ? c->Get("shared", &got, 20000).ok() && Fnv(got) == Fnv(data)
                           : c->GetReadOnly("shared", &v, 20000).ok() && Fnv(v->data(), v->size()) == Fnv(data);
      if (ok) ++good;
    });
  }
  for (auto& t : readers) t.join();
  EXPECT_EQ(good.load(), 12);
  EXPECT_EQ(oc_->Counter(3, "received"), received + 1);
}

TEST_F(ObjectsBroadcast, OneGigabyteObject) {
  const size_t size = 1ull << 30;
  std::vector<uint8_t> data = Pattern(size, 5);
  const uint64_t sum = Fnv(data);
  auto c2 = oc_->Connect(2);
  ASSERT_TRUE(c2->Put("gig", data.data(), data.size()).ok());
  data = {};
  uint64_t s5 = 0, s6 = 0;
  hoplite::Status st5, st6;
  std::thread a([&] {
    auto c = oc_->Connect(5);
    std::shared_ptr<const hoplite::ObjectView> v;
    st5 = c->GetReadOnly("gig", &v, 60000);
    if (st5.ok()) s5 = Fnv(v->data(), v->size());
  });
  std::thread b([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    auto c = oc_->Connect(6);
    std::shared_ptr<const hoplite::ObjectView> v;
    st6 = c->GetReadOnly("gig", &v, 60000);
    if (st6.ok()) s6 = Fnv(v->data(), v->size());
  });
  a.join();
  b.join();
  ASSERT_TRUE(st5.ok()) << st5.ToString();
  ASSERT_TRUE(st6.ok()) << st6.ToString();
  EXPECT_EQ(s5, sum);
  EXPECT_EQ(s6, sum);
  EXPECT_TRUE(c2->Delete("gig").ok());
}

TEST_F(ObjectsBroadcast, EveryHostGathersEveryObject) {
  const size_t size = 1u << 20;
  std::vector<std::thread> threads;
  std::atomic<int> good{0};
  std::mutex mu;
  std::string failures;
  for (int h = 0; h < kHosts; ++h) {
    threads.emplace_back([&, h] {
      auto c = oc_->Connect(h);
      auto data = Pattern(size, 500 + h);
      if (!c->Put("gather-" + std::to_string(h), data.data(), size).ok()) return;
      for (int k = 0; k < kHosts; ++k) {
        std::vector<uint8_t> got;
        hoplite::Status st = c->Get("gather-" + std::to_string(k), &got, 20000);
        if (st.ok() && Fnv(got) == Fnv(Pattern(size, 500 + k))) {
          ++good;
        } else {
          std::lock_guard<std::mutex> lock(mu);
          failures += "host " + std::to_string(h) + " gather-" + std::to_string(k) + ": " + st.ToString() + "\n";
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(good.load(), kHosts * kHosts) << failures;
}

}  // namespace
}  // namespace conduit::it
