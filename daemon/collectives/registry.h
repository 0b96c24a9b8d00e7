// CommRegistry: this daemon's communicators, by key, and its side of the peer protocol.
#ifndef CONDUIT_DAEMON_COLLECTIVES_REGISTRY_H_
#define CONDUIT_DAEMON_COLLECTIVES_REGISTRY_H_

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "collectives/communicator.h"
#include "collectives/rendezvous.h"
#include "common/conn.h"
#include "common/fd_io.h"
#include "common/peer_identity.h"
#include "common/unique_id.h"

namespace conduit {

class CommRegistry {
 public:
  // Links that arrive for a communicator this daemon has not formed yet wait ("parked")
  // at most --timeout-ms, and at most this many at once (per communicator, in all).
  static constexpr size_t kMaxParkedPerComm = 4096;
  static constexpr size_t kMaxParked = 16384;

  // `fabric` (may be null) decides ring orders (as rendezvous root) and link paths.
  // options.security must be set: it authenticates every connection to other daemons.
  CommRegistry(std::string my_addr, CommOptions options, Fabric* fabric = nullptr);
  ~CommRegistry();

  const std::string& my_addr() const { return my_addr_; }
  const CommOptions& options() const { return options_; }
  Fabric* fabric() const { return fabric_; }

  // Joins local rank `rank` (a program named `exe`) to the communicator named by `id`
  // (rendezvous with the root, then links to the other daemons). Blocks until ready or
  // failed. The identity's key must be its secret's (CheckCommIdentity).
  Status Join(const CommIdentity& id, int nranks, int rank, std::shared_ptr<Communicator>* out,
              const std::string& exe = "");

  // Serves one incoming connection from another daemon (runs on its own thread).
  void ServePeerConnection(Conn conn, const PeerIdentity& peer);

  // The daemon is shutting down: aborts every communicator with `reason` (its peers are
  // told) and refuses new ones with it.
  void Stop(const Status& reason);

  size_t LiveCommunicators();
  // The communicators alive now (their setup may still be in progress).
  std::vector<std::shared_ptr<Communicator>> List();
  // Links parked now (for tests and the operator).
  size_t ParkedLinks();

  // Live upgrade (registry_handover.cc, docs/upgrade.md). With every local rank's session
  // stopped between two requests: quiesces every communicator and exports them. Refused
  // (and everything goes on) while a communicator is being formed here or one is busy.
  Status ExportForHandover(Deadline deadline, std::vector<HandedComm>* out);
  // The upgrade was called off: the quiesced communicators go on.
  void ResumeHandover();
  // In the next process, before it is told to go: builds the handed-over communicators,
  // which start nothing yet. Checked as any input; on an error none is kept.
  Status AdoptHandedOver(std::vector<HandedComm> comms);
  // Once the old process has stopped for good: the adopted communicators start reading.
  void StartHandedOver();
  // The communicator a handed-over session of local rank `rank` goes on with, or null. The
  // registry holds each adopted communicator until its local ranks have taken it, or for
  // kHandedWaitMs: then the ranks that never came count as gone (the communicator fails).
  std::shared_ptr<Communicator> TakeHandedOver(uint64_t key, int rank);
  static constexpr int kHandedWaitMs = 10000;

 private:
  struct ParkedLink {
    int from_host;
    uint32_t channel;
    int path;
    UniqueFd fd;
    PeerIdentity peer;
    Deadline expires;
  };

  // An adopted communicator waiting for its local ranks' sessions (TakeHandedOver).
  struct Handed {
    std::shared_ptr<Communicator> comm;
    std::set<int> waiting;  // local ranks not taken yet
    Deadline expires = Deadline::Never();
  };

  Status ConnectLinks(Communicator& comm);
  // The adopted communicators whose ranks did not come in time, with the reason to fail
  // them for (needs mu_; the caller aborts them without it).
  std::vector<std::pair<std::shared_ptr<Communicator>, Status>> ExpireHanded();
  // Drops parked links whose communicator did not form in time; runs every second.
  void ExpireParkedLoop();
  size_t ExpireParked();  // needs mu_

  const std::string my_addr_;
  const CommOptions options_;
  Fabric* const fabric_;
  RendezvousTable rendezvous_;

  std::mutex mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  Status stopped_;  // set by Stop: why new communicators are refused
  std::map<uint64_t, std::weak_ptr<Communicator>> comms_;
  std::set<uint64_t> accepting_;  // communicators whose incoming links attach directly
  std::map<uint64_t, std::vector<ParkedLink>> parked_;
  size_t parked_count_ = 0;
  std::vector<std::shared_ptr<Communicator>> quiesced_;  // by ExportForHandover
  std::map<uint64_t, Handed> handed_;
  std::thread expirer_;
};

}  // namespace conduit

#endif  // CONDUIT_DAEMON_COLLECTIVES_REGISTRY_H_
