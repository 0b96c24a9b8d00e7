// Compressed messages of the Call protocol (docs/rpc-protocol.md, Message flags): a
// message with kMessageCompressed is compressed with the algorithm its sender named in its
// initial metadata (grpc-encoding), one of gRPC's. The program's shim compresses and
// decompresses; the daemon decompresses a private copy only for a policy that reads the
// request's content. Encodings carry gRPC's grpc_compression_algorithm values.
#ifndef CONDUIT_DAEMON_COMMON_RPC_COMPRESSION_H_
#define CONDUIT_DAEMON_COMMON_RPC_COMPRESSION_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/rpc_event.h"

namespace conduit::rpc {

enum class Encoding : int { kIdentity = 0, kDeflate = 1, kGzip = 2 };
inline constexpr std::string_view kEncodingKey = "grpc-encoding";

// "identity", "deflate", "gzip" (gRPC's names), and back.
std::optional<Encoding> EncodingByName(std::string_view name);
std::string_view EncodingName(Encoding encoding);
// The encoding named by grpc-encoding in `md` (identity when absent or unknown).
Encoding EncodingOf(const MetadataView& md);

// Compresses `in` into *out; false when the encoding is identity or the result is not
// smaller (the message then goes uncompressed, as gRPC does).
bool Compress(Encoding encoding, std::string_view in, std::string* out);

enum class InflateResult { kOk, kTooLarge, kCorrupt };
// Decompresses into *out, refusing output beyond `max_bytes` (a small message must not
// become an unbounded one); *why says what went wrong.
InflateResult Decompress(Encoding encoding, std::string_view in, uint64_t max_bytes, std::string* out,
                         std::string* why);

}  // namespace conduit::rpc

#endif  // CONDUIT_DAEMON_COMMON_RPC_COMPRESSION_H_
