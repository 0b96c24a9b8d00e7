// Bounded condition-variable waits against a Deadline (Deadline::Never included: the
// wait is chopped into hour-long slices so no time point overflows).
#ifndef CONDUIT_DAEMON_OBJECTS_WAIT_H_
#define CONDUIT_DAEMON_OBJECTS_WAIT_H_

#include <algorithm>
#include <condition_variable>
#include <mutex>

#include "common/deadline.h"

namespace conduit::objects {

// Waits until pred() holds (true) or the deadline passes (false).
template <typename Pred>
bool WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, Deadline deadline, Pred pred) {
  while (!pred()) {
    if (deadline.expired()) return false;
    auto slice = std::min(deadline.when(), Deadline::AfterMs(3600 * 1000).when());
    cv.wait_until(lock, slice);
  }
  return true;
}

}  // namespace conduit::objects

#endif  // CONDUIT_DAEMON_OBJECTS_WAIT_H_
