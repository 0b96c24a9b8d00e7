// Reduce over 5 hosts: every NCCL data type with sum/prod/max/min (checked against
// references computed here), num_objects out of more sources in arrival order,
// stragglers and sources still being written, the target read while it is reduced,
// composed reduces, the chosen tree degree, and bad requests.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <set>
#include <thread>

#include "../integration/integration_env.h"
#include "object_cluster.h"
#include "reduce/reduce.h"

namespace conduit::it {
namespace {

using hoplite::Code;
using hoplite::DataType;
using hoplite::ReduceOp;

constexpr int kHosts = 5;

size_t ElemSize(DataType t) { return DataTypeSize(static_cast<ncclDataType_t>(t)); }

// Stores v (exactly representable for the values used here) as one element of t.
void Store(DataType t, double v, uint8_t* out) {
  switch (t) {
    case DataType::kInt8: { int8_t x = static_cast<int8_t>(v); memcpy(out, &x, 1); break; }
    case DataType::kUint8: { uint8_t x = static_cast<uint8_t>(v); memcpy(out, &x, 1); break; }
    case DataType::kInt32: { int32_t x = static_cast<int32_t>(v); memcpy(out, &x, 4); break; }
    case DataType::kUint32: { uint32_t x = static_cast<uint32_t>(v); memcpy(out, &x, 4); break; }
    case DataType::kInt64: { int64_t x = static_cast<int64_t>(v); memcpy(out, &x, 8); break; }
    case DataType::kUint64: { uint64_t x = static_cast<uint64_t>(v); memcpy(out, &x, 8); break; }
    case DataType::kFloat16: { uint16_t x = FloatToHalf(static_cast<float>(v)); memcpy(out, &x, 2); break; }
    case DataType::kFloat32: { float x = static_cast<float>(v); memcpy(out, &x, 4); break; }
    case DataType::kFloat64: memcpy(out, &v, 8); break;
    case DataType::kBfloat16: { uint16_t x = FloatToBf16(static_cast<float>(v)); memcpy(out, &x, 2); break; }
    case DataType::kFloat8e4m3: *out = FloatToFp8E4M3(static_cast<float>(v)); break;
    case DataType::kFloat8e5m2: *out = FloatToFp8E5M2(static_cast<float>(v)); break;
  }
}

bool IsSigned(DataType t) { return t != DataType::kUint8 && t != DataType::kUint32 && t != DataType::kUint64; }

// Value() depends on i only through i % kPeriod, so the element-wise helpers below compute
// kPeriod elements and copy the rest from them in doubling spans. Element by element, the
// 32 MiB objects of LargeObjectsUseAChain took seconds under the sanitizers, which check each
// store of a loop apart and a memcpy's range at once.
constexpr size_t kPeriod = 3;

// Element i of source s: small integers, exact in every type and under every op for up
// to 4 sources (sums <= 8, products <= 16 for floats; signed ints also go negative).
double Value(DataType t, int s, size_t i) {
  bool is_float = t == DataType::kFloat16 || t == DataType::kFloat32 || t == DataType::kFloat64 ||
                  t == DataType::kBfloat16 || t == DataType::kFloat8e4m3 || t == DataType::kFloat8e5m2;
  int v = static_cast<int>(((i % kPeriod) * 7 + s * 3) % 3);
  if (is_float) return v;
  return IsSigned(t) ? v - 1 : v;
}

// Fills `out` from its first kPeriod elements of `elem` bytes.
void RepeatFirstPeriod(std::vector<uint8_t>& out, size_t elem) {
  size_t have = std::min(out.size(), kPeriod * elem);
  while (have < out.size()) {
    const size_t n = std::min(have, out.size() - have);
    memcpy(out.data() + have, out.data(), n);
    have += n;
  }
}

std::vector<uint8_t> Source(DataType t, int s, size_t count) {
  std::vector<uint8_t> out(count * ElemSize(t));
  for (size_t i = 0; i < std::min(count, kPeriod); ++i) Store(t, Value(t, s, i), &out[i * ElemSize(t)]);
  RepeatFirstPeriod(out, ElemSize(t));
  return out;
}

std::vector<uint8_t> Expected(DataType t, ReduceOp op, const std::vector<int>& srcs, size_t count) {
  std::vector<uint8_t> out(count * ElemSize(t));
  for (size_t i = 0; i < std::min(count, kPeriod); ++i) {
    double acc = Value(t, srcs[0], i);
    for (size_t k = 1; k < srcs.size(); ++k) {
      double v = Value(t, srcs[k], i);
      switch (op) {
        case ReduceOp::kSum: acc += v; break;
        case ReduceOp::kProd: acc *= v; break;
        case ReduceOp::kMax: acc = std::max(acc, v); break;
        case ReduceOp::kMin: acc = std::min(acc, v); break;
      }
    }
    Store(t, acc, &out[i * ElemSize(t)]);
  }
  RepeatFirstPeriod(out, ElemSize(t));
  return out;
}

class ObjectsReduce : public SharedObjectClusterTest<ObjectsReduce> {
 public:
  static ObjectCluster* MakeCluster() { return new ObjectCluster("orr", "10.83.0", kHosts, {"--object-block-bytes", "262144"}); }
};

TEST_F(ObjectsReduce, EveryDataTypeAndOp) {
  const char* kOpNames[] = {"sum", "prod", "max", "min"};
  int case_no = 0;
  for (int ti = 0; ti < 12; ++ti) {
    DataType t = static_cast<DataType>(ti);
    // Small objects travel inline; the larger one spans several pipelining blocks.
    for (size_t count : {size_t{1000}, (size_t{600} << 10) / ElemSize(t) + 3}) {
      std::vector<std::string> ids;
      for (int s = 0; s < 4; ++s) {
        std::string id = "t";
        id += std::to_string(ti) + "-c" + std::to_string(count) + "-s" + std::to_string(s);
        auto data = Source(t, s, count);
        auto c = oc_->Connect(1 + s);
        ASSERT_TRUE(c->Put(id, data.data(), data.size()).ok()) << id;
        ids.push_back(id);
      }
      for (int opi = 0; opi < 4; ++opi) {
        ReduceOp op = static_cast<ReduceOp>(opi);
        std::string target = "red-" + std::to_string(case_no++);
        auto c0 = oc_->Connect(case_no % kHosts);
        std::vector<size_t> used;
        hoplite::Status st = c0->Reduce(target, ids, 4, op, t, 20000, &used);
        ASSERT_TRUE(st.ok()) << "type " << ti << " op " << kOpNames[opi] << ": " << st.ToString();
        EXPECT_EQ(used.size(), 4u);
        std::vector<uint8_t> got;
        auto reader = oc_->Connect((case_no + 2) % kHosts);
        st = reader->Get(target, &got, 10000);
        ASSERT_TRUE(st.ok()) << target << ": " << st.ToString();
        EXPECT_EQ(got, Expected(t, op, {0, 1, 2, 3}, count)) << "type " << ti << " op " << kOpNames[opi] << " count " << count;
      }
    }
  }
}

TEST_F(ObjectsReduce, UsesTheFirstNumObjectsToArrive) {
  const DataType t = DataType::kInt32;
  const size_t count = 300000;
  std::vector<std::string> ids;
  for (int s = 0; s < 6; ++s) ids.push_back("arr-" + std::to_string(s));
  auto put = [&](int s) {
    auto c = oc_->Connect(s % kHosts);
    auto d = Source(t, s, count);
    EXPECT_TRUE(c->Put(ids[s], d.data(), d.size()).ok());
  };
  put(1);
  put(3);
  std::vector<size_t> used;
  hoplite::Status st;
  std::thread reducer([&] {
    auto c = oc_->Connect(0);
    st = c->Reduce("arr-sum", ids, 3, ReduceOp::kSum, t, 20000, &used);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  put(4);  // the third arrival completes the reduce
  reducer.join();
  put(0);
  put(2);
  put(5);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(used.size(), 3u);
  EXPECT_EQ(std::set<size_t>(used.begin(), used.end()), (std::set<size_t>{1, 3, 4}));
  EXPECT_EQ(used[2], 4u) << "used is in arrival order";
  auto c = oc_->Connect(2);
  std::vector<uint8_t> got;
  ASSERT_TRUE(c->Get("arr-sum", &got, 5000).ok());
  EXPECT_EQ(got, Expected(t, ReduceOp::kSum, {1, 3, 4}, count));
}

// Small objects (< 64 KiB) come with their directory events and are reduced at the
// coordinator: still the first num_objects to arrive, in arrival order.
TEST_F(ObjectsReduce, SmallObjectsUseTheFirstToArrive) {
  const DataType t = DataType::kFloat64;
  const size_t count = 4000;  // 32000 bytes
  std::vector<std::string> ids = {"sm-0", "sm-1", "sm-2", "sm-3"};
  auto put = [&](int s) {
    auto d = Source(t, s, count);
    ASSERT_TRUE(oc_->Connect(s % kHosts)->Put(ids[s], d.data(), d.size()).ok());
  };
  put(2);
  put(0);
  std::vector<size_t> used;
  hoplite::Status st;
  std::thread reducer([&] { st = oc_->Connect(3)->Reduce("sm-max", ids, 3, ReduceOp::kMax, t, 20000, &used); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  put(3);
  reducer.join();
  put(1);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(used.size(), 3u);
  EXPECT_EQ(std::set<size_t>(used.begin(), used.end()), (std::set<size_t>{0, 2, 3}));
  EXPECT_EQ(used[2], 3u);
  EXPECT_EQ(oc_->cluster().daemon(3).Output().find("Reduce into sm-max"), std::string::npos)
      << "no reduce tree (nor a fallback to one) for small objects";
  for (int h : {3, 1}) {  // the coordinator's copy, and one served inline by the directory
    std::vector<uint8_t> got;
    ASSERT_TRUE(oc_->Connect(h)->Get("sm-max", &got, 5000).ok());
    EXPECT_EQ(got, Expected(t, ReduceOp::kMax, {0, 2, 3}, count)) << "host " << h;
  }
}

// Small sources the coordinator's daemon holds complete (every shard hands objects of up to
// --object-store-copy-bytes to every daemon) arrive at once: the Reduce subscribes only to
// the sources it does not hold, here the one not Put yet.
TEST_F(ObjectsReduce, SmallSourcesHeldHereNeedNoSubscription) {
  const DataType t = DataType::kFloat32;
  const size_t count = 1000;  // 4000 bytes: handed out
  std::vector<std::string> ids = {"held-0", "held-1", "held-2", "held-3"};
  auto put = [&](int s) {
    auto d = Source(t, s, count);
    ASSERT_TRUE(oc_->Connect(1 + s)->Put(ids[s], d.data(), d.size()).ok());
  };
  for (int s = 0; s < 3; ++s) put(s);
  for (int s = 0; s < 3; ++s) {
    // A copy's last bytes become ready only as it completes.
    ASSERT_TRUE(WaitFor([&] { return oc_->ReadyOf(0, ids[s]) == 4000; }, 5000))
        << ids[s] << " was not handed to host 0: " << oc_->State(0);
  }
  std::vector<size_t> used;
  hoplite::Status st;
  std::thread reducer([&] { st = oc_->Connect(0)->Reduce("held-sum", ids, 4, ReduceOp::kSum, t, 20000, &used); });
  EXPECT_TRUE(WaitFor([&] { return oc_->DirectoryEntry("held-3").find("\"subscribers\":1,") != std::string::npos; }, 5000))
      << "the missing source: " << oc_->DirectoryEntry("held-3");
  for (int s = 0; s < 3; ++s) {
    std::string entry = oc_->DirectoryEntry(ids[s]);
    EXPECT_NE(entry.find("\"subscribers\":0,"), std::string::npos) << "a source held at host 0: " << entry;
  }
  put(3);
  reducer.join();
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(used.size(), 4u);
  EXPECT_EQ(used[3], 3u) << "the held sources arrive first";
  std::vector<uint8_t> got;
  ASSERT_TRUE(oc_->Connect(2)->Get("held-sum", &got, 5000).ok());
  EXPECT_EQ(got, Expected(t, ReduceOp::kSum, {0, 1, 2, 3}, count));
}

TEST_F(ObjectsReduce, StragglersAndSourcesStillBeingWritten) {
  const DataType t = DataType::kFloat32;
  const size_t count = (8u << 20) / 4;
  std::vector<std::string> ids = {"str-0", "str-1", "str-2", "str-3", "str-4"};
  for (int s : {0, 2, 3}) {
    auto c = oc_->Connect(s);
    auto d = Source(t, s, count);
    ASSERT_TRUE(c->Put(ids[s], d.data(), d.size()).ok());
  }
  // Source 1 is half written by its program; source 4 does not exist yet.
  auto d1 = Source(t, 1, count);
  RawPutter slow;
  std::string error;
  ASSERT_TRUE(slow.Begin(oc_->cluster().Socket(1), ids[1], d1.size(), &error)) << error;
  ASSERT_TRUE(slow.Write(d1, 0, d1.size() / 2));
  std::vector<size_t> used;
  hoplite::Status st;
  std::thread reducer([&] {
    auto c = oc_->Connect(4);
    st = c->Reduce("str-sum", ids, 5, ReduceOp::kSum, t, 30000, &used);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto d4 = Source(t, 4, count);
  auto c4 = oc_->Connect(4);
  ASSERT_TRUE(c4->Put(ids[4], d4.data(), d4.size()).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ASSERT_TRUE(slow.Write(d1, d1.size() / 2, d1.size()));
  ASSERT_TRUE(slow.Finish(&error)) << error;
  reducer.join();
  ASSERT_TRUE(st.ok()) << st.ToString();
  std::vector<uint8_t> got;
  ASSERT_TRUE(oc_->Connect(0)->Get("str-sum", &got, 5000).ok());
  EXPECT_EQ(got, Expected(t, ReduceOp::kSum, {0, 1, 2, 3, 4}, count));
}

// The target is a partial copy while it is reduced: a reader on another host receives the
// blocks that are final (every source is in the tree) before the Reduce returns.
TEST_F(ObjectsReduce, TargetIsReadableWhileItIsReduced) {
  const DataType t = DataType::kInt32;
  const size_t count = (8u << 20) / 4;
  const size_t bytes = count * 4;
  std::vector<std::string> ids = {"live-0", "live-1", "live-2", "live-3"};
  for (int s : {0, 2, 3}) {
    auto d = Source(t, s, count);
    ASSERT_TRUE(oc_->Connect(s + 1)->Put(ids[s], d.data(), d.size()).ok());
  }
  auto d1 = Source(t, 1, count);
  RawPutter slow;  // source 1 is half written: the Reduce cannot finish yet
  std::string error;
  ASSERT_TRUE(slow.Begin(oc_->cluster().Socket(2), ids[1], d1.size(), &error)) << error;
  ASSERT_TRUE(slow.Write(d1, 0, bytes / 2));
  std::atomic<bool> reduced{false};
  hoplite::Status st, read;
  std::thread reducer([&] {
    st = oc_->Connect(0)->Reduce("live-sum", ids, 4, ReduceOp::kSum, t, 30000);
    reduced = true;
  });
  std::vector<uint8_t> got;
  std::thread reader([&] { read = oc_->Connect(3)->Get("live-sum", &got, 30000); });
  EXPECT_TRUE(WaitFor([&] { return oc_->ReadyOf(3, "live-sum") >= static_cast<long long>(bytes / 4); }))
      << "no block of the target reached host 3 while it was reduced";
  EXPECT_FALSE(reduced.load());
  auto other = Source(t, 9, 1000);
  EXPECT_EQ(oc_->Connect(4)->Put("live-sum", other.data(), other.size()).code(), Code::kExists)
      << "a running Reduce's target is taken";
  ASSERT_TRUE(slow.Write(d1, bytes / 2, bytes));
  ASSERT_TRUE(slow.Finish(&error)) << error;
  reducer.join();
  reader.join();
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_TRUE(read.ok()) << read.ToString();
  auto want = Expected(t, ReduceOp::kSum, {0, 1, 2, 3}, count);
  EXPECT_EQ(Fnv(got), Fnv(want));
  std::vector<uint8_t> local;
  ASSERT_TRUE(oc_->Connect(0)->Get("live-sum", &local, 5000).ok());
  EXPECT_EQ(Fnv(local), Fnv(want));
}

// With a spare source left, a failure could still swap a source and change every byte, so
// the target stays unreadable (ready 0) until the Reduce completes, however much of it the
// sink has written.
TEST_F(ObjectsReduce, TargetWithASpareSourceIsReadableOnlyWhenComplete) {
  const DataType t = DataType::kInt32;
  const size_t count = (8u << 20) / 4;
  const size_t bytes = count * 4;
  std::vector<std::string> ids = {"spare-0", "spare-1", "spare-2", "spare-3", "spare-4"};  // spare-4 never comes
  for (int s : {0, 2, 3}) {
    auto d = Source(t, s, count);
    ASSERT_TRUE(oc_->Connect(s + 1)->Put(ids[s], d.data(), d.size()).ok());
  }
  auto d1 = Source(t, 1, count);
  RawPutter slow;
  std::string error;
  ASSERT_TRUE(slow.Begin(oc_->cluster().Socket(2), ids[1], d1.size(), &error)) << error;
  ASSERT_TRUE(slow.Write(d1, 0, bytes / 2));
  hoplite::Status st, read;
  std::vector<size_t> used;
  std::thread reducer([&] { st = oc_->Connect(0)->Reduce("spare-sum", ids, 4, ReduceOp::kSum, t, 30000, &used); });
  std::vector<uint8_t> got;
  std::thread reader([&] { read = oc_->Connect(3)->Get("spare-sum", &got, 30000); });
  EXPECT_TRUE(WaitFor([&] { return oc_->ReduceJobNumber(0, "spare-sum", "written") >= static_cast<long long>(bytes / 4); }))
      << oc_->State(0);
  EXPECT_EQ(oc_->ReadyOf(0, "spare-sum"), 0);
  EXPECT_LE(oc_->ReadyOf(3, "spare-sum"), 0);
  ASSERT_TRUE(slow.Write(d1, bytes / 2, bytes));
  ASSERT_TRUE(slow.Finish(&error)) << error;
  reducer.join();
  reader.join();
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(std::set<size_t>(used.begin(), used.end()), (std::set<size_t>{0, 1, 2, 3}));
  ASSERT_TRUE(read.ok()) << read.ToString();
  EXPECT_EQ(Fnv(got), Fnv(Expected(t, ReduceOp::kSum, {0, 1, 2, 3}, count)));
}

TEST_F(ObjectsReduce, ReducesCompose) {
  const DataType t = DataType::kInt64;
  const size_t count = 200000;
  for (int s = 0; s < 3; ++s) {
    auto d = Source(t, s, count);
    ASSERT_TRUE(oc_->Connect(s + 1)->Put("cmp-" + std::to_string(s), d.data(), d.size()).ok());
  }
  auto c = oc_->Connect(0);
  ASSERT_TRUE(c->Reduce("cmp-ab", {"cmp-0", "cmp-1"}, 2, ReduceOp::kSum, t, 10000).ok());
  ASSERT_TRUE(oc_->Connect(3)->Reduce("cmp-abc", {"cmp-ab", "cmp-2"}, 2, ReduceOp::kSum, t, 10000).ok());
  std::vector<uint8_t> got;
  ASSERT_TRUE(c->Get("cmp-abc", &got, 5000).ok());
  EXPECT_EQ(got, Expected(t, ReduceOp::kSum, {0, 1, 2}, count));
}

TEST_F(ObjectsReduce, LargeObjectsUseAChain) {
  const DataType t = DataType::kFloat32;
  const size_t count = (32u << 20) / 4;
  std::vector<std::string> ids;
  for (int s = 0; s < kHosts; ++s) {
    ids.push_back("big-" + std::to_string(s));
    auto d = Source(t, s, count);
    ASSERT_TRUE(oc_->Connect(s)->Put(ids.back(), d.data(), d.size()).ok());
  }
  // Three sources: slots of a 3-node chain (the largest n whose sums stay exact).
  std::vector<size_t> used;
  auto c = oc_->Connect(2);
  ASSERT_TRUE(c->Reduce("big-sum", ids, 3, ReduceOp::kSum, t, 30000, &used).ok());
  std::vector<int> srcs(used.begin(), used.end());
  std::shared_ptr<const hoplite::ObjectView> v;
  ASSERT_TRUE(c->GetReadOnly("big-sum", &v, 5000).ok());
  auto want = Expected(t, ReduceOp::kSum, srcs, count);
  EXPECT_EQ(Fnv(v->data(), v->size()), Fnv(want));
  EXPECT_NE(oc_->cluster().daemon(2).Output().find("Reduce into big-sum: 3 of 5 objects of 33554432 bytes, tree degree 1"),
            std::string::npos)
      << oc_->cluster().daemon(2).Output();
}

TEST_F(ObjectsReduce, BadRequestsGetClearErrors) {
  auto c = oc_->Connect(1);
  auto a = Source(DataType::kInt32, 0, 1000);
  auto b = Source(DataType::kInt32, 1, 2000);
  ASSERT_TRUE(c->Put("bad-a", a.data(), a.size()).ok());
  ASSERT_TRUE(c->Put("bad-b", b.data(), b.size()).ok());
  hoplite::Status st = c->Reduce("bad-t", {"bad-a", "bad-b"}, 2, ReduceOp::kSum, DataType::kInt32, 5000);
  EXPECT_EQ(st.code(), Code::kInvalid) << st.ToString();
  EXPECT_EQ(c->Reduce("bad-t2", {"bad-a"}, 2, ReduceOp::kSum, DataType::kInt32, 5000).code(), Code::kInvalid);
  EXPECT_EQ(c->Reduce("bad-a", {"bad-a", "bad-b"}, 1, ReduceOp::kSum, DataType::kInt32, 5000).code(), Code::kInvalid);
  EXPECT_EQ(c->Reduce("bad-t3", {"bad-a", "bad-a"}, 1, ReduceOp::kSum, DataType::kInt32, 5000).code(), Code::kInvalid);
  auto odd = Pattern(1001, 1);
  ASSERT_TRUE(c->Put("bad-odd", odd.data(), odd.size()).ok());
  EXPECT_EQ(c->Reduce("bad-t4", {"bad-odd"}, 1, ReduceOp::kSum, DataType::kInt32, 5000).code(), Code::kInvalid);
  // Not enough sources ever appear: a bounded wait, then a message saying so.
  auto t0 = std::chrono::steady_clock::now();
  st = c->Reduce("bad-t5", {"bad-a", "missing-1", "missing-2"}, 2, ReduceOp::kSum, DataType::kInt32, 400);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(st.code(), Code::kTimeout) << st.ToString();
  EXPECT_NE(st.message().find("1 of the 2 objects"), std::string::npos) << st.message();
  EXPECT_LT(ms, 5000);
  // The target may not exist already.
  EXPECT_EQ(c->Reduce("bad-b", {"bad-a"}, 1, ReduceOp::kSum, DataType::kInt32, 5000).code(), Code::kExists);
}

}  // namespace
}  // namespace conduit::it
