#include "common/rpc_compression.h"

#include <zlib.h>

namespace conduit::rpc {
namespace {

// zlib's window bits: deflate is the zlib format, gzip adds the gzip wrapper (+16).
int WindowBits(Encoding encoding) { return encoding == Encoding::kGzip ? 15 + 16 : 15; }

}  // namespace

std::optional<Encoding> EncodingByName(std::string_view name) {
  if (name == "identity") return Encoding::kIdentity;
  if (name == "deflate") return Encoding::kDeflate;
  if (name == "gzip") return Encoding::kGzip;
  return std::nullopt;
}

std::string_view EncodingName(Encoding encoding) {
  switch (encoding) {
    case Encoding::kDeflate:
      return "deflate";
    case Encoding::kGzip:
      return "gzip";
    default:
      return "identity";
  }
}

Encoding EncodingOf(const MetadataView& md) {
  Encoding found = Encoding::kIdentity;
  md.ForEach([&](std::string_view key, std::string_view value) {
    if (key == kEncodingKey) found = EncodingByName(value).value_or(Encoding::kIdentity);
  });
  return found;
}

bool Compress(Encoding encoding, std::string_view in, std::string* out) {
  out->clear();
  if (encoding == Encoding::kIdentity) return false;
  z_stream zs{};
  if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, WindowBits(encoding), 8, Z_DEFAULT_STRATEGY) != Z_OK) {
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

InflateResult Decompress(Encoding encoding, std::string_view in, uint64_t max_bytes, std::string* out,
                         std::string* why) {
  out->clear();
  if (encoding == Encoding::kIdentity) {
    *why = "a compressed message on a call without a compression algorithm (grpc-encoding)";
    return InflateResult::kCorrupt;
  }
  z_stream zs{};
  if (inflateInit2(&zs, WindowBits(encoding)) != Z_OK) {
    *why = "zlib cannot start decompressing";
    return InflateResult::kCorrupt;
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
      return InflateResult::kTooLarge;
    }
    out->append(chunk, got);
    if (r == Z_OK && got == 0 && zs.avail_in == 0) break;  // input ended before the stream did
  }
  inflateEnd(&zs);
  if (r != Z_STREAM_END) {
    out->clear();
    *why = "Unexpected error decompressing data for algorithm " + std::string(EncodingName(encoding));
    return InflateResult::kCorrupt;
  }
  return InflateResult::kOk;
}

}  // namespace conduit::rpc
