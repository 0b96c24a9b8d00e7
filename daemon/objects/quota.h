// UidQuotas: how much of this daemon's store each uid's programs may create here.
//
// Puts and Reduce targets made by a uid's programs on this daemon count (bytes and number
// of objects) until they are deleted or dropped; copies this daemon merely caches (fetched
// for a Get, evictable) and a reduce's partial results do not. Operators are not charged
// (their programs are trusted; the caller decides). A charge is taken before anything is
// allocated, so a uid over its quota costs the store nothing.
#ifndef CONDUIT_DAEMON_OBJECTS_QUOTA_H_
#define CONDUIT_DAEMON_OBJECTS_QUOTA_H_

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "objects/obj_status.h"

namespace conduit::objects {

struct QuotaUsage {
  uint64_t bytes = 0;
  uint64_t objects = 0;
};

class UidQuotas {
 public:
  UidQuotas(uint64_t max_bytes, uint64_t max_objects) : max_bytes_(max_bytes), max_objects_(max_objects) {}

  // Takes `bytes` and one object for `uid`, or kOverQuota naming the uid, its usage and the
  // limit (`id` names the object being created).
  Status Charge(uint32_t uid, uint64_t bytes, const std::string& id);
  // Would Charge succeed? (A Reduce asks before it reserves its target; the size comes later.)
  Status Check(uint32_t uid, uint64_t bytes, const std::string& id) const;
  void Release(uint32_t uid, uint64_t bytes);
  QuotaUsage Usage(uint32_t uid) const;
  // {"limit_bytes":..,"limit_objects":..,"uids":[{"uid":..,"bytes":..,"objects":..},...]}
  std::string StateJson() const;

 private:
  Status CheckLocked(uint32_t uid, uint64_t bytes, const std::string& id) const;

  const uint64_t max_bytes_;
  const uint64_t max_objects_;
  mutable std::mutex mu_;
  std::map<uint32_t, QuotaUsage> used_;
};

}  // namespace conduit::objects

#endif  // CONDUIT_DAEMON_OBJECTS_QUOTA_H_
