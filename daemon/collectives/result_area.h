// ResultArea: the memory a communicator's collectives on this host leave their results in
// when every local rank can read them there (shim protocol, "Result area").
//
// With several ranks of one communicator on a host, a staged AllReduce, AllGather or
// Broadcast has one result for all of them. Without the area the daemon copies it into
// every local rank's segment but the first, and each program copies it out of its own:
// (L-1) copies that only move the same bytes between two shared segments. The area is one
// memfd per communicator and host, written only by conduitd (sealed against any other
// writable mapping) and mapped read-only by the local ranks' shims, which copy their
// output straight out of it.
//
// Lifetime: an area is replaced, never resized: a larger request makes a new one with a new
// number, and holders of the old one (a collective still running on it, a program still
// copying out of it) keep it alive through their own mappings. A collective writes the
// area only after every local rank asked for it (sent its next request), and each shim
// sends its next request only after it copied the last result out; so no result is
// overwritten while a rank still reads it.
#ifndef CONDUIT_DAEMON_COLLECTIVES_RESULT_AREA_H_
#define CONDUIT_DAEMON_COLLECTIVES_RESULT_AREA_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

#include "common/fd_io.h"
#include "common/shm_segment.h"
#include "common/status.h"

namespace conduit {

class ResultArea {
 public:
  struct Area {
    ShmSegment segment;
    UniqueFd fd;
    uint64_t number = 0;
  };

  // An area of at least `min_bytes` (a new one when the current is smaller), at most
  // `max_bytes`: a duplicate of its descriptor, its size and number.
  Status Attach(uint64_t min_bytes, uint64_t max_bytes, UniqueFd* fd, uint64_t* size, uint64_t* number);
  // The current area (null before the first Attach); holding it keeps it mapped.
  std::shared_ptr<Area> Current() const;

 private:
  mutable std::mutex mu_;
  std::shared_ptr<Area> current_;
};

}  // namespace conduit

#endif  // CONDUIT_DAEMON_COLLECTIVES_RESULT_AREA_H_
