// ConnectionSlots: how many admin connections each caller may hold at once. The operator
// may use every slot; callers who are not the operator share at most total - reserved of
// them and hold at most per_uid each, so idle, slow or hostile read-only callers can never
// take the slots the operator needs, nor one local user all of the others' share.
#ifndef CONDUIT_DAEMON_ADMIN_CONNECTION_SLOTS_H_
#define CONDUIT_DAEMON_ADMIN_CONNECTION_SLOTS_H_

#include <condition_variable>
#include <map>
#include <mutex>
#include <string>

#include "common/deadline.h"

namespace conduit {

struct ConnectionLimits {
  int total = 64;              // connections served at once
  int operator_reserved = 16;  // of those, never given to callers who are not the operator
  int per_uid = 8;             // connections one non-operator uid may hold
};

class ConnectionSlots {
 public:
  explicit ConnectionSlots(ConnectionLimits limits) : limits_(limits) {}

  // Takes a slot for a connection from `uid`; false, with the reason in *why, when the
  // caller's share is used up.
  bool TryAcquire(int uid, bool is_operator, std::string* why);
  // Gives back a slot TryAcquire gave.
  void Release(int uid, bool is_operator);

  int in_use() const;
  // Waits until at most `n` slots are in use; false at the deadline.
  bool WaitInUseAtMost(int n, Deadline deadline);

 private:
  const ConnectionLimits limits_;
  mutable std::mutex mu_;
  std::condition_variable released_;
  int total_ = 0;
  int others_ = 0;                 // held by callers who are not the operator
  std::map<int, int> per_uid_;     // non-operator uid -> connections held (no zero entries)
};

}  // namespace conduit

#endif  // CONDUIT_DAEMON_ADMIN_CONNECTION_SLOTS_H_
