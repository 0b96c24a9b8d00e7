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
#include <set>
#include <string>
#include <vector>

#include "objects/access.h"
#include "objects/object_api.h"
#include "objects/directory.h"
#include "objects/directory_client.h"
#include "objects/local_store.h"
#include "objects/peers.h"
#include "objects/reducer.h"
#include "objects/transfer.h"
#include "server/program_policy.h"
#include "server/service.h"

namespace conduit::objects {



// A complete local copy as a live upgrade hands it to the process that replaces this
// daemon (docs/upgrade.md): its memfd (a large copy) or its bytes (a small one).
struct HandedCopy {
  std::string id;
  uint64_t size = 0;
  bool pinned = false;   // an origin copy (Put or Reduce target)
  bool charged = false;  // counted against owner.uid's quota here
  objproto::Owner owner{};
  UniqueFd memfd;
  std::string bytes;
};

struct ObjectMetrics {
  size_t live_daemons = 0;
  size_t local_copies = 0;
  uint64_t store_bytes = 0;
  uint64_t store_limit = 0;
  uint64_t spare_bytes = 0, spare_reused = 0;
  uint64_t served = 0, resumed = 0, received = 0;
};

class ObjectService : public Service, public ObjectApi, public ReducerHost {
 public:
  ObjectService(ObjectOptions options, const ProgramPolicy* policy);
  ~ObjectService() override;
  void Start();

  const char* name() const override { return "objects"; }
  void ServeProgram(UniqueFd fd, const ProgramCredentials& creds) override;
  void ServePeer(Conn conn, const PeerIdentity& peer) override;
  // SIGTERM (ServiceRouter::Shutdown): the programs' requests waiting on other daemons, on
  // objects to appear (Get, Wait) or on a Reduce end now with an error that says the daemon
  // is going (kUnavailable with `reason`'s text), as do those that would wait from now on;
  // what this daemon can answer alone (a local copy) is still served until the connection
  // closes.
  void Stop(const Status& reason) override;

  const ObjectOptions& options() const override { return options_; }
  const ProgramPolicy* policy() const override { return policy_; }
  // ReducerHost (the reducer's view; see objects/reducer.h); the admin reads them too.
  LocalStore& store() override { return store_; }
  Peers& peers() override { return peers_; }
  DirectoryClient& directory() override { return dir_; }
  DataPool& pool() override { return pool_; }
  TransferStats& transfer_stats() override { return stats_; }

  // ObjectApi (the program sessions' view; see objects/object_api.h).
  bool IsOperator(uint32_t uid) const override { return IsOperatorUid(uid, options_.operator_uids); }
  Status CreateForPut(const std::string& id, uint64_t size, const uint8_t* inline_data, const Caller& caller,
                         uint32_t access, ObjectRef* out) override;
  Status FinishPut(const ObjectRef& obj) override;
  void AbortPut(const ObjectRef& obj, const std::string& why) override;
  Status Locate(const std::string& id, const Caller& caller, Deadline deadline, bool fill_here,
                Located* out) override;
  Status Delete(const std::string& id, const Caller& caller, Deadline deadline) override;
  Status Wait(const std::vector<std::string>& ids, size_t num_ready, const Caller& caller, Deadline deadline,
                 std::vector<uint32_t>* ready) override;
  Status Reduce(const std::string& target, const std::vector<std::string>& sources, size_t num_objects,
                   uint32_t op, uint32_t dtype, const Caller& caller, uint32_t access, Deadline deadline,
                   std::vector<uint32_t>* used, uint32_t* degree, uint64_t* size) override;
  void PublishReduceTarget(const ObjectRef& obj, bool complete) override;
  void AbandonReduceTarget(const std::string& id, const LocalObject* obj, const Status& why) override;

  std::string StateJson() override;
  ObjectRef LocalCopy(const std::string& id) override { return store_.Find(id); }
  ProgramPark* program_park() override { return &park_; }  // ObjectApi and Service
  ObjectMetrics Metrics();

