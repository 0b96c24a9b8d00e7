#include "common/stream_copy.h"

#include "common/env_bytes.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace conduit {

size_t NonTemporalOutputMinBytes() {
  static const size_t value = EnvBytes("CONDUIT_NT_OUTPUT_MIN_BYTES", size_t{16} << 20);
  return value;
}

void CopyOutput(void* dst, const void* src, size_t n, size_t output_bytes) {
  if (output_bytes >= NonTemporalOutputMinBytes()) {
    StreamCopy(dst, src, n);
  } else {
    memcpy(dst, src, n);
  }
}

#if defined(__x86_64__)
namespace {

// Below this a copy's lines are likely still in cache when read next; keep memcpy.
constexpr size_t kMinStreamBytes = 64 * 1024;

}  // namespace

void StreamCopy(void* dst, const void* src, size_t n) {
  if (n < kMinStreamBytes) {
    memcpy(dst, src, n);
    return;
  }
  auto* d = static_cast<uint8_t*>(dst);
  auto* s = static_cast<const uint8_t*>(src);
  // Non-temporal stores need a 16-byte aligned destination: the head up to a 64-byte line
  // boundary (so each store group fills whole lines) goes through memcpy.
  const size_t head = (64 - (reinterpret_cast<uintptr_t>(d) & 63)) & 63;
  memcpy(d, s, head);
  d += head;
  s += head;
  n -= head;
  const size_t body = n & ~size_t{63};
  for (size_t i = 0; i < body; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 48), e);
  }
  // Non-temporal stores are weakly ordered: fence them before any later store (a done
  // bit's release) can be seen.
  _mm_sfence();
  memcpy(d + body, s + body, n - body);
}

#else

void StreamCopy(void* dst, const void* src, size_t n) { memcpy(dst, src, n); }

#endif

}  // namespace conduit
