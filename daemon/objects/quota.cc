#include "objects/quota.h"

#include <algorithm>

#include "objects/messages.h"

namespace conduit::objects {

Status UidQuotas::CheckLocked(uint32_t uid, uint64_t bytes, const std::string& id) const {
  QuotaUsage u;
  auto it = used_.find(uid);
  if (it != used_.end()) u = it->second;
  const bool bytes_over = bytes > max_bytes_ || u.bytes > max_bytes_ - bytes;
  const bool count_over = u.objects >= max_objects_;
  if (!bytes_over && !count_over) return Status::Ok();
  return Err(objproto::kOverQuota,
             "uid %u is over its quota on this daemon: %s of %llu bytes would need %s; it has %llu of %llu objects "
             "and %llu of %llu bytes (conduitd --object-quota-objects/--object-quota-bytes); Delete some of its "
             "objects",
             uid, Printable(id).c_str(), static_cast<unsigned long long>(bytes),
             count_over ? "one more object" : "more bytes", static_cast<unsigned long long>(u.objects),
             static_cast<unsigned long long>(max_objects_), static_cast<unsigned long long>(u.bytes),
             static_cast<unsigned long long>(max_bytes_));
}

Status UidQuotas::Check(uint32_t uid, uint64_t bytes, const std::string& id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return CheckLocked(uid, bytes, id);
}

Status UidQuotas::Charge(uint32_t uid, uint64_t bytes, const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  CONDUIT_RETURN_IF_ERROR(CheckLocked(uid, bytes, id));
  QuotaUsage& u = used_[uid];
  u.bytes += bytes;
  u.objects += 1;
  return Status::Ok();
}

void UidQuotas::Release(uint32_t uid, uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = used_.find(uid);
  if (it == used_.end()) return;
  QuotaUsage& u = it->second;
  u.bytes -= std::min(u.bytes, bytes);
  if (u.objects > 0) u.objects -= 1;
  if (u.objects == 0) used_.erase(it);
}

QuotaUsage UidQuotas::Usage(uint32_t uid) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = used_.find(uid);
  return it == used_.end() ? QuotaUsage{} : it->second;
}

std::string UidQuotas::StateJson() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out = "{\"limit_bytes\":" + std::to_string(max_bytes_) + ",\"limit_objects\":" +
                    std::to_string(max_objects_) + ",\"uids\":[";
  bool first = true;
  for (const auto& [uid, u] : used_) {
    if (!first) out += ",";
    first = false;
    out += "{\"uid\":" + std::to_string(uid) + ",\"bytes\":" + std::to_string(u.bytes) +
           ",\"objects\":" + std::to_string(u.objects) + "}";
  }
  return out + "]}";
}

}  // namespace conduit::objects
