// ObjectApi: what a program's session asks of the object store (objects/program_session.h),
// apart from the service that implements it (objects/object_service.h), so the session and
// the service each include only this, never each other.
#ifndef CONDUIT_DAEMON_OBJECTS_OBJECT_API_H_
#define CONDUIT_DAEMON_OBJECTS_OBJECT_API_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/deadline.h"
#include "common/version_range.h"
#include "objects/access.h"
#include "objects/local_store.h"
#include "objects/messages.h"
#include "objects/obj_status.h"
#include "protocol/object_protocol.h"
#include "server/program_park.h"
#include "server/program_policy.h"

namespace conduit {
class PeerSecurity;
}

namespace conduit::objects {

struct ObjectOptions {
  const PeerSecurity* security = nullptr;  // authenticates (and seals) connections to daemons
  std::string self;                 // this daemon's peer address, as in `peers`
  std::vector<std::string> peers;   // --object-peers (may include self)
  uint64_t memory_bytes = 8ull << 30;
  size_t block_bytes = 256 << 10;   // pipelining granularity (measured: docs/benchmarks.md)
  // Objects Put of at most this many bytes are handed to every daemon, whose Gets then need
  // no directory round trip (--object-store-copy-bytes; 0: none; docs/object-protocol.md).
  uint64_t store_copy_bytes = 4096;
  int timeout_ms = 300000;          // bound on any wait for another daemon
  double bandwidth_Bps = 0;         // reduce-degree model overrides (0: measure)
  double latency_us = 0;
  // Local users (access.h, quota.h). Operators: root, the daemon's euid and these uids
  // (conduitd --admin-uid): they may read and delete every object and have no quota.
  std::vector<int> operator_uids;
  uint32_t default_access = objproto::kAccessOwner;  // --object-default-access
  uint64_t quota_bytes = 0;          // per uid on this daemon; 0: half of memory_bytes
  uint64_t quota_objects = 65536;    // per uid on this daemon
  // The object protocol versions spoken with other daemons (conduitd sets them from
  // objects/peer_versions.cc, which test builds of an earlier release override).
  VersionRange peer_versions{objproto::kOldestPeerVersion, objproto::kNewestPeerVersion};
};

// A local copy or, for small objects served by the directory, the bytes themselves.
struct Located {
  ObjectRef obj;
  bool is_inline = false;
  Bytes inline_data;
  objproto::Owner owner{};  // of the inline bytes (a local copy has its own)
};

class ObjectApi {
 public:
  virtual ~ObjectApi() = default;

  virtual const ObjectOptions& options() const = 0;
  virtual const ProgramPolicy* policy() const = 0;
  // Whether `uid` is one of this daemon's operators (access.h).
  virtual bool IsOperator(uint32_t uid) const = 0;

  // Put: creates the pinned origin copy, owned by `caller` with `access` (0: the daemon's
  // default), charged to its quota, and registers it (kExists if the id is known).
  // Small objects are complete at once; large ones are filled by the program.
  virtual Status CreateForPut(const std::string& id, uint64_t size, const uint8_t* inline_data,
                                 const Caller& caller, uint32_t access, ObjectRef* out) = 0;
  // Seals the bytes and publishes the copy complete; if it cannot be sealed (the creator
  // still maps it writable) the Put is abandoned and the error says why.
  virtual Status FinishPut(const ObjectRef& obj) = 0;
  virtual void AbortPut(const ObjectRef& obj, const std::string& why) = 0;
  // A local copy of `id` (partial copies grow as the fetch goes on), joining the broadcast;
  // kPermissionDenied (and no local copy made) when `caller` may not read it. With
  // `fill_here` (a caller that waits for the whole copy anyway), a copy this call makes is
  // fetched on the calling thread before it returns, until `deadline` at most; what is
  // left then goes on in a thread of its own, as every fetch does without `fill_here`.
  virtual Status Locate(const std::string& id, const Caller& caller, Deadline deadline, bool fill_here,
                        Located* out) = 0;
  // Deletes every copy if `caller` owns the object or is an operator.
  virtual Status Delete(const std::string& id, const Caller& caller, Deadline deadline) = 0;
  // Indices of the first `num_ready` objects with a complete copy somewhere, in order;
  // kPermissionDenied as soon as one of them exists and `caller` may not read it.
  virtual Status Wait(const std::vector<std::string>& ids, size_t num_ready, const Caller& caller,
                         Deadline deadline, std::vector<uint32_t>* ready) = 0;
  virtual Status Reduce(const std::string& target, const std::vector<std::string>& sources, size_t num_objects,
                           uint32_t op, uint32_t dtype, const Caller& caller, uint32_t access, Deadline deadline,
                           std::vector<uint32_t>* used, uint32_t* degree, uint64_t* size) = 0;
  // JSON text with this daemon's object state (admin API, conduitctl, tests).
  virtual std::string StateJson() = 0;
  // This daemon's copy of `id` (null: none), for a session handed over by a live upgrade
  // to pin its views again.
  virtual ObjectRef LocalCopy(const std::string& id) = 0;
  // Where sessions stop between two requests for a live upgrade.
  virtual ProgramPark* program_park() = 0;
};

}  // namespace conduit::objects

#endif  // CONDUIT_DAEMON_OBJECTS_OBJECT_API_H_
