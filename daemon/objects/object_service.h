// ObjectService: the Hoplite-style object store inside conduitd (service id 2).
//
// Programs (libhoplite) reach it over the program socket (ProgramSession); other daemons
// over the peer port, on control connections (directory, reduce coordination; see Peers)
// and data connections (block-pipelined Fetch; see transfer.h). This class wires the parts
// together and implements what spans them: getting a local copy of an object (joining
// the receiver-driven broadcast tree and resuming from another copy when a sender dies),
// Put's publication, Delete, wait-for-any, and re-publishing soft directory state when
// the ring of live daemons changes.
#ifndef CONDUIT_DAEMON_OBJECTS_OBJECT_SERVICE_H_
#define CONDUIT_DAEMON_OBJECTS_OBJECT_SERVICE_H_

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "objects/access.h"
#include "objects/directory.h"
#include "objects/directory_client.h"
#include "objects/local_store.h"
#include "objects/peers.h"
#include "objects/transfer.h"
#include "server/program_policy.h"
#include "server/service.h"

namespace conduit {
class PeerSecurity;
}

namespace conduit::objects {

class Reducer;

struct ObjectOptions {
  const PeerSecurity* security = nullptr;  // authenticates (and seals) connections to daemons
  std::string self;                 // this daemon's peer address, as in `peers`
  std::vector<std::string> peers;   // --object-peers (may include self)
  uint64_t memory_bytes = 8ull << 30;
  size_t block_bytes = 256 << 10;   // pipelining granularity (measured: docs/benchmarks.md)
  int timeout_ms = 300000;          // bound on any wait for another daemon
  double bandwidth_Bps = 0;         // reduce-degree model overrides (0: measure)
  double latency_us = 0;
  // Local users (access.h, quota.h). Operators: root, the daemon's euid and these uids
  // (conduitd --admin-uid): they may read and delete every object and have no quota.
  std::vector<int> operator_uids;
  uint32_t default_access = objproto::kAccessOwner;  // --object-default-access
  uint64_t quota_bytes = 0;          // per uid on this daemon; 0: half of memory_bytes
  uint64_t quota_objects = 65536;    // per uid on this daemon
};

// A local copy or, for small objects served by the directory, the bytes themselves.
struct Located {
  ObjectRef obj;
  bool is_inline = false;
  Bytes inline_data;
  objproto::Owner owner{};  // of the inline bytes (a local copy has its own)
};

struct ObjectMetrics {
  size_t live_daemons = 0;
  size_t local_copies = 0;
  uint64_t store_bytes = 0;
  uint64_t store_limit = 0;
  uint64_t served = 0, resumed = 0, received = 0;
};

class ObjectService : public Service {
 public:
  ObjectService(ObjectOptions options, const ProgramPolicy* policy);
  ~ObjectService() override;
  void Start();

  const char* name() const override { return "objects"; }
  void ServeProgram(UniqueFd fd, const ProgramCredentials& creds) override;
  void ServePeer(Conn conn, const PeerIdentity& peer) override;

  const ObjectOptions& options() const { return options_; }
  const ProgramPolicy* policy() const { return policy_; }
  LocalStore& store() { return store_; }
  Peers& peers() { return peers_; }
  DirectoryClient& directory() { return dir_; }
  DataPool& pool() { return pool_; }
  TransferStats& transfer_stats() { return stats_; }

  // Whether `uid` is one of this daemon's operators (access.h).
  bool IsOperator(uint32_t uid) const { return IsOperatorUid(uid, options_.operator_uids); }

  // Put: creates the pinned origin copy, owned by `caller` with `access` (0: the daemon's
  // default), charged to its quota, and registers it (kExists if the id is known).
  // Small objects are complete at once; large ones are filled by the program.
  ObjStatus CreateForPut(const std::string& id, uint64_t size, const uint8_t* inline_data, const Caller& caller,
                         uint32_t access, ObjectRef* out);
  // Seals the bytes and publishes the copy complete; if it cannot be sealed (the creator
  // still maps it writable) the Put is abandoned and the error says why.
  ObjStatus FinishPut(const ObjectRef& obj);
  void AbortPut(const ObjectRef& obj, const std::string& why);
  // A local copy of `id` (partial copies grow as the fetch goes on), joining the broadcast;
  // kPermissionDenied (and no local copy made) when `caller` may not read it.
  ObjStatus Locate(const std::string& id, const Caller& caller, Deadline deadline, Located* out);
  // Deletes every copy if `caller` owns the object or is an operator.
  ObjStatus Delete(const std::string& id, const Caller& caller, Deadline deadline);
  // Indices of the first `num_ready` objects with a complete copy somewhere, in order;
  // kPermissionDenied as soon as one of them exists and `caller` may not read it.
  ObjStatus Wait(const std::vector<std::string>& ids, size_t num_ready, const Caller& caller, Deadline deadline,
                 std::vector<uint32_t>* ready);
  ObjStatus Reduce(const std::string& target, const std::vector<std::string>& sources, size_t num_objects,
                   uint32_t op, uint32_t dtype, const Caller& caller, uint32_t access, Deadline deadline,
                   std::vector<uint32_t>* used, uint32_t* degree, uint64_t* size);
  // A Reduce target made on this host (pinned, origin): registered partial while the reduce
  // runs, so readers elsewhere pipeline from it, and complete at the end.
  void PublishReduceTarget(const ObjectRef& obj, bool complete);
  // A Reduce that failed: drops its target copy (if any) and its reservation in the
  // directory; readers of the partial target get `why` (or "lost" on other hosts).
  void AbandonReduceTarget(const std::string& id, const LocalObject* obj, const ObjStatus& why);

  // JSON text with this daemon's object state (admin API, conduitctl, tests).
  std::string StateJson();
  ObjectMetrics Metrics();

 private:
  struct PendingFetch {
    bool done = false;
    ObjStatus status;
    Located result;
  };
  // One attempt of Locate; kRetry: the directory's answer was stale, ask again.
  ObjStatus LocateOnce(const std::string& id, const Caller& caller, Deadline deadline, Located* out);
  void FetchLoop(ObjectRef obj, std::string sender);
  void OnMembershipChange();
  void OnDropCopy(const Bytes& body);
  // Re-registers local copies whose shard moved (on its own thread: a new owner may not
  // see the new ring yet and asks us to retry).
  void RepublishLoop();
  void NotePublished(const std::string& id);

  ObjectOptions options_;
  const ProgramPolicy* policy_;
  Peers peers_;
  DirectoryShard shard_;
  DirectoryClient dir_;
  LocalStore store_;
  DataPool pool_;
  TransferStats stats_;
  std::unique_ptr<Reducer> reducer_;

  std::mutex fetch_mu_;
  std::condition_variable fetch_cv_;
  std::map<std::string, std::shared_ptr<PendingFetch>> pending_;
  std::map<std::string, std::string> published_to_;  // id -> shard owner it was published to
  std::mutex republish_mu_;
  std::condition_variable republish_cv_;
  bool ring_changed_ = false;
};

}  // namespace conduit::objects

#endif  // CONDUIT_DAEMON_OBJECTS_OBJECT_SERVICE_H_
