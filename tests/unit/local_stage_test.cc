// LocalStage without a network: combining local ranks chunk by chunk, waiting for streamed
// input, finalizing out of order exactly once, and the done bits a shim copies out by.
#include "collectives/local_stage.h"

#include <gtest/gtest.h>

#include <cstring>
#include <thread>
#include <vector>

#include "common/stream_copy.h"

namespace conduit {
namespace {

constexpr size_t kSegment = 8 << 20;

struct FakeRank {
  std::vector<uint8_t> mem = std::vector<uint8_t>(kSegment);
  StagingControl* control() { return ControlOf(mem.data()); }
  float* data() { return reinterpret_cast<float*>(mem.data() + kStagingControlBytes); }
};

shimproto::OpDesc Op(uint8_t kind, uint64_t count, uint8_t redop = ncclSum, int root = 0) {
  shimproto::OpDesc op{};
  op.kind = kind;
  op.dtype = ncclFloat32;
  op.redop = redop;
  op.peer = root;
  op.count = count;
  op.offset = kStagingControlBytes;
  return op;
}

StageRank Rank(FakeRank& f, int rank, const shimproto::OpDesc& op, bool streamed) {
  if (streamed) {
    f.control()->input_complete.store(0);
    f.control()->input_wanted.store(0);
    for (auto& w : f.control()->input_done) w.store(0);
    for (auto& w : f.control()->done) w.store(0);
  }
  return StageRank{rank, f.mem.data(), f.mem.size(), op, streamed ? f.control() : nullptr, -1};
}

bool Done(FakeRank& f, size_t chunk) { return (f.control()->done[chunk / 64].load() >> (chunk % 64)) & 1; }

Status NoFailure() { return Status::Ok(); }

TEST(LocalStageTest, AllReduceCombinesAndCopiesOut) {
  const size_t n = 300000;  // not a multiple of any chunk
  FakeRank a, b;
  for (size_t i = 0; i < n; ++i) {
    a.data()[i] = 1.0f + static_cast<float>(i % 7);
    b.data()[i] = 2.0f;
  }
  auto op = Op(shimproto::kAllReduce, n);
  LocalStage stage({Rank(a, 0, op, false), Rank(b, 1, op, false)}, 4, Deadline::AfterMs(5000), NoFailure);
  ASSERT_EQ(stage.work(), reinterpret_cast<uint8_t*>(a.data()));
  // Out of order, overlapping, twice: each byte is combined and finalized once.
  ASSERT_TRUE(stage.Ensure(4 * 200000, 4 * 1000).ok());
  ASSERT_TRUE(stage.Ensure(0, 4 * n).ok());
  ASSERT_TRUE(stage.Ensure(0, 4 * n).ok());
  stage.Finalize(4 * 1000, 4 * 5000);
  stage.Finalize(4 * 1000, 4 * 5000);
  ASSERT_TRUE(stage.Finish().ok());
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(a.data()[i], 3.0f + static_cast<float>(i % 7)) << i;
    ASSERT_EQ(b.data()[i], a.data()[i]) << i;
  }
}

TEST(LocalStageTest, AvgDividesOnceAtTheEnd) {
  const size_t n = 1000;
  FakeRank a, b;
  for (size_t i = 0; i < n; ++i) a.data()[i] = b.data()[i] = 8.0f;
  auto op = Op(shimproto::kAllReduce, n, ncclAvg);
  LocalStage stage({Rank(a, 0, op, true), Rank(b, 1, op, true)}, 2, Deadline::AfterMs(5000), NoFailure);
  a.control()->input_complete.store(1);
  b.control()->input_complete.store(1);
  ASSERT_TRUE(stage.Ensure(0, 4 * n).ok());
  stage.Finalize(0, 4 * n);  // deferred for Avg
  EXPECT_FALSE(Done(a, 0));
  ASSERT_TRUE(stage.Finish().ok());
  EXPECT_TRUE(Done(a, 0) && Done(b, 0));
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(b.data()[i], 8.0f) << i;  // (8 + 8) / 2
}

TEST(LocalStageTest, WaitsForStreamedInput) {
  const size_t n = 1 << 20;  // 4 MiB: several combine chunks
  FakeRank a, b;
  auto op = Op(shimproto::kAllReduce, n);
  LocalStage stage({Rank(a, 0, op, true), Rank(b, 1, op, true)}, 2, Deadline::AfterMs(10000), NoFailure);
  std::thread shim([&] {
    // Rank b's "shim" copies its input in late and in pieces.
    for (size_t i = 0; i < n; ++i) b.data()[i] = 1.0f;
    for (size_t i = 0; i < n; ++i) a.data()[i] = 2.0f;
    PublishInputComplete(a.control());
    // 4 MiB + the control page span chunks 0..16 of 256 KiB: publish them in four batches.
    for (size_t batch = 0; batch < 4; ++batch) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      for (size_t c = batch * 5; c < std::min<size_t>(17, (batch + 1) * 5); ++c) PublishInputChunk(b.control(), c);
    }
  });
  ASSERT_TRUE(stage.Finish().ok());
  shim.join();
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(b.data()[i], 3.0f) << i;
  // 4 MiB + the control page in 256 KiB chunks: chunks 0..16 hold output bytes.
  for (size_t c = 0; c <= 16; ++c) EXPECT_TRUE(Done(b, c)) << c;
  EXPECT_FALSE(Done(b, 17));
}

