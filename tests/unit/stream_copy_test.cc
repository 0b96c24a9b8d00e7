// StreamCopy (common/stream_copy.h): every byte arrives, whatever the sizes and alignments
// of source and destination (a head up to a cache line, a body of whole lines, a tail), and
// nothing outside the destination is written. CopyOutput: the same, on either side of its
// threshold.
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "common/stream_copy.h"

namespace conduit {
namespace {

constexpr uint8_t kGuard = 0xA5;

// Copies n bytes with StreamCopy, or with CopyOutput as a chunk of an output of
// output_bytes when that is not 0.
void CheckCopy(size_t n, size_t src_shift, size_t dst_shift, size_t output_bytes = 0) {
  std::vector<uint8_t> src(n + 128);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 131 + 7);
  std::vector<uint8_t> dst(n + 256, kGuard);
  // Shift from a 64-byte boundary, so the head's length is what the case names.
  uint8_t* dst_base = dst.data() + ((64 - reinterpret_cast<uintptr_t>(dst.data()) % 64) % 64);
  uint8_t* to = dst_base + dst_shift;
  if (output_bytes == 0) {
    StreamCopy(to, src.data() + src_shift, n);
  } else {
    CopyOutput(to, src.data() + src_shift, n, output_bytes);
  }
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(to[i], src[src_shift + i]) << "byte " << i << " of " << n << ", src +" << src_shift << ", dst +" << dst_shift;
  }
  for (uint8_t* p = dst.data(); p < to; ++p) ASSERT_EQ(*p, kGuard) << "written before the destination";
  for (uint8_t* p = to + n; p < dst.data() + dst.size(); ++p) ASSERT_EQ(*p, kGuard) << "written after the destination";
}

TEST(StreamCopyTest, SmallCopiesAreExact) {
  for (size_t n : {0, 1, 63, 64, 65, 4095}) CheckCopy(n, 3, 5);
}

TEST(StreamCopyTest, LargeCopiesAreExactAtEveryAlignment) {
  // From the size where the non-temporal body is used (64 KiB) and around it.
  for (size_t n : {size_t{64} << 10, (size_t{64} << 10) + 1, (size_t{256} << 10) - 17, size_t{1} << 20}) {
    for (size_t src_shift : {0, 1, 16, 63}) {
      for (size_t dst_shift : {0, 1, 15, 16, 48, 63}) CheckCopy(n, src_shift, dst_shift);
    }
  }
}

TEST(StreamCopyTest, OutputCopiesAreExactOnEitherSideOfTheThreshold) {
  // A chunk of 1 MiB + 5 of an output below the threshold (memcpy) and of one at it
  // (StreamCopy): the chunk is what is copied, whatever the whole output's size.
  const size_t threshold = NonTemporalOutputMinBytes();
  for (size_t output_bytes : {threshold > 1 ? threshold - 1 : size_t{1}, threshold, threshold + 1}) {
    CheckCopy((size_t{1} << 20) + 5, 1, 15, output_bytes);
  }
}

}  // namespace
}  // namespace conduit
