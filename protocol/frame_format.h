// The framing every Conduit connection shares (program <-> daemon for the three services,
// daemon <-> daemon), written once: a 16-byte little-endian header followed by `length`
// payload bytes,
//
//   u32 magic | u16 version | u16 type | u32 length | u32 tag
//
// then the status block that starts every reply, and the Hello every program connection
// opens with. The magic tells program connections (CDTS) from daemon ones (CDTP), so a
// daemon port hit by a program, or garbage, is rejected at the first header; `version` is
// the framing's version on that kind of connection; the high byte of `type` names the
// service (server/service.h), whose own protocol version travels in its Hello; `tag` lets
// a reply name the request it answers. Every struct is fixed-size and trivially copyable,
// its size asserted here: a size is part of the protocol.
//
// Documented in docs/shim-protocol.md ("Framing"); each service's doc builds on it.
#ifndef CONDUIT_PROTOCOL_FRAME_FORMAT_H_
#define CONDUIT_PROTOCOL_FRAME_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

namespace conduit {

struct FrameHeader {
  uint32_t magic;
  uint16_t version;
  uint16_t type;
  uint32_t length;
  uint32_t tag;
};
static_assert(sizeof(FrameHeader) == 16);

// The status block that starts every reply in both protocols.
struct WireStatus {
  int32_t result;  // ncclResult_t
  char message[252];
};
static_assert(sizeof(WireStatus) == 256);

// The first request on every program connection (collectives, RPC, objects): who the
// program is and the version of the service's protocol it speaks.
struct ProgramHello {
  uint32_t pid;
  uint32_t version;  // the service's protocol version (shimproto::kShimVersion, ...)
  char exe[64];      // basename of the program, for logs; admission reads /proc instead
};
static_assert(sizeof(ProgramHello) == 72);

// A struct that travels as bytes: fixed layout, copied with memcpy.
template <typename T>
constexpr bool kWireStruct = std::is_trivially_copyable_v<T> && std::is_standard_layout_v<T>;
static_assert(kWireStruct<FrameHeader> && kWireStruct<WireStatus> && kWireStruct<ProgramHello>);

// Copies a C string into a fixed char array, always NUL-terminated.
template <size_t N>
void CopyCString(char (&dst)[N], const char* src) {
  size_t i = 0;
  for (; src != nullptr && src[i] != '\0' && i + 1 < N; ++i) dst[i] = src[i];
  for (; i < N; ++i) dst[i] = '\0';
}

// Reads a fixed char array that may lack its NUL terminator (untrusted input).
template <size_t N>
std::string FromCString(const char (&src)[N]) {
  size_t len = 0;
  while (len < N && src[len] != '\0') ++len;
  return std::string(src, len);
}

}  // namespace conduit

#endif  // CONDUIT_PROTOCOL_FRAME_FORMAT_H_
