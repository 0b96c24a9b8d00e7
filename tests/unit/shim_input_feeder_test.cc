// The shim's streamed-input feeder (libmccs-nccl/streaming.h): it copies the input's first
// window at once and then only what the daemon asks for, a window at a time.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "protocol/staging_control.h"
#include "streaming.h"

namespace conduit {
namespace {

constexpr size_t kSegment = 16 << 20;
constexpr size_t kChunk = 256 << 10;  // StagingChunkBytes(kSegment)
constexpr size_t kWindowChunks = InputFeeder::kWindowBytes / kChunk;

struct Fixture {
  std::vector<uint8_t> segment = std::vector<uint8_t>(kSegment, 0);
  std::vector<uint8_t> input = std::vector<uint8_t>(12 << 20);
  PendingOp op;
  Fixture() {
    for (size_t i = 0; i < input.size(); ++i) input[i] = static_cast<uint8_t>(i * 7 + 1);
    op.desc.offset = kStagingControlBytes;
    op.in = input.data();
    op.in_bytes = input.size();
    ResetForStreaming(segment.data());
  }
  StagingControl* control() { return ControlOf(segment.data()); }
  bool Bit(size_t c) { return TestChunkBit(control()->input_done, c); }
  // Whether the input bytes inside chunk c are in the segment.
  bool Copied(size_t c) {
    size_t from = std::max(kStagingControlBytes, c * kChunk);
    size_t to = std::min(kStagingControlBytes + input.size(), (c + 1) * kChunk);
    return memcmp(segment.data() + from, input.data() + (from - kStagingControlBytes), to - from) == 0;
  }
  size_t last_chunk() const { return (kStagingControlBytes + input.size() - 1) / kChunk; }
};

TEST(InputFeederTest, CopiesTheFirstWindowThenWaitsToBeAsked) {
  ASSERT_EQ(StagingChunkBytes(kSegment), kChunk);
  Fixture f;
  InputFeeder feeder(f.segment.data(), kSegment, f.op);
  EXPECT_TRUE(feeder.Serve());
  for (size_t c = 0; c < kWindowChunks; ++c) EXPECT_TRUE(f.Bit(c) && f.Copied(c)) << c;
  EXPECT_FALSE(f.Bit(kWindowChunks));
  EXPECT_FALSE(f.Copied(kWindowChunks));
  EXPECT_FALSE(feeder.Serve()) << "nothing asked: nothing more copied";
  EXPECT_FALSE(feeder.done());
  EXPECT_EQ(f.control()->input_complete.load(), 0u);
}

TEST(InputFeederTest, CopiesTheWindowTheDaemonAsksFor) {
  Fixture f;
  InputFeeder feeder(f.segment.data(), kSegment, f.op);
  const size_t asked = 40;  // a ring host that starts late in the buffer
  f.control()->input_wanted.store(1 + asked * kChunk + 100);
  EXPECT_TRUE(feeder.Serve());
  EXPECT_FALSE(f.Bit(0)) << "a request comes before the initial window";
  EXPECT_FALSE(f.Bit(asked - 1));
  for (size_t c = asked; c <= f.last_chunk(); ++c) EXPECT_TRUE(f.Bit(c) && f.Copied(c)) << c;  // clipped at the end
  EXPECT_FALSE(feeder.Serve()) << "the same request again: already served";
  f.control()->input_wanted.store(1 + kSegment + 4096);  // not this op's input
  EXPECT_FALSE(feeder.Serve());
  f.control()->input_wanted.store(1 + 5 * kChunk);
  EXPECT_TRUE(feeder.Serve());
  for (size_t c = 5; c < 5 + kWindowChunks; ++c) EXPECT_TRUE(f.Bit(c) && f.Copied(c)) << c;
  EXPECT_FALSE(f.Bit(4));
}

TEST(InputFeederTest, CopyAllFinishesAndSaysSo) {
  Fixture f;
  InputFeeder feeder(f.segment.data(), kSegment, f.op);
  f.control()->input_wanted.store(1 + 20 * kChunk);
  EXPECT_TRUE(feeder.Serve());
  feeder.CopyAll();
  EXPECT_TRUE(feeder.done());
  EXPECT_EQ(f.control()->input_complete.load(), 1u);
  EXPECT_EQ(memcmp(f.segment.data() + kStagingControlBytes, f.input.data(), f.input.size()), 0);
  EXPECT_FALSE(feeder.Serve());
}

TEST(InputFeederTest, EmptyInputIsCompleteAtOnce) {
  Fixture f;
  f.op.in_bytes = 0;
  InputFeeder feeder(f.segment.data(), kSegment, f.op);
  EXPECT_TRUE(feeder.done());
  EXPECT_EQ(f.control()->input_complete.load(), 1u);
}

}  // namespace
}  // namespace conduit
