// Version ranges for protocol hellos: each side says the oldest and the newest version of
// a protocol it speaks, and both use the newest one they share. A release that adds a
// version keeps speaking the older ones for as long as it lists them, so daemons of two
// releases meet during a rolling upgrade (docs/upgrade.md).
#ifndef CONDUIT_COMMON_VERSION_RANGE_H_
#define CONDUIT_COMMON_VERSION_RANGE_H_

#include <algorithm>
#include <cstdint>
#include <string>

namespace conduit {

struct VersionRange {
  uint32_t oldest = 0;
  uint32_t newest = 0;
};

// The newest version in both ranges; false when they do not meet (or one is empty).
inline bool NegotiateVersion(VersionRange ours, VersionRange theirs, uint32_t* chosen) {
  if (ours.oldest > ours.newest || theirs.oldest > theirs.newest) return false;
  const uint32_t newest = std::min(ours.newest, theirs.newest);
  if (newest < std::max(ours.oldest, theirs.oldest)) return false;
  *chosen = newest;
  return true;
}

// "3" or "3-4", for messages.
inline std::string DescribeVersions(VersionRange r) {
  return r.oldest == r.newest ? std::to_string(r.oldest) : std::to_string(r.oldest) + "-" + std::to_string(r.newest);
}

}  // namespace conduit

#endif  // CONDUIT_COMMON_VERSION_RANGE_H_