  // Service: program sessions across a live upgrade.
  void AdoptProgram(UniqueFd fd, const ProgramCredentials& creds, const std::string& state,
                    std::vector<UniqueFd> fds) override;

  // Live upgrade. The copies to hand over (their memfds duplicated), or kUnavailable while any
  // copy is being written or fetched, or a reduce runs here: called with every program
  // session parked. The directory shard does not move: it is soft state, which the other
  // daemons re-publish to the new process when they reconnect (OnPeerUp).
  Status ExportCopies(std::vector<HandedCopy>* out);
  // In the new process, before Start: the copies handed over, re-published once the
  // daemons are connected.
  Status AdoptCopies(std::vector<HandedCopy> copies);
  // After the handover, before this process exits: tells every live daemon that this one's
  // process is being replaced (GoingAway), waiting up to 1 s for their answers, so none
  // declares this daemon's objects lost when its connections end.
  void AnnounceReplacement(int grace_ms);

 private:
  // After publishing `obj`: its failure, if it failed meanwhile (deleted, lost), and then its
  // listing withdrawn.
  Status WithdrawIfGone(const LocalObject& obj);
  struct PendingFetch {
    bool done = false;
    Status status;
    Located result;
  };
  // One Wait in progress: the objects seen ready so far, in order, or why it ends early.
  struct WaitState {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<uint32_t> order;
    std::vector<bool> seen;
    Status ended;  // the first object the caller may not read, or the shutdown
  };
  // Ends `s` with `why` unless it has ended already.
  static void EndWait(WaitState& s, Status why);
  // One attempt of Locate; kRetry: the directory's answer was stale, ask again.
  Status LocateOnce(const std::string& id, const Caller& caller, Deadline deadline, bool fill_here, Located* out);
  // Fills `obj` from `sender` from byte `offset` on, resuming from other copies when a
  // transfer breaks (`resume_after` not ok: it broke with that before this call, resume
  // first). With a `stop_by` (a caller's thread, Locate's fill_here), the loop hands the rest
  // to a new thread when that passes or the transfer breaks: only the background resumes.
  void FetchLoop(ObjectRef obj, std::string sender, uint64_t offset, Deadline stop_by, Status resume_after);
  // Starts FetchLoop(obj, sender, offset, Never, resume_after) in a thread of its own; false
  // (nothing started) when no thread can be started now.
  bool FetchInBackground(const ObjectRef& obj, const std::string& sender, uint64_t offset, Status resume_after);
  void OnMembershipChange();
  // Drops the copy a DropCopy names; true when its sender asked for an answer (kDropAck).
  bool OnDropCopy(const Bytes& body);
  // A Put found a copy of its id here: true when it was a cached copy of an object the
  // directory no longer lists (deleted; its DropCopy still on the way), now removed.
  bool DropStaleCopy(const std::string& id);
  // A shard handed this daemon a small object's bytes (DirStoreCopy): kept as a cached copy
  // when it fits, else the location it listed is withdrawn.
  void OnStoreCopy(const std::string& from, const Bytes& body);
  // Re-registers local copies whose shard moved (on its own thread: a new owner may not
  // see the new ring yet and asks us to retry).
  void RepublishLoop();
  // Re-registers with `addr` every local copy whose shard it owns.
  void RepublishTo(const std::string& addr);
  void NotePublished(const std::string& id);

  ObjectOptions options_;
  const ProgramPolicy* policy_;
  ProgramPark park_{ServiceId::kObjects};
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
  bool republish_stopped_ = false;  // Stop: the loop ends
  std::set<std::string> republish_to_;  // daemons that (re)connected: re-publish all they own
  std::mutex waits_mu_;
  std::set<std::shared_ptr<WaitState>> waits_;  // the Waits in progress, for Stop
  Status stopped_;  // under waits_mu_: set by Stop
};

}  // namespace conduit::objects

#endif  // CONDUIT_DAEMON_OBJECTS_OBJECT_SERVICE_H_