TEST(LocalStageTest, AsksForTheInputItWaitsFor) {
  // A "shim" that copies only what the daemon asks for: each wait must name its chunk,
  // and the daemon must get the end of the buffer without the start being copied first.
  const size_t n = 1 << 20;  // 4 MiB + the control page: chunks 0..16 of 256 KiB
  const size_t chunks = 17;
  FakeRank a;
  for (size_t i = 0; i < n; ++i) a.data()[i] = 1.0f;
  auto op = Op(shimproto::kAllReduce, n);
  LocalStage stage({Rank(a, 0, op, true)}, 2, Deadline::AfterMs(10000), NoFailure);
  std::vector<size_t> served;
  std::thread shim([&] {
    const size_t g = StagingChunkBytes(kSegment);
    uint64_t last = 0;
    Deadline give_up = Deadline::AfterMs(10000);
    while (served.size() < chunks && !give_up.expired()) {
      uint64_t wanted = a.control()->input_wanted.load();
      if (wanted == 0 || wanted == last) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        continue;
      }
      last = wanted;
      served.push_back((wanted - 1) / g);
      PublishInputChunk(a.control(), served.back());
    }
  });
  ASSERT_TRUE(stage.Ensure(4 * (n - 1000), 4 * 1000).ok());  // the last 4000 bytes: chunk 16
  ASSERT_TRUE(stage.Finish().ok());
  shim.join();
  // The daemon combines 512 KiB of the work buffer at a time: the last such piece (work
  // bytes [3.5, 4) MiB, segment chunks 14..16 after the control page) first, then the rest
  // in order, as Finish needs it.
  std::vector<size_t> expected{14, 15, 16};
  for (size_t c = 0; c < 14; ++c) expected.push_back(c);
  EXPECT_EQ(served, expected);
}

TEST(LocalStageTest, StreamedWaitEndsOnAbortAndDeadline) {
  FakeRank a;
  auto op = Op(shimproto::kAllReduce, 1000);
  {
    LocalStage stage({Rank(a, 0, op, true)}, 1, Deadline::AfterMs(200), NoFailure);
    Status st = stage.Ensure(0, 4000);
    EXPECT_EQ(st.code(), ncclRemoteError);
    EXPECT_NE(st.message().find("timed out"), std::string::npos) << st.message();
  }
  LocalStage stage({Rank(a, 0, op, true)}, 1, Deadline::AfterMs(60000),
                   [] { return RemoteError("communicator aborted"); });
  Status st = stage.Ensure(0, 4000);
  EXPECT_EQ(st.message(), "communicator aborted");
}

TEST(LocalStageTest, ReduceScatterMarksOnlyEachRanksBlock) {
  const size_t block = 100000;  // per-rank count; 4 ranks, two of them here
  FakeRank a, b;
  for (size_t i = 0; i < 4 * block; ++i) a.data()[i] = b.data()[i] = 1.0f;
  auto op = Op(shimproto::kReduceScatter, block);
  // Local ranks 1 and 3 of 4.
  LocalStage stage({Rank(a, 1, op, true), Rank(b, 3, op, true)}, 4, Deadline::AfterMs(5000), NoFailure);
  PublishInputComplete(a.control());
  PublishInputComplete(b.control());
  ASSERT_TRUE(stage.Ensure(0, 4 * 4 * block).ok());
  stage.Finalize(4 * 3 * block, 4 * block);  // rank 3's block only
  const size_t g = StagingChunkBytes(kSegment);
  const size_t b3_first = (kStagingControlBytes + 4 * 3 * block) / g;
  const size_t b3_last = (kStagingControlBytes + 4 * 4 * block - 1) / g;
  for (size_t c = b3_first; c <= b3_last; ++c) EXPECT_TRUE(Done(b, c)) << c;
  EXPECT_FALSE(Done(a, (kStagingControlBytes + 4 * block) / g)) << "rank 1's block is not final yet";
  ASSERT_TRUE(stage.Finish().ok());
  for (size_t i = 0; i < block; ++i) {
    ASSERT_EQ(b.data()[3 * block + i], 2.0f);
    ASSERT_EQ(a.data()[1 * block + i], 2.0f);
  }
}

