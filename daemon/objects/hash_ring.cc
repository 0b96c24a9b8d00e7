#include "objects/hash_ring.h"

#include <algorithm>

namespace conduit::objects {

uint64_t HashBytes(const std::string& bytes) {
  // FNV-1a, then a splitmix64 finalizer so nearby ids land far apart on the ring.
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 31;
  return h;
}

HashRing::HashRing(const std::vector<std::string>& members) : members_(members) {
  std::sort(members_.begin(), members_.end());
  members_.erase(std::unique(members_.begin(), members_.end()), members_.end());
  for (size_t m = 0; m < members_.size(); ++m) {
    for (int p = 0; p < kPointsPerMember; ++p) {
      points_.emplace(HashBytes(members_[m] + "#" + std::to_string(p)), m);
    }
  }
}

const std::string& HashRing::Owner(const std::string& id) const {
  static const std::string kNone;
  if (points_.empty()) return kNone;
  auto it = points_.lower_bound(HashBytes(id));
  if (it == points_.end()) it = points_.begin();
  return members_[it->second];
}

}  // namespace conduit::objects
