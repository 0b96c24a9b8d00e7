#include "common/unique_id.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "common/frame.h"

namespace conduit {
namespace {

struct UniqueIdLayout {
  uint32_t magic;
  uint16_t version;
  uint16_t reserved;
  uint64_t key;
  char root[64];
  uint8_t secret[32];
  char unused[16];
};
static_assert(sizeof(UniqueIdLayout) == 128);

}  // namespace

void EncodeUniqueId(const CommIdentity& identity, char out[128]) {
  UniqueIdLayout id{};
  id.magic = kUniqueIdMagic;
  id.version = kUniqueIdVersion;
  id.key = identity.key;
  CopyCString(id.root, identity.root_addr.c_str());
  memcpy(id.secret, identity.secret.data(), sizeof(id.secret));
  memcpy(out, &id, sizeof(id));
}

Status DecodeUniqueId(const char in[128], CommIdentity* identity) {
  UniqueIdLayout id;
  memcpy(&id, in, sizeof(id));
  if (id.magic != kUniqueIdMagic) {
    return InvalidArgument("ncclUniqueId was not made by Conduit's ncclGetUniqueId (bad magic)");
  }
  if (id.version != kUniqueIdVersion) {
    return InvalidArgument("ncclUniqueId has version %u; this Conduit uses version %u (ids from an older conduitd "
                           "cannot be used)", id.version, kUniqueIdVersion);
  }
  if (id.key == 0) return InvalidArgument("ncclUniqueId has a zero communicator key");
  identity->key = id.key;
  identity->root_addr = FromCString(id.root);
  memcpy(identity->secret.data(), id.secret, sizeof(id.secret));
  if (identity->root_addr.empty()) return InvalidArgument("ncclUniqueId names no root daemon");
  // EncodeUniqueId always ends the root with a NUL: 64 bytes without one were not made here.
  if (identity->root_addr.size() >= sizeof(id.root)) return InvalidArgument("ncclUniqueId's root address is not terminated");
  return Status::Ok();
}

std::string CommKeyText(uint64_t key) {
  char buf[20];
  snprintf(buf, sizeof(buf), "%016" PRIx64, key);
  return buf;
}

std::string CommKeyShort(uint64_t key) { return CommKeyText(key).substr(0, 8); }

}  // namespace conduit
