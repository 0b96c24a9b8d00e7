// HostRegions: the memory one program connection attached as host regions (shim
// protocol, "Host regions"): buffers the program allocated with ncclMemAlloc, each a memfd
// sealed against shrinking and mapped here, so that collectives on them read the program's
// input and write its output in place instead of through staging copies. Resolve turns a
// group's RegionOpRefs into pointers, every range checked against its region.
#ifndef CONDUIT_DAEMON_SESSION_HOST_REGIONS_H_
#define CONDUIT_DAEMON_SESSION_HOST_REGIONS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "collectives/communicator.h"
#include "common/fd_io.h"
#include "common/shm_segment.h"
#include "common/status.h"
#include "protocol/shim_protocol.h"

namespace conduit {

class HostRegions {
 public:
  // A program that allocates ever more buffers without freeing them is stopped here: at
  // most this many regions per connection, and `max_bytes` (the daemon's --max-shm-bytes)
  // mapped in all.
  static constexpr size_t kMaxRegions = 4096;

  explicit HostRegions(uint64_t max_bytes) : max_bytes_(max_bytes) {}

  Status Attach(uint64_t id, UniqueFd fd, uint64_t size);
  Status Release(uint64_t id);
  bool empty() const { return regions_.empty(); }

  // For each kOpRegion op of `rank` (of a communicator of `nranks`): the kind and
  // reduction are ones served on regions, and its input and output lie inside attached
  // regions; out[i] points at them (null for other ops, whose refs must be zero).
  // *failed_op names the op refused.
  Status Resolve(const std::vector<shimproto::OpDesc>& ops, const std::vector<shimproto::RegionOpRef>& refs, int rank,
                 int nranks, std::vector<HostOpBuffers>* out, int* failed_op) const;

  // Whether [p, p + bytes) lies inside one attached region (what Resolve promises).
  bool Holds(const uint8_t* p, uint64_t bytes) const;

  // Live upgrade: each region's id, size and memfd, in id order.
  void ForEach(const std::function<void(uint64_t id, uint64_t size, int fd)>& fn) const;

 private:
  struct Region {
    ShmSegment map;
    UniqueFd fd;
  };
  // The mapping of `id` at [offset, offset + bytes).
  Status Find(uint64_t id, uint64_t offset, uint64_t bytes, const char* what, uint8_t** out) const;

  const uint64_t max_bytes_;
  uint64_t mapped_bytes_ = 0;
  std::map<uint64_t, std::unique_ptr<Region>> regions_;
};

}  // namespace conduit

#endif  // CONDUIT_DAEMON_SESSION_HOST_REGIONS_H_
