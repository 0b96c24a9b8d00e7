// Consistent hashing of object ids over the live daemons: each daemon owns many points on
// a 64-bit ring and an id belongs to the first point at or after its hash. When a daemon
// joins or leaves, only the ids between its points and their predecessors move.
#ifndef CONDUIT_DAEMON_OBJECTS_HASH_RING_H_
#define CONDUIT_DAEMON_OBJECTS_HASH_RING_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace conduit::objects {

uint64_t HashBytes(const std::string& bytes);

class HashRing {
 public:
  static constexpr int kPointsPerMember = 64;

  explicit HashRing(const std::vector<std::string>& members);
  // The member owning `id`; "" when the ring is empty.
  const std::string& Owner(const std::string& id) const;
  const std::vector<std::string>& members() const { return members_; }

 private:
  std::vector<std::string> members_;
  std::map<uint64_t, size_t> points_;
};

}  // namespace conduit::objects

#endif  // CONDUIT_DAEMON_OBJECTS_HASH_RING_H_
