#include "metadata.h"

#include <cstring>

#include "byte_buffers.h"
#include "real_grpc.h"

namespace conduit::grpcshim {
namespace {

bool LegalKey(std::string_view key) {
  if (key.empty()) return false;
  for (char c : key) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
    if (!ok) return false;
  }
  return true;
}

bool LegalValue(std::string_view value) {
  for (char c : value) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

bool IsBinary(std::string_view key) { return key.size() >= 4 && key.substr(key.size() - 4) == "-bin"; }

}  // namespace

bool MetadataIsValid(const grpc_metadata* md, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    std::string_view key = SliceView(md[i].key);
    if (!LegalKey(key)) return false;
    if (!IsBinary(key) && !LegalValue(SliceView(md[i].value))) return false;
  }
  return true;
}

uint32_t EncodeMetadata(const grpc_metadata* md, size_t count, std::string* block) {
  for (size_t i = 0; i < count; ++i) rpc::AppendMetadata(block, SliceView(md[i].key), SliceView(md[i].value));
  return static_cast<uint32_t>(count);
}

void AppendToArray(grpc_metadata_array* array, const rpc::MetadataView& md) {
  const RealGrpc& g = Real();
  size_t need = array->count + md.count;
  if (need > array->capacity) {
    size_t capacity = std::max(need, array->capacity * 3 / 2);
    array->metadata = static_cast<grpc_metadata*>(g.gpr_realloc(array->metadata, capacity * sizeof(grpc_metadata)));
    array->capacity = capacity;
  }
  md.ForEach([&](std::string_view key, std::string_view value) {
    grpc_metadata& m = array->metadata[array->count++];
    memset(&m, 0, sizeof(m));
    m.key = g.grpc_slice_from_static_buffer(key.data(), key.size());
    m.value = g.grpc_slice_from_static_buffer(value.data(), value.size());
  });
}

}  // namespace conduit::grpcshim
