#include "compression.h"

#include "channel_args.h"

namespace conduit::grpcshim {
namespace {

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

}  // namespace conduit::grpcshim
