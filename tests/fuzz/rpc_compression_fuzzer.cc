// rpc::Decompress, which reads compressed request messages (bytes a program or another
// daemon sent) when a policy must read their content. The first byte picks the encoding
// and a small output cap; the rest is the compressed message. Besides not crashing: the
// output never exceeds the cap, a failure leaves no output, and whatever decompresses,
// compressed again, decompresses to the same bytes.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/rpc_compression.h"
#include "fuzz_check.h"

using conduit::rpc::Compress;
using conduit::rpc::Decompress;
using conduit::rpc::Encoding;
using conduit::rpc::InflateResult;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const Encoding encoding = static_cast<Encoding>(data[0] % 3);
  const uint64_t cap = uint64_t{1} << (10 + (data[0] >> 4) % 8);  // 1 KiB .. 128 KiB
  std::string_view in(reinterpret_cast<const char*>(data + 1), size - 1);
  std::string out, why;
  InflateResult r = Decompress(encoding, in, cap, &out, &why);
  FUZZ_CHECK(out.size() <= cap, "%zu bytes out of a %llu-byte cap", out.size(), static_cast<unsigned long long>(cap));
  if (r != InflateResult::kOk) {
    FUZZ_CHECK(out.empty() && !why.empty(), "a failure left %zu bytes and says '%s'", out.size(), why.c_str());
    return 0;
  }
  std::string again, back;
  if (Compress(encoding, out, &again)) {
    FUZZ_CHECK(again.size() < out.size(), "compression made %zu bytes of %zu", again.size(), out.size());
    FUZZ_CHECK(Decompress(encoding, again, cap, &back, &why) == InflateResult::kOk && back == out,
               "a round trip changed %zu bytes: %s", out.size(), why.c_str());
  }
  return 0;
}