// A reduce's result ends in its root's region, whichever local rank the root is: no copy.
TEST(LocalStageTest, ReduceRootNeedNotLead) {
  const size_t n = 5000;
  FakeRank a, b;
  for (size_t i = 0; i < n; ++i) a.data()[i] = 1.0f, b.data()[i] = 2.0f;
  auto op = Op(shimproto::kReduce, n, ncclSum, /*root=*/5);
  MemoryTraffic traffic;
  LocalStage stage({Rank(a, 4, op, false), Rank(b, 5, op, false)}, 8, Deadline::AfterMs(5000), NoFailure, &traffic);
  EXPECT_EQ(stage.work(), reinterpret_cast<uint8_t*>(b.data()));
  ASSERT_TRUE(stage.Finish().ok());
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(b.data()[i], 3.0f);
  EXPECT_EQ(traffic.Snapshot().local_copies, 0u);
  EXPECT_EQ(traffic.Snapshot().reduce_writes, 4 * n);

  // PreMulSum: the root's input is scaled before the others are folded into it.
  for (size_t i = 0; i < n; ++i) a.data()[i] = 1.0f, b.data()[i] = 2.0f;
  auto pop = Op(shimproto::kReduce, n, shimproto::kRedOpPreMulSum, /*root=*/5);
  const float factor = 3.0f;
  memcpy(pop.scalar, &factor, sizeof factor);
  LocalStage scaled({Rank(a, 4, pop, false), Rank(b, 5, pop, false)}, 8, Deadline::AfterMs(5000), NoFailure);
  ASSERT_TRUE(scaled.Finish().ok());
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(b.data()[i], 9.0f) << i;
}

TEST(LocalStageTest, BroadcastRootNeedNotLead) {
  const size_t n = 5000;
  FakeRank a, b;
  for (size_t i = 0; i < n; ++i) b.data()[i] = 7.0f;
  auto op = Op(shimproto::kBroadcast, n, ncclSum, /*root=*/5);
  LocalStage stage({Rank(a, 4, op, false), Rank(b, 5, op, false)}, 8, Deadline::AfterMs(5000), NoFailure);
  EXPECT_EQ(stage.work(), reinterpret_cast<uint8_t*>(b.data()));
  ASSERT_TRUE(stage.Finish().ok());
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(a.data()[i], 7.0f);
}

// The copies LocalStage counts (docs/design.md "Copies per payload byte") are the ones it
// makes: each byte combined and copied out once, however often and in whatever order the
// algorithm asks, plus the shims' copies the op implies.
TEST(LocalStageTest, CountsEachCopyOnce) {
  const size_t n = 300000;
  const uint64_t S = 4 * n;
  {
    FakeRank a, b, c;
    auto op = Op(shimproto::kAllReduce, n);
    MemoryTraffic traffic;
    LocalStage stage({Rank(a, 0, op, false), Rank(b, 1, op, false), Rank(c, 2, op, false)}, 6,
                     Deadline::AfterMs(5000), NoFailure, &traffic);
    ASSERT_TRUE(stage.Ensure(4 * 200000, 4 * 1000).ok());
    ASSERT_TRUE(stage.Ensure(0, S).ok());
    stage.Finalize(4 * 1000, 4 * 5000);
    stage.Finalize(0, S);
    ASSERT_TRUE(stage.Finish().ok());
    TrafficCounts t = traffic.Snapshot();
    EXPECT_EQ(t.program_copies, 3 * 2 * S);  // three ranks: input in, result out
    EXPECT_EQ(t.reduce_writes, 2 * S);       // two ranks folded into the first's region
    EXPECT_EQ(t.local_copies, 2 * S);        // the result to those two
    EXPECT_EQ(t.socket_sends + t.socket_receives, 0u);
  }
  {
    FakeRank a, b;
    auto op = Op(shimproto::kAllGather, n / 4);  // 4 ranks, 2 of them here
    const uint64_t block = S / 4;
    MemoryTraffic traffic;
    LocalStage stage({Rank(a, 1, op, false), Rank(b, 2, op, false)}, 4, Deadline::AfterMs(5000), NoFailure, &traffic);
    ASSERT_TRUE(stage.Ensure(0, S).ok());
    ASSERT_TRUE(stage.Ensure(0, S).ok());
    ASSERT_TRUE(stage.Finish().ok());
    TrafficCounts t = traffic.Snapshot();
    EXPECT_EQ(t.program_copies, 2 * (block + S));  // each rank's block in, every block out
    EXPECT_EQ(t.local_copies, block + S);          // rank 2's block in, the whole result out to it
    EXPECT_EQ(t.reduce_writes, 0u);
  }
}

