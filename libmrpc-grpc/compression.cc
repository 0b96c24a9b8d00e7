#include "compression.h"

#include <zlib.h>

#include "channel_args.h"

namespace conduit::grpcshim {
namespace {

// zlib's window bits: deflate is the zlib format, gzip adds the gzip wrapper (+16).
int WindowBits(grpc_compression_algorithm algorithm) { return algorithm == GRPC_COMPRESS_GZIP ? 15 + 16 : 15; }

bool Known(int algorithm) { return algorithm >= 0 && algorithm < GRPC_COMPRESS_ALGORITHMS_COUNT; }

}  // namespace

CompressionOptions CompressionFromArgs(const grpc_channel_args* args) {
  CompressionOptions o;
  if (auto v = IntArg(args, GRPC_COMPRESSION_CHANNEL_ENABLED_ALGORITHMS_BITSET)) {
    o.enabled = (static_cast<uint32_t>(*v) | 1u) & ((1u << GRPC_COMPRESS_ALGORITHMS_COUNT) - 1);
  }
  if (auto v = IntArg(args, GRPC_COMPRESSION_CHANNEL_DEFAULT_ALGORITHM); v && Known(*v)) {
    o.default_algorithm = static_cast<grpc_compression_algorithm>(*v);
  }
  if (auto v = IntArg(args, GRPC_COMPRESSION_CHANNEL_DEFAULT_LEVEL);
      v && *v >= GRPC_COMPRESS_LEVEL_NONE && *v < GRPC_COMPRESS_LEVEL_COUNT) {
    o.default_level = static_cast<grpc_compression_level>(*v);
  }
  // gRPC ignores a default algorithm that is not enabled.
  if ((o.enabled & (1u << o.default_algorithm)) == 0) o.default_algorithm = GRPC_COMPRESS_NONE;
  return o;
}

std::optional<grpc_compression_algorithm> AlgorithmByName(std::string_view name) {
  if (name == "identity") return GRPC_COMPRESS_NONE;
  if (name == "deflate") return GRPC_COMPRESS_DEFLATE;
  if (name == "gzip") return GRPC_COMPRESS_GZIP;
  return std::nullopt;
}

std::string_view AlgorithmName(grpc_compression_algorithm algorithm) {
  switch (algorithm) {
    case GRPC_COMPRESS_DEFLATE:
      return "deflate";
    case GRPC_COMPRESS_GZIP:
      return "gzip";
    default:
      return "identity";
  }
}

std::string AcceptEncodingValue(uint32_t enabled) {
  std::string value;
  for (int a = 0; a < GRPC_COMPRESS_ALGORITHMS_COUNT; ++a) {
    if ((enabled & (1u << a)) == 0 && a != GRPC_COMPRESS_NONE) continue;
    if (!value.empty()) value.append(", ");
    value.append(AlgorithmName(static_cast<grpc_compression_algorithm>(a)));
  }
  return value;
}

uint32_t ParseAcceptEncoding(std::string_view value) {
  uint32_t set = 1u << GRPC_COMPRESS_NONE;
  while (!value.empty()) {
    size_t comma = value.find(',');
    std::string_view item = value.substr(0, comma);
    value = comma == std::string_view::npos ? std::string_view() : value.substr(comma + 1);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (auto a = AlgorithmByName(item)) set |= 1u << *a;
  }
  return set;
}

grpc_compression_algorithm AlgorithmForLevel(grpc_compression_level level, uint32_t accepted) {
  if (level == GRPC_COMPRESS_LEVEL_NONE) return GRPC_COMPRESS_NONE;
  // gRPC ranks gzip before deflate; low takes the first, high the last, medium the middle.
  grpc_compression_algorithm ranked[2];
  int n = 0;
  for (grpc_compression_algorithm a : {GRPC_COMPRESS_GZIP, GRPC_COMPRESS_DEFLATE}) {
    if ((accepted & (1u << a)) != 0) ranked[n++] = a;
  }
  if (n == 0) return GRPC_COMPRESS_NONE;
  switch (level) {
    case GRPC_COMPRESS_LEVEL_LOW:
      return ranked[0];
    case GRPC_COMPRESS_LEVEL_MED:
      return ranked[n / 2];
    default:
      return ranked[n - 1];
  }
}

bool Compress(grpc_compression_algorithm algorithm, std::string_view in, std::string* out) {
  out->clear();
  if (algorithm != GRPC_COMPRESS_DEFLATE && algorithm != GRPC_COMPRESS_GZIP) return false;
  z_stream zs{};
  if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, WindowBits(algorithm), 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    return false;
  }
  out->resize(deflateBound(&zs, in.size()));
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  zs.next_out = reinterpret_cast<Bytef*>(out->data());
  zs.avail_out = static_cast<uInt>(out->size());
  int r = deflate(&zs, Z_FINISH);
  size_t produced = zs.total_out;
  deflateEnd(&zs);
  if (r != Z_STREAM_END || produced >= in.size()) {
    out->clear();
    return false;
  }
  out->resize(produced);
  return true;
}

grpc_status_code Decompress(grpc_compression_algorithm algorithm, std::string_view in, uint64_t max_bytes,
                            std::string* out, std::string* why) {
  out->clear();
  if (algorithm != GRPC_COMPRESS_DEFLATE && algorithm != GRPC_COMPRESS_GZIP) {
    *why = "a compressed message on a call without a compression algorithm (grpc-encoding)";
    return GRPC_STATUS_INTERNAL;
  }
  z_stream zs{};
  if (inflateInit2(&zs, WindowBits(algorithm)) != Z_OK) {
    *why = "zlib cannot start decompressing";
    return GRPC_STATUS_INTERNAL;
  }
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  int r = Z_OK;
  char chunk[64 << 10];
  while (r != Z_STREAM_END) {
    zs.next_out = reinterpret_cast<Bytef*>(chunk);
    zs.avail_out = sizeof(chunk);
    r = inflate(&zs, Z_NO_FLUSH);
    if (r != Z_OK && r != Z_STREAM_END) break;
    size_t got = sizeof(chunk) - zs.avail_out;
    if (out->size() + got > max_bytes) {
      inflateEnd(&zs);
      out->clear();
      *why = "Received message larger than max (decompressed beyond " + std::to_string(max_bytes) + " bytes)";
      return GRPC_STATUS_RESOURCE_EXHAUSTED;
    }
    out->append(chunk, got);
    if (r == Z_OK && got == 0 && zs.avail_in == 0) break;  // input ended before the stream did
  }
  inflateEnd(&zs);
  if (r != Z_STREAM_END) {
    out->clear();
    *why = "Unexpected error decompressing data for algorithm " + std::string(AlgorithmName(algorithm));
    return GRPC_STATUS_INTERNAL;
  }
  return GRPC_STATUS_OK;
}

}  // namespace conduit::grpcshim
