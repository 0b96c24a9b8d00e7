#include "common/unique_id.h"

#include <sys/random.h>

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
  char unused[48];
};
static_assert(sizeof(UniqueIdLayout) == 128);

uint64_t Mix(uint64_t x) {  // splitmix64 finalizer: spreads every input bit
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

void EncodeUniqueId(const CommIdentity& identity, char out[128]) {
  UniqueIdLayout id{};
  id.magic = kUniqueIdMagic;
  id.version = kUniqueIdVersion;
  id.key = identity.key;
  CopyCString(id.root, identity.root_addr.c_str());
  memcpy(out, &id, sizeof(id));
}

Status DecodeUniqueId(const char in[128], CommIdentity* identity) {
  UniqueIdLayout id;
  memcpy(&id, in, sizeof(id));
  if (id.magic != kUniqueIdMagic) {
    return InvalidArgument("ncclUniqueId was not made by Conduit's ncclGetUniqueId (bad magic)");
  }
  if (id.version != kUniqueIdVersion) return InvalidArgument("ncclUniqueId has unsupported version %u", id.version);
  if (id.key == 0) return InvalidArgument("ncclUniqueId has a zero communicator key");
  identity->key = id.key;
  identity->root_addr = FromCString(id.root);
  if (identity->root_addr.empty()) return InvalidArgument("ncclUniqueId names no root daemon");
  return Status::Ok();
}

uint64_t RandomCommKey() {
  uint64_t key = 0;
  while (key == 0) {
    if (getrandom(&key, sizeof(key), 0) != sizeof(key)) key = 0;
  }
  return key;
}

uint64_t DeriveCommKey(uint64_t parent_key, uint64_t generation, int64_t color) {
  uint64_t key = Mix(Mix(parent_key ^ Mix(generation)) ^ static_cast<uint64_t>(color));
  return key == 0 ? 1 : key;
}

std::string CommKeyText(uint64_t key) {
  char buf[20];
  snprintf(buf, sizeof(buf), "%016" PRIx64, key);
  return buf;
}

}  // namespace conduit