// The communicator's result area (collectives/result_area.h): where every streamed local
// rank reads one whole result, the stage works in the area, copies nothing into the ranks'
// segments, names the area in each control page and still sets each rank's done bits.
TEST(LocalStageTest, ResultAreaHoldsTheResultEveryRankReads) {
  const size_t n = 300000;
  const uint64_t S = 4 * n;
  std::vector<float> area(n + 1000, -1.0f);
  SharedOutput shared{reinterpret_cast<uint8_t*>(area.data()), area.size() * 4, 0x1234};
  {
    FakeRank a, b, c;
    for (size_t i = 0; i < n; ++i) {
      a.data()[i] = 1.0f;
      b.data()[i] = static_cast<float>(i % 5);
      c.data()[i] = 10.0f;
    }
    auto op = Op(shimproto::kAllReduce, n);
    MemoryTraffic traffic;
    LocalStage stage({Rank(a, 0, op, true), Rank(b, 1, op, true), Rank(c, 2, op, true)}, 6, Deadline::AfterMs(5000),
                     NoFailure, &traffic, nullptr, &shared);
    ASSERT_TRUE(stage.shares_output());
    EXPECT_EQ(stage.work(), shared.data);
    for (FakeRank* f : {&a, &b, &c}) PublishInputComplete(f->control());
    ASSERT_TRUE(stage.Finish().ok());
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(area[i], 11.0f + static_cast<float>(i % 5)) << i;
      // The segments keep their inputs: nothing was copied into them.
      ASSERT_EQ(a.data()[i], 1.0f) << i;
      ASSERT_EQ(b.data()[i], static_cast<float>(i % 5)) << i;
    }
    EXPECT_EQ(area[n], -1.0f);  // nothing past the result
    for (FakeRank* f : {&a, &b, &c}) {
      EXPECT_EQ(f->control()->result_area.load(), 0x1234u);
      // S + the control page in 256 KiB chunks: chunks 0..4 hold output bytes.
      for (size_t k = 0; k <= 4; ++k) EXPECT_TRUE(Done(*f, k)) << k;
    }
    TrafficCounts t = traffic.Snapshot();
    EXPECT_EQ(t.program_copies, 3 * 2 * S);  // as without the area: each input in, each result out
    EXPECT_EQ(t.reduce_writes, 2 * S);       // the first fold writes the area, the second adds to it
    EXPECT_EQ(t.local_copies, 0u);           // where (L-1)S went before
  }
  {
    // AllGather: every local block goes into the area, none comes back into a segment.
    FakeRank a, b;
    for (size_t i = 0; i < n / 4; ++i) {
      a.data()[n / 4 + i] = 1.0f;  // rank 1's block
      b.data()[2 * (n / 4) + i] = 2.0f;  // rank 2's block
    }
    auto op = Op(shimproto::kAllGather, n / 4);
    MemoryTraffic traffic;
    LocalStage stage({Rank(a, 1, op, true), Rank(b, 2, op, true)}, 4, Deadline::AfterMs(5000), NoFailure, &traffic,
                     nullptr, &shared);
    ASSERT_TRUE(stage.shares_output());
    for (FakeRank* f : {&a, &b}) PublishInputComplete(f->control());
    ASSERT_TRUE(stage.Ensure(0, S).ok());
    for (size_t i = 0; i < n / 4; ++i) {
      ASSERT_EQ(area[n / 4 + i], 1.0f) << i;
      ASSERT_EQ(area[2 * (n / 4) + i], 2.0f) << i;
    }
    EXPECT_EQ(traffic.Snapshot().local_copies, 2 * (S / 4));  // the two local blocks in
  }
}

