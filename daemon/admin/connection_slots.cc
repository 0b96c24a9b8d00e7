#include "admin/connection_slots.h"

namespace conduit {

bool ConnectionSlots::TryAcquire(int uid, bool is_operator, std::string* why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (total_ >= limits_.total) {
    *why = "all " + std::to_string(limits_.total) + " admin connections are in use";
    return false;
  }
  if (!is_operator) {
    const int shared = limits_.total - limits_.operator_reserved;
    if (others_ >= shared) {
      *why = "callers who are not the operator hold all " + std::to_string(shared) +
             " admin connections they may share (" + std::to_string(limits_.operator_reserved) +
             " are kept for the operator)";
      return false;
    }
    auto it = per_uid_.find(uid);
    const int mine = it == per_uid_.end() ? 0 : it->second;
    if (mine >= limits_.per_uid) {
      *why = "uid " + std::to_string(uid) + " already holds " + std::to_string(mine) +
             " admin connections, the most a caller who is not the operator may";
      return false;
    }
    per_uid_[uid] = mine + 1;
    ++others_;
  }
  ++total_;
  return true;
}

void ConnectionSlots::Release(int uid, bool is_operator) {
  std::lock_guard<std::mutex> lock(mu_);
  --total_;
  released_.notify_all();
  if (is_operator) return;
  --others_;
  auto it = per_uid_.find(uid);
  if (it != per_uid_.end() && --it->second <= 0) per_uid_.erase(it);
}

bool ConnectionSlots::WaitInUseAtMost(int n, Deadline deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  return released_.wait_until(lock, deadline.when(), [&] { return total_ <= n; });
}

int ConnectionSlots::in_use() const {
  std::lock_guard<std::mutex> lock(mu_);
  return total_;
}

}  // namespace conduit
