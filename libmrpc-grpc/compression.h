// Message compression on managed calls, as gRPC's compression filter does it natively:
// the sender picks an algorithm (call metadata, a level against what the peer accepts, or
// the channel's/server's default), compresses each message unless told not to or unless
// compressing would not make it smaller, and says so in the message's flags; the receiver
// decompresses and remembers what it saw for gRPC's inspectors. This file holds gRPC's
// side of it (channel arguments, grpc-accept-encoding, levels); the codec and the names
// are the Call protocol's (common/rpc_compression.h).
//
// Compression is end to end between the two programs' shims: conduitd carries the
// compressed bytes and the flag (docs/rpc-protocol.md, Message flags).
#ifndef CONDUIT_LIBMRPC_GRPC_COMPRESSION_H_
#define CONDUIT_LIBMRPC_GRPC_COMPRESSION_H_

#include <grpc/grpc.h>
#include <grpc/compression.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/rpc_compression.h"

namespace conduit::grpcshim {

// Metadata keys gRPC keeps from the application (with rpc::kEncodingKey, the algorithm a
// call's messages use): the algorithms a side accepts, and the C++ API's request for an
// algorithm.
inline constexpr std::string_view kAcceptEncodingKey = "grpc-accept-encoding";
inline constexpr std::string_view kEncodingRequestKey = GRPC_COMPRESSION_REQUEST_ALGORITHM_MD_KEY;
// What gRPC's message flags show for a message that arrived compressed (transport.h).
inline constexpr uint32_t kWasCompressedFlags = 0x80000000u | 0x40000000u;

// Per channel or server (channel args): enabled algorithms and the defaults.
struct CompressionOptions {
  uint32_t enabled = (1u << GRPC_COMPRESS_ALGORITHMS_COUNT) - 1;  // bitset by algorithm
  grpc_compression_algorithm default_algorithm = GRPC_COMPRESS_NONE;
  std::optional<grpc_compression_level> default_level;
};
CompressionOptions CompressionFromArgs(const grpc_channel_args* args);

// gRPC's algorithms are the protocol's encodings, value for value.
static_assert(static_cast<int>(rpc::Encoding::kIdentity) == GRPC_COMPRESS_NONE &&
              static_cast<int>(rpc::Encoding::kDeflate) == GRPC_COMPRESS_DEFLATE &&
              static_cast<int>(rpc::Encoding::kGzip) == GRPC_COMPRESS_GZIP && GRPC_COMPRESS_ALGORITHMS_COUNT == 3);
inline rpc::Encoding ToEncoding(grpc_compression_algorithm algorithm) {
  return static_cast<rpc::Encoding>(algorithm);
}
inline std::optional<grpc_compression_algorithm> AlgorithmByName(std::string_view name) {
  std::optional<rpc::Encoding> e = rpc::EncodingByName(name);
  if (!e) return std::nullopt;
  return static_cast<grpc_compression_algorithm>(*e);
}
inline std::string_view AlgorithmName(grpc_compression_algorithm algorithm) {
  return rpc::EncodingName(ToEncoding(algorithm));
}

// "identity, deflate, gzip" for a bitset, and back (unknown names are ignored, identity is
// always accepted, as in gRPC).
std::string AcceptEncodingValue(uint32_t enabled);
uint32_t ParseAcceptEncoding(std::string_view value);
// gRPC's choice for a level among the algorithms the peer accepts.
grpc_compression_algorithm AlgorithmForLevel(grpc_compression_level level, uint32_t accepted);

}  // namespace conduit::grpcshim

#endif  // CONDUIT_LIBMRPC_GRPC_COMPRESSION_H_