// The area is taken only where it holds the whole result and every rank reads it from a
// streamed segment: otherwise the stage works as before and no control page names it.
TEST(LocalStageTest, ResultAreaOnlyWhenEveryRankCanReadIt) {
  const size_t n = 300000;
  std::vector<float> area(n);
  SharedOutput shared{reinterpret_cast<uint8_t*>(area.data()), area.size() * 4, 0x99};
  SharedOutput small{shared.data, shared.size - 4, shared.number};
  struct Case {
    const char* what;
    uint8_t kind;
    bool a_streamed, b_streamed;
    const SharedOutput* area;
  };
  for (const Case& k : {Case{"one rank not streamed", shimproto::kAllReduce, true, false, &shared},
                        Case{"area too small", shimproto::kAllReduce, true, true, &small},
                        Case{"AllReduce of two local ranks", shimproto::kAllReduce, true, true, &shared},
                        Case{"ReduceScatter (results differ per rank)", shimproto::kReduceScatter, true, true, &shared},
                        Case{"Reduce (one rank's result)", shimproto::kReduce, true, true, &shared}}) {
    FakeRank a, b;
    const uint64_t count = k.kind == shimproto::kReduceScatter ? n / 2 : n;
    auto op = Op(k.kind, count);
    LocalStage stage({Rank(a, 0, op, k.a_streamed), Rank(b, 1, op, k.b_streamed)}, 2, Deadline::AfterMs(5000),
                     NoFailure, nullptr, nullptr, k.area);
    EXPECT_FALSE(stage.shares_output()) << k.what;
    EXPECT_NE(stage.work(), shared.data) << k.what;
    EXPECT_EQ(a.control()->result_area.load(), 0u) << k.what;
    EXPECT_EQ(b.control()->result_area.load(), 0u) << k.what;
  }
  // One rank alone on its host reads its result from its segment, where it was made.
  FakeRank a;
  auto op = Op(shimproto::kBroadcast, n);
  LocalStage alone({Rank(a, 0, op, true)}, 2, Deadline::AfterMs(5000), NoFailure, nullptr, nullptr, &shared);
  EXPECT_FALSE(alone.shares_output());
}

// Ranks whose op runs in host regions (their own ncclMemAlloc'd buffers) mixed with a
// staged rank on one host: inputs are read where they are and never written, every output
// gets the result, the work buffer is the leading rank's own output, and no copy is counted
// for a shim.
StageRank RegionRank(int rank, const shimproto::OpDesc& op, const float* input, float* output) {
  StageRank r{rank, nullptr, 0, op, nullptr, -1};
  r.regions = true;
  r.op.flags = shimproto::kOpRegion;
  r.op.offset = 0;
  r.input = reinterpret_cast<const uint8_t*>(input);
  r.output = reinterpret_cast<uint8_t*>(output);
  return r;
}

TEST(LocalStageTest, HostRegionsAllReduceOutOfPlaceInPlaceAndStaged) {
  const size_t n = 300000;
  const uint64_t S = 4 * n;
  std::vector<float> in0(n), out0(n, -1.0f), inout1(n);
  FakeRank staged;
  for (size_t i = 0; i < n; ++i) {
    in0[i] = 1.0f + static_cast<float>(i % 5);
    inout1[i] = 10.0f;
    staged.data()[i] = 100.0f;
  }
  const std::vector<float> in0_before = in0;
  auto op = Op(shimproto::kAllReduce, n);
  MemoryTraffic traffic;
  LocalStage stage({RegionRank(0, op, in0.data(), out0.data()), RegionRank(1, op, inout1.data(), inout1.data()),
                    Rank(staged, 2, op, false)},
                   3, Deadline::AfterMs(5000), NoFailure, &traffic);
  ASSERT_EQ(stage.work(), reinterpret_cast<uint8_t*>(out0.data()));
  ASSERT_TRUE(stage.Ensure(4 * 200000, 4 * 1000).ok());
  ASSERT_TRUE(stage.Finish().ok());
  for (size_t i = 0; i < n; ++i) {
    const float want = 111.0f + static_cast<float>(i % 5);
    ASSERT_EQ(out0[i], want) << i;
    ASSERT_EQ(inout1[i], want) << i;
    ASSERT_EQ(staged.data()[i], want) << i;
  }
  EXPECT_EQ(in0, in0_before);  // an input is never written
  TrafficCounts t = traffic.Snapshot();
  EXPECT_EQ(t.program_copies, 2 * S);  // only the staged rank's shim copies
  EXPECT_EQ(t.reduce_writes, 2 * S);   // rank 0's input and rank 1's in one pass (Reduce2), then rank 2's
  EXPECT_EQ(t.local_copies, 2 * S);    // the result to ranks 1 and 2
}

// From NonTemporalOutputMinBytes (16 MiB) the result goes into another rank's own buffer
// with non-temporal stores (common/stream_copy.h): every element still arrives, with an
// output that does not start on a cache line and a length that is not whole lines, and the
// copy is counted as before.
TEST(LocalStageTest, HostRegionsLargeOutputsAreCopiedWhole) {
  const size_t n = NonTemporalOutputMinBytes() / 4 + 13;
  const uint64_t S = 4 * n;
  std::vector<float> in0(n), out0(n, -1.0f), in1(n, 10.0f), out1_mem(n + 1, -1.0f);
  for (size_t i = 0; i < n; ++i) in0[i] = static_cast<float>(i % 7);
  float* out1 = out1_mem.data() + 1;  // 4 bytes past the allocation's (aligned) start
  auto op = Op(shimproto::kAllReduce, n);
  MemoryTraffic traffic;
  LocalStage stage({RegionRank(0, op, in0.data(), out0.data()), RegionRank(1, op, in1.data(), out1)}, 2,
                   Deadline::AfterMs(20000), NoFailure, &traffic);
  ASSERT_TRUE(stage.Finish().ok());
  for (size_t i = 0; i < n; ++i) {
    const float want = 10.0f + static_cast<float>(i % 7);
    ASSERT_EQ(out0[i], want) << i;
    ASSERT_EQ(out1[i], want) << i;
  }
  EXPECT_EQ(out1_mem[0], -1.0f);  // nothing before the output written
  EXPECT_EQ(traffic.Snapshot().local_copies, S);  // the result to rank 1
}

