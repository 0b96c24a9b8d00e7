// Membership: which daemon serves each rank of a communicator, and the ranks this daemon
// serves with their sessions' state.
//
// A communicator's membership is fixed when it forms (the rendezvous gives every rank's
// daemon and the root's ring order) or when a live upgrade hands it over; both inputs come
// from elsewhere (another daemon, the old process) and are checked here before the
// communicator sizes anything by them.
#ifndef CONDUIT_DAEMON_COLLECTIVES_MEMBERSHIP_H_
#define CONDUIT_DAEMON_COLLECTIVES_MEMBERSHIP_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace conduit {

struct Membership {
  std::vector<std::string> host_addrs;  // communicator hosts, ordered by their lowest rank
  std::vector<int> host_of_rank;
  int my_host = 0;
  std::vector<int> initial_ring;  // ring position -> host, as the rendezvous root chose it
  uint32_t protocol_version = 3;  // the collective message version the root chose
};

// The membership of `nranks` ranks whose daemons are `rank_addrs` (rank order), as seen by
// the daemon at `my_addr`. `ring` is the root's ring order; one that is not a permutation
// of the hosts is replaced by rank order, which every daemon derives alike. Internal error
// when the list has another length or does not name this daemon.
Status BuildMembership(const std::vector<std::string>& rank_addrs, const std::vector<int>& ring, int nranks,
                       const std::string& my_addr, Membership* out);

// Checks a membership handed over by another process (live upgrade) for `nranks` ranks and
// sets out->my_host from `my_addr`: hosts named once, each with a rank, every rank on one of
// them, a ring over all of them. The error says what is wrong.
Status CheckMembership(Membership* m, int nranks, const std::string& my_addr);

// This daemon's ranks of a communicator, in rank order, and per rank whether a session
// holds it (a program may ask to join a communicator again with any rank: only one
// connection may hold each) and whether it left gracefully. Not synchronized: the
// communicator holds it under its mutex; ranks() never changes after construction.
class LocalRanks {
 public:
  enum class Claim { kClaimed, kNotHere, kHeld };

  LocalRanks() = default;
  explicit LocalRanks(const Membership& m);

  const std::vector<int>& ranks() const { return ranks_; }
  size_t size() const { return ranks_.size(); }
  bool Contains(int rank) const;
  // The position of a local rank in ranks() (the index of its per-rank state).
  size_t IndexOf(int rank) const;

  Claim TryClaim(int rank);
  // A local rank destroyed its communicator; other ranks are ignored.
  void MarkLeft(int rank);
  std::vector<int> LeftRanks() const;

 private:
  std::vector<int> ranks_;
  std::vector<bool> claimed_;
  std::vector<bool> left_;
};

}  // namespace conduit

#endif  // CONDUIT_DAEMON_COLLECTIVES_MEMBERSHIP_H_
