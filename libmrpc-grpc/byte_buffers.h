// Reading gRPC byte buffers (the serialized messages a program sends).
#ifndef CONDUIT_LIBMRPC_GRPC_BYTE_BUFFERS_H_
#define CONDUIT_LIBMRPC_GRPC_BYTE_BUFFERS_H_

#include <grpc/byte_buffer.h>
#include <grpc/slice.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace conduit::grpcshim {

// A slice's bytes (valid while the slice is).
inline std::string_view SliceView(const grpc_slice& s) {
  return std::string_view(reinterpret_cast<const char*>(GRPC_SLICE_START_PTR(s)), GRPC_SLICE_LENGTH(s));
}

inline size_t ByteBufferLength(const grpc_byte_buffer* bb) {
  const grpc_slice_buffer& sb = bb->data.raw.slice_buffer;
  size_t len = 0;
  for (size_t i = 0; i < sb.count; ++i) len += GRPC_SLICE_LENGTH(sb.slices[i]);
  return len;
}

inline void CopyByteBuffer(const grpc_byte_buffer* bb, uint8_t* dst) {
  const grpc_slice_buffer& sb = bb->data.raw.slice_buffer;
  for (size_t i = 0; i < sb.count; ++i) {
    size_t n = GRPC_SLICE_LENGTH(sb.slices[i]);
    memcpy(dst, GRPC_SLICE_START_PTR(sb.slices[i]), n);
    dst += n;
  }
}

// The message as one contiguous string.
inline std::string FlattenByteBuffer(const grpc_byte_buffer* bb) {
  std::string flat(ByteBufferLength(bb), '\0');
  if (!flat.empty()) CopyByteBuffer(bb, reinterpret_cast<uint8_t*>(flat.data()));
  return flat;
}

}  // namespace conduit::grpcshim

#endif  // CONDUIT_LIBMRPC_GRPC_BYTE_BUFFERS_H_