TEST(LocalStageTest, HostRegionsAloneCopyTheInputOnlyWhenOutOfPlace) {
  const size_t n = 100000;
  const uint64_t S = 4 * n;
  for (bool in_place : {false, true}) {
    std::vector<float> in(n, 3.0f), out(n, 0.0f);
    float* result = in_place ? in.data() : out.data();
    auto op = Op(shimproto::kAllReduce, n);
    MemoryTraffic traffic;
    LocalStage stage({RegionRank(0, op, in.data(), result)}, 2, Deadline::AfterMs(5000), NoFailure, &traffic);
    ASSERT_TRUE(stage.Finish().ok());
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(result[i], 3.0f) << i;
    TrafficCounts t = traffic.Snapshot();
    EXPECT_EQ(t.program_copies, 0u);
    EXPECT_EQ(t.local_copies, in_place ? 0u : S) << (in_place ? "in place" : "out of place");
  }
}

// TakeInputApart: only one rank's out-of-place all-reduce in its own buffers qualifies;
// then the stage copies nothing and leaves every byte of the work buffer to the algorithm.
TEST(LocalStageTest, InputApartOnlyForOneRanksOutOfPlaceAllReduceInRegions) {
  const size_t n = 100000;
  std::vector<float> in(n, 3.0f), out(n, -1.0f);
  auto op = Op(shimproto::kAllReduce, n);
  MemoryTraffic traffic;
  LocalStage apart({RegionRank(0, op, in.data(), out.data())}, 2, Deadline::AfterMs(5000), NoFailure, &traffic);
  EXPECT_EQ(apart.TakeInputApart(), reinterpret_cast<const uint8_t*>(in.data()));
  ASSERT_TRUE(apart.Ensure(0, 4 * n).ok());
  ASSERT_TRUE(apart.Finish().ok());
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], -1.0f) << i;  // untouched: the algorithm's to write
  EXPECT_EQ(traffic.Snapshot().local_copies, 0u);

  // In place; two local ranks; streamed; another collective; PreMulSum: nothing changes.
  LocalStage in_place({RegionRank(0, op, out.data(), out.data())}, 2, Deadline::AfterMs(5000), NoFailure);
  EXPECT_EQ(in_place.TakeInputApart(), nullptr);
  std::vector<float> in1(n, 1.0f), out1(n);
  LocalStage two({RegionRank(0, op, in.data(), out.data()), RegionRank(1, op, in1.data(), out1.data())}, 4,
                 Deadline::AfterMs(5000), NoFailure);
  EXPECT_EQ(two.TakeInputApart(), nullptr);
  StageRank streamed = RegionRank(0, op, in.data(), out.data());
  FakeRank f;
  streamed.control = f.control();
  f.control()->input_complete.store(1);
  LocalStage with_control({streamed}, 2, Deadline::AfterMs(5000), NoFailure);
  EXPECT_EQ(with_control.TakeInputApart(), nullptr);
  auto bop = Op(shimproto::kBroadcast, n);
  LocalStage broadcast({RegionRank(0, bop, in.data(), out.data())}, 2, Deadline::AfterMs(5000), NoFailure);
  EXPECT_EQ(broadcast.TakeInputApart(), nullptr);
  // A reduce's root in place keeps its input where the result goes; away from the root, and
  // for a reduce-scatter, the input is apart from the (daemon's) work buffer.
  auto rop = Op(shimproto::kReduce, n, ncclSum, /*root=*/0);
  LocalStage reduce_root({RegionRank(0, rop, out.data(), out.data())}, 2, Deadline::AfterMs(5000), NoFailure);
  EXPECT_EQ(reduce_root.TakeInputApart(), nullptr);
  LocalStage reduce_other({RegionRank(1, rop, in.data(), nullptr)}, 2, Deadline::AfterMs(5000), NoFailure);
  EXPECT_EQ(reduce_other.TakeInputApart(), reinterpret_cast<const uint8_t*>(in.data()));
  auto sop = Op(shimproto::kReduceScatter, n / 2);
  LocalStage scatter({RegionRank(0, sop, in.data(), out.data())}, 2, Deadline::AfterMs(5000), NoFailure);
  EXPECT_EQ(scatter.TakeInputApart(), reinterpret_cast<const uint8_t*>(in.data()));
  EXPECT_EQ(scatter.FinalPlace(0, 4 * n), nullptr);  // rank 0's block is the first n/2 floats
  EXPECT_EQ(scatter.FinalPlace(4 * (n / 2), 4), nullptr);
  EXPECT_EQ(scatter.FinalPlace(4, 8), reinterpret_cast<uint8_t*>(out.data()) + 4);
  EXPECT_EQ(reduce_other.FinalPlace(0, 4), nullptr);  // a reduce's result is not a rank's here
  ASSERT_TRUE(scatter.Finish().ok());  // (the algorithm never ran: nothing is checked but that it ends)
  auto pop = Op(shimproto::kAllReduce, n, shimproto::kRedOpPreMulSum);
  LocalStage premul({RegionRank(0, pop, in.data(), out.data())}, 2, Deadline::AfterMs(5000), NoFailure);
  EXPECT_EQ(premul.TakeInputApart(), nullptr);
  // Refused: the stage still copies the input into the work buffer.
  std::fill(out.begin(), out.end(), -1.0f);
  ASSERT_TRUE(broadcast.Finish().ok());
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], 3.0f) << i;
}

