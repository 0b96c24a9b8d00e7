// Rendezvous: how the daemons of a new communicator learn every rank's daemon.
//
// Each rank's daemon sends Register to the root daemon named in the unique id; the root
// answers all of them with the full rank -> daemon list once the last rank has joined,
// or with an error naming the missing ranks when the deadline passes. The root also chooses
// the communicator's collective message version: the newest that every member's daemon (as
// its Register says) and the root speak.
//
// The root trusts nothing in a Register but what it can check: the rank's daemon is the
// one its connection authenticated as, the communicator's secret must produce its key, the
// rank count is bounded, and state grows with the ranks that actually joined.
#ifndef CONDUIT_DAEMON_COLLECTIVES_RENDEZVOUS_H_
#define CONDUIT_DAEMON_COLLECTIVES_RENDEZVOUS_H_

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/deadline.h"
#include "common/status.h"
#include "common/unique_id.h"
#include "common/version_range.h"
#include "protocol/peer_protocol.h"

namespace conduit {

class PeerSecurity;

// Chooses the ring order (position -> host) for a communicator's hosts ("ip:port", ordered
// by lowest rank).
using RingChooser = std::function<std::vector<int>(const std::vector<std::string>& host_addrs)>;

// Root side: serves Register requests arriving on their own connections.
class RendezvousTable {
 public:
  // `versions`: the collective message versions this daemon speaks.
  explicit RendezvousTable(VersionRange versions, RingChooser choose_ring = nullptr)
      : versions_(versions), choose_ring_(std::move(choose_ring)) {}

  // Blocks until the communicator is complete (or fails), then writes the reply on fd.
  // `theirs` is the versions the registering daemon speaks. `proven` is the daemon the
  // connection authenticated as, "" under --insecure-peers (see ValidateRegister,
  // peer_messages.h).
  void Serve(int fd, const peerproto::RegisterRequest& request, VersionRange theirs, const std::string& proven,
             Deadline deadline);
  // Communicators whose rendezvous this root serves now.
  size_t open();

 private:
  struct Entry {
    int nranks = 0;
    std::map<int, std::string> addrs;  // joined ranks only: memory follows what arrived
    int replied = 0;
    Status failed;
    std::vector<int> ring;  // chosen once, when the last rank joined
    VersionRange versions;  // what the root and every joined rank's daemon speak
  };

  const VersionRange versions_;
  const RingChooser choose_ring_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, std::shared_ptr<Entry>> entries_;
};

// The communicator's hosts: distinct rank addresses ordered by their lowest rank.
std::vector<std::string> HostsOf(const std::vector<std::string>& rank_addrs);

// Member side: registers one rank with the root daemon, saying the collective message
// versions this daemon speaks (`versions`), and returns every rank's daemon, the ring order
// and the version the root chose (one of `versions`, else an error).
Status RegisterWithRoot(const PeerSecurity& security, const CommIdentity& id, int nranks, int rank,
                        const std::string& my_addr, VersionRange versions, int timeout_ms,
                        std::vector<std::string>* rank_addrs, std::vector<int>* ring, uint32_t* version);

}  // namespace conduit

#endif  // CONDUIT_DAEMON_COLLECTIVES_RENDEZVOUS_H_
