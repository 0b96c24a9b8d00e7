// Reading gRPC byte buffers (the serialized messages a program sends).
#ifndef CONDUIT_LIBMRPC_GRPC_BYTE_BUFFERS_H_
#define CONDUIT_LIBMRPC_GRPC_BYTE_BUFFERS_H_

#include <grpc/byte_buffer.h>
#include <grpc/slice.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace conduit::grpcshim {

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

}  // namespace conduit::grpcshim

#endif  // CONDUIT_LIBMRPC_GRPC_BYTE_BUFFERS_H_