TEST(LocalStageTest, HostRegionsAllGatherAndBroadcast) {
  const size_t block = 50000;  // floats per rank; 4 ranks, 2 of them here (ranks 1 and 2)
  std::vector<float> send1(block, 1.0f), recv1(4 * block, 0.0f), recv2(4 * block, 0.0f);
  for (size_t i = 0; i < block; ++i) recv2[2 * block + i] = 2.0f;  // rank 2 in place
  auto op = Op(shimproto::kAllGather, block);
  LocalStage stage({RegionRank(1, op, send1.data(), recv1.data()), RegionRank(2, op, recv2.data() + 2 * block, recv2.data())},
                   4, Deadline::AfterMs(5000), NoFailure);
  ASSERT_TRUE(stage.Ensure(0, 16 * block).ok());
  // The other host's blocks arrive in the work buffer (as an algorithm writes them).
  for (size_t i = 0; i < block; ++i) recv1[i] = 0.5f, recv1[3 * block + i] = 3.0f;
  ASSERT_TRUE(stage.Finish().ok());
  for (size_t i = 0; i < block; ++i) {
    for (int r = 0; r < 4; ++r) {
      const float want = r == 0 ? 0.5f : static_cast<float>(r);
      ASSERT_EQ(recv1[r * block + i], want) << r << " " << i;
      ASSERT_EQ(recv2[r * block + i], want) << r << " " << i;
    }
  }

  // Broadcast from rank 5 (out of place) to rank 4 on the same host.
  std::vector<float> root_in(block, 7.0f), root_out(block, 0.0f), other(block, 0.0f);
  auto bop = Op(shimproto::kBroadcast, block, ncclSum, /*root=*/5);
  LocalStage b({RegionRank(4, bop, nullptr, other.data()), RegionRank(5, bop, root_in.data(), root_out.data())}, 8,
               Deadline::AfterMs(5000), NoFailure);
  EXPECT_EQ(b.work(), reinterpret_cast<uint8_t*>(root_out.data()));
  ASSERT_TRUE(b.Finish().ok());
  for (size_t i = 0; i < block; ++i) ASSERT_TRUE(root_out[i] == 7.0f && other[i] == 7.0f) << i;
}

