// EpochBarrier: the agreement that makes every daemon of a communicator switch to a new
// configuration after the same collective (MCCS's barrier on collective sequence numbers).
//
// Host 0 sequences every change into an epoch (SequenceEpoch) and sends it to every daemon
// (ReconfigPropose; the others forward operator requests to it). A daemon that learns of
// epoch E stops launching collectives and tells every other daemon how many it has launched
// (ReconfigSeq). The largest count is the switch point: every daemon runs the collectives
// before it under the old configuration, then applies E, then resumes. As every collective
// involves every daemon, none can be past the largest count, and none runs a collective
// under a different configuration than the others.
//
// This class is only the state machine: it sends nothing and takes no lock. The
// communicator (reconfig.cc) holds it under its mutex, asks Next() what to do, and does it
// (sends the count, applies the plan). So the agreement is tested with any number of
// daemons in one process (tests/unit/epoch_barrier_test.cc), without links or threads.
#ifndef CONDUIT_DAEMON_COLLECTIVES_EPOCH_BARRIER_H_
#define CONDUIT_DAEMON_COLLECTIVES_EPOCH_BARRIER_H_

#include <cstdint>
#include <map>
#include <vector>

#include "collectives/comm_config.h"

namespace conduit {

// A configuration change sequenced by host 0, waiting to be applied.
struct Proposal {
  uint64_t epoch = 0;
  int origin = 0;           // the host whose operator asked for it
  uint32_t request_id = 0;  // the origin's request (0: host 0's own)
  ReconfigPlan plan;
};

class EpochBarrier {
 public:
  // How many changes host 0 sequences ahead of the configuration in force; it refuses
  // more (operators ask faster than collectives run). Each pending epoch holds state.
  static constexpr uint64_t kMaxPendingEpochs = 1024;
  // How far ahead of its own configuration a daemon takes a proposal or a count. No two
  // daemons' configurations are more than one epoch apart (a daemon applies E+1 only with
  // every daemon's count for E+1, sent once it applied E), so a correct host 0 stays within
  // kMaxPendingEpochs + 1 of every daemon; further is a broken peer.
  static constexpr uint64_t kMaxEpochsAhead = kMaxPendingEpochs + 1;
  // Whether `epoch` is more than kMaxEpochsAhead ahead of `current_epoch`: from a broken
  // peer. Add and RecordCount refuse such epochs; the communicator aborts on them.
  static bool TooFarAhead(uint64_t current_epoch, uint64_t epoch) {
    return epoch > current_epoch && epoch - current_epoch > kMaxEpochsAhead;
  }

  // What the communicator should do next (Next()).
  struct Step {
    enum Kind {
      kWait,     // nothing until a message arrives or a collective ends
      kPublish,  // send ReconfigSeq{epoch, count} to every other daemon
      kAgreed,   // the switch point of `epoch` is `count`: wake ranks held at launch
      kBroken,   // launched past the switch point `count` (an internal error): abort
      kApply,    // every collective before the switch ran here: apply `proposal`
    };
    Kind kind = kWait;
    uint64_t epoch = 0;
    uint64_t count = 0;
    const Proposal* proposal = nullptr;  // kApply; valid until Applied()
  };

  // The counters that survive a live upgrade (HandedComm); the rest is empty at rest.
  struct Counters {
    uint64_t entered_epoch = 0;
    uint64_t proposed_epoch = 0;
    uint32_t next_request_id = 0;
    uint64_t applied = 0;
  };

  // Sized once the membership is known (Init); until then nothing is pending.
  EpochBarrier() = default;
  void Init(int nhosts, int my_host);

  // Host 0: the epoch of the next change it sequences; false when kMaxPendingEpochs are
  // sequenced and not applied yet.
  bool SequenceEpoch(uint64_t current_epoch, uint64_t* epoch);
  // Another host: the id of the next request it forwards to host 0; the epoch host 0
  // gives it is kept until TakeRequestEpoch or ForgetRequest.
  uint32_t NextRequestId();

  // A sequenced proposal; false (and nothing kept) when it is stale (at or below
  // `current_epoch`), a duplicate, or TooFarAhead.
  bool Add(uint64_t current_epoch, Proposal proposal);
  // Host `host` had launched `launched` collectives when it learned of `epoch`. False
  // (ignored) when the host is out of range or the epoch TooFarAhead; a count for an epoch
  // already applied cannot happen and is ignored as harmless.
  bool RecordCount(uint64_t current_epoch, int host, uint64_t epoch, uint64_t launched);

  // Whether this daemon may launch its next collective (number `launched`): not while a
  // pending epoch's switch point is unknown or reached.
  bool MayLaunch(uint64_t current_epoch, uint64_t launched) const;
  // The next step for a daemon at `current_epoch` that has launched `launched` collectives,
  // one of which may be `running`. kPublish and kAgreed are taken as done when returned.
  Step Next(uint64_t current_epoch, uint64_t launched, bool running);
  // `epoch` was applied (after kApply): its state goes.
  void Applied(uint64_t epoch);

  // The origin side of a forwarded request: the epoch host 0 gave it, once known.
  bool TakeRequestEpoch(uint32_t request_id, uint64_t* epoch);
  // The requester stopped waiting: an epoch given later is not kept for it.
  void ForgetRequest(uint32_t request_id);

  // Some proposal waits to be applied (the communicator then runs Next() after changes).
  bool pending() const { return !proposals_.empty(); }
  // Nothing is under way: no proposal, no count, no request waiting, no switch point held.
  bool idle() const;
  uint64_t applied() const { return applied_; }
  Counters counters() const;
  void Restore(const Counters& counters);

 private:
  std::vector<int64_t>& CountsFor(uint64_t epoch);

  int nhosts_ = 0;
  int my_host_ = 0;
  std::map<uint64_t, Proposal> proposals_;             // sequenced, not yet applied
  std::map<uint64_t, std::vector<int64_t>> launched_;  // epoch -> each host's count (-1: unknown)
  uint64_t entered_epoch_ = 0;   // the pending epoch whose count this daemon has published
  bool target_known_ = false;    // the switch point of entered_epoch_ is known
  uint64_t target_ = 0;          // collectives to run under the old config before switching
  uint64_t proposed_epoch_ = 0;  // host 0: the last epoch it sequenced
  uint32_t next_request_id_ = 0;
  // Origin side: requests waiting for their epoch (0 until host 0's proposal arrives).
  std::map<uint32_t, uint64_t> request_epochs_;
  uint64_t applied_ = 0;
};

}  // namespace conduit

#endif  // CONDUIT_DAEMON_COLLECTIVES_EPOCH_BARRIER_H_