// A reduce-scatter in regions: no rank's output holds every block, so the work buffer is
// the daemon's (its pool's); inputs are folded into it and never written, and each rank's
// block is copied out to it, in place or not.
TEST(LocalStageTest, HostRegionsReduceScatterWorksInDaemonMemory) {
  const size_t block = 70000;  // floats per rank; 4 ranks, 2 of them here (ranks 1 and 3)
  const uint64_t B = 4 * block;
  std::vector<float> in1(4 * block), out1(block, -1.0f), inout3(4 * block);
  for (size_t i = 0; i < 4 * block; ++i) in1[i] = 1.0f + static_cast<float>(i % 3), inout3[i] = 2.0f;
  const std::vector<float> in1_before = in1;
  auto op = Op(shimproto::kReduceScatter, block);
  WorkPool pool;
  MemoryTraffic traffic;
  LocalStage stage({RegionRank(1, op, in1.data(), out1.data()), RegionRank(3, op, inout3.data(), inout3.data() + 3 * block)},
                   4, Deadline::AfterMs(5000), NoFailure, &traffic, &pool);
  ASSERT_TRUE(stage.ready().ok());
  EXPECT_GE(WorkPool::total_bytes(), 16 * block);
  EXPECT_EQ(stage.TakeInputApart(), nullptr);  // two local ranks: they are folded together
  const uint8_t* work = stage.work();
  EXPECT_NE(work, reinterpret_cast<uint8_t*>(out1.data()));
  EXPECT_NE(work, reinterpret_cast<uint8_t*>(inout3.data()));
  ASSERT_TRUE(stage.Ensure(B, 2 * B).ok());
  ASSERT_TRUE(stage.Finish().ok());
  for (size_t i = 0; i < block; ++i) {
    ASSERT_EQ(out1[i], 3.0f + static_cast<float>((block + i) % 3)) << i;
    ASSERT_EQ(inout3[3 * block + i], 3.0f + static_cast<float>((3 * block + i) % 3)) << i;
  }
  EXPECT_EQ(in1, in1_before);
  TrafficCounts t = traffic.Snapshot();
  EXPECT_EQ(t.program_copies, 0u);
  EXPECT_EQ(t.reduce_writes, 4 * B);  // one pass over every block (Reduce2)
  EXPECT_EQ(t.local_copies, 2 * B);   // each rank's own block out
}

// A reduce in regions: the root's output is the work buffer on its host; a host without
// the root works in daemon memory, and a non-root rank names no output at all.
TEST(LocalStageTest, HostRegionsReduceAtAndAwayFromTheRoot) {
  const size_t n = 90000;
  std::vector<float> in4(n, 1.0f), in5(n, 2.0f), out5(n, -1.0f);
  auto op = Op(shimproto::kReduce, n, ncclMax, /*root=*/5);
  MemoryTraffic traffic;
  LocalStage root({RegionRank(4, op, in4.data(), nullptr), RegionRank(5, op, in5.data(), out5.data())}, 8,
                  Deadline::AfterMs(5000), NoFailure, &traffic);
  EXPECT_EQ(root.work(), reinterpret_cast<uint8_t*>(out5.data()));
  ASSERT_TRUE(root.Finish().ok());
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(out5[i], 2.0f) << i;
  EXPECT_EQ(traffic.Snapshot().local_copies, 0u);
  EXPECT_EQ(traffic.Snapshot().program_copies, 0u);

  std::vector<float> in0(n, 3.0f), in1(n, 4.0f);
  const std::vector<float> in0_before = in0, in1_before = in1;
  LocalStage away({RegionRank(0, op, in0.data(), nullptr), RegionRank(1, op, in1.data(), nullptr)}, 8,
                  Deadline::AfterMs(5000), NoFailure);
  ASSERT_NE(away.work(), nullptr);
  ASSERT_TRUE(away.Finish().ok());
  const auto* w = reinterpret_cast<const float*>(away.work());
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(w[i], 4.0f) << i;  // what the chain sends on
  EXPECT_EQ(in0, in0_before);
  EXPECT_EQ(in1, in1_before);
}

// A lone rank's reduce-scatter whose algorithm writes the results into its output
// (FinalPlace): nothing is copied out of the work buffer, and Avg divides the output.
TEST(LocalStageTest, ReduceScatterResultsWrittenInTheOutputAreNotCopied) {
  const size_t block = 1000;  // floats; 2 ranks, rank 1 here
  std::vector<float> in(2 * block, 1.0f), out(block, 0.0f);
  for (uint8_t redop : {static_cast<uint8_t>(ncclSum), static_cast<uint8_t>(ncclAvg)}) {
    auto op = Op(shimproto::kReduceScatter, block, redop);
    MemoryTraffic traffic;
    LocalStage stage({RegionRank(1, op, in.data(), out.data())}, 2, Deadline::AfterMs(5000), NoFailure, &traffic);
    EXPECT_EQ(stage.FinalPlace(4 * block, 4 * block), nullptr) << "not before TakeInputApart";
    ASSERT_EQ(stage.TakeInputApart(), reinterpret_cast<const uint8_t*>(in.data()));
    uint8_t* place = stage.FinalPlace(4 * block, 4 * block);
    ASSERT_EQ(place, reinterpret_cast<uint8_t*>(out.data()));
    // What the ring's last step does: the sum over both hosts into the output, then finalize.
    for (size_t i = 0; i < block; ++i) out[i] = 2.0f;
    stage.FinalizeAt(stage.work() + 4 * block, 4 * block);
    ASSERT_TRUE(stage.Finish().ok());
    for (size_t i = 0; i < block; ++i) ASSERT_EQ(out[i], redop == ncclAvg ? 1.0f : 2.0f) << i;
    EXPECT_EQ(traffic.Snapshot().local_copies, 0u);
  }
}

}  // namespace
}  // namespace conduit
