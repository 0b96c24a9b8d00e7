// EpochBarrier (daemon/collectives/epoch_barrier.h) with 1..8 daemons in one process.
//
// A simulated communicator: every daemon launches collectives as fast as the barrier lets
// it (collective k completes once every daemon has launched it), operators on random
// hosts ask for changes, and the daemons' messages travel over per-pair FIFO queues (as on
// the TCP links) delivered in a random interleaving. Whatever the order, every collective
// must run under the same configuration epoch on every daemon, every change must be
// applied everywhere, and nothing may be left pending.
#include "collectives/epoch_barrier.h"

#include <algorithm>
#include <deque>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace conduit {
namespace {

struct Message {
  enum Type { kPropose, kForward, kSeq } type = kPropose;
  Proposal proposal;   // kPropose, kForward
  uint64_t epoch = 0;  // kSeq
  uint64_t launched = 0;
};

struct Daemon {
  EpochBarrier barrier;
  uint64_t epoch = 0;     // the configuration in force (CommConfig::epoch)
  uint64_t launched = 0;  // collectives launched (coll_seq)
  std::vector<uint64_t> ran_under;  // per collective: the epoch it was launched under
  std::vector<uint32_t> requests;   // forwarded, waiting for their epoch
  std::vector<uint64_t> request_epochs;
};

class Cluster {
 public:
  Cluster(int n, uint32_t seed, uint64_t collectives, int changes)
      : n_(n), total_(collectives), changes_(changes), rng_(seed), d_(n) {
    for (int i = 0; i < n; ++i) d_[i].barrier.Init(n, i);
  }

  // Runs until every daemon launched every collective, every change was asked for and
  // every message was delivered; false (with `why`) if it stalls or the barrier breaks.
  bool Run(std::string* why) {
    for (int step = 0; step < 1000000; ++step) {
      std::vector<int> can_launch;
      for (int i = 0; i < n_; ++i) if (MayLaunch(i)) can_launch.push_back(i);
      std::vector<std::pair<int, int>> busy;
      for (auto& [link, q] : links_) if (!q.empty()) busy.push_back(link);
      const bool can_ask = asked_ < changes_;
      if (can_launch.empty() && busy.empty() && !can_ask) {
        if (Done()) return true;
        *why = "stalled: no daemon may launch and no message is in flight";
        return false;
      }
      const int pick = static_cast<int>(rng_() % 8);
      if (can_ask && (pick == 0 || (can_launch.empty() && busy.empty()))) {
        Ask(static_cast<int>(rng_() % n_));
      } else if (!busy.empty() && (pick < 5 || can_launch.empty())) {
        auto link = busy[rng_() % busy.size()];
        Deliver(link.first, link.second);
      } else if (!can_launch.empty()) {
        Launch(can_launch[rng_() % can_launch.size()]);
      }
      if (!broken_.empty()) {
        *why = broken_;
        return false;
      }
    }
    *why = "did not finish";
    return false;
  }

  const Daemon& daemon(int i) const { return d_[i]; }
  int asked() const { return asked_; }

 private:
  bool Running(int i) const {
    for (const Daemon& o : d_) if (o.launched < d_[i].launched) return true;
    return false;
  }
  // Collective `launched` may start once the one before it completed everywhere.
  bool MayLaunch(int i) const {
    const Daemon& me = d_[i];
    return me.launched < total_ && !Running(i) && me.barrier.MayLaunch(me.epoch, me.launched);
  }
  bool Done() const {
    for (const Daemon& o : d_) if (o.launched != total_) return false;
    return true;
  }
  void Send(int from, int to, Message m) { links_[{from, to}].push_back(std::move(m)); }
  void SendToAll(int from, const Message& m) {
    for (int to = 0; to < n_; ++to) if (to != from) Send(from, to, m);
  }

  void Launch(int i) {
    Daemon& me = d_[i];
    me.ran_under.push_back(me.epoch);
    ++me.launched;
    // A collective that completed lets every daemon go on (Communicator::RunCollective).
    for (int j = 0; j < n_; ++j) Advance(j);
  }

  void Ask(int i) {
    ++asked_;
    Daemon& me = d_[i];
    Proposal p;
    p.origin = i;
    p.plan.set_algorithm = true;
    p.plan.algorithm = asked_ % 2 ? "ring" : "auto";
    if (i == 0) {
      if (!me.barrier.SequenceEpoch(me.epoch, &p.epoch)) broken_ = "host 0 refused to sequence";
      SendToAll(0, Message{Message::kPropose, p, 0, 0});
      Add(0, p);
    } else {
      p.request_id = me.barrier.NextRequestId();
      me.requests.push_back(p.request_id);
      Send(i, 0, Message{Message::kForward, p, 0, 0});
    }
  }

  void Add(int i, const Proposal& p) {
    Daemon& me = d_[i];
    if (!me.barrier.Add(me.epoch, p)) broken_ = "daemon " + std::to_string(i) + " refused a proposal";
    for (size_t r = 0; r < me.requests.size();) {
      uint64_t e = 0;
      if (me.barrier.TakeRequestEpoch(me.requests[r], &e)) {
        me.request_epochs.push_back(e);
        me.requests.erase(me.requests.begin() + static_cast<long>(r));
      } else {
        ++r;
      }
    }
    Advance(i);
  }

  void Deliver(int from, int to) {
    auto& q = links_[{from, to}];
    Message m = std::move(q.front());
    q.pop_front();
    Daemon& me = d_[to];
    switch (m.type) {
      case Message::kForward:
        if (!me.barrier.SequenceEpoch(me.epoch, &m.proposal.epoch)) broken_ = "host 0 refused to sequence";
        SendToAll(to, Message{Message::kPropose, m.proposal, 0, 0});
        Add(to, m.proposal);
        break;
      case Message::kPropose:
        Add(to, m.proposal);
        break;
      case Message::kSeq:
        if (!me.barrier.RecordCount(me.epoch, from, m.epoch, m.launched)) broken_ = "a count was refused";
        Advance(to);
        break;
    }
  }

  // Reconfig.cc's AdvanceReconfig, with messages for sends and an epoch bump for applying.
  void Advance(int i) {
    Daemon& me = d_[i];
    for (;;) {
      const EpochBarrier::Step step = me.barrier.Next(me.epoch, me.launched, Running(i));
      switch (step.kind) {
        case EpochBarrier::Step::kWait:
          return;
        case EpochBarrier::Step::kPublish:
          SendToAll(i, Message{Message::kSeq, {}, step.epoch, step.count});
          continue;
        case EpochBarrier::Step::kAgreed:
          continue;
        case EpochBarrier::Step::kBroken:
          broken_ = "daemon " + std::to_string(i) + " launched past the switch point of epoch " +
                    std::to_string(step.epoch);
          return;
        case EpochBarrier::Step::kApply:
          if (step.epoch != me.epoch + 1 || step.proposal->epoch != step.epoch) {
            broken_ = "applied out of order";
            return;
          }
          me.epoch = step.epoch;
          me.barrier.Applied(step.epoch);
          continue;
      }
    }
  }

  const int n_;
  const uint64_t total_;
  const int changes_;
  int asked_ = 0;
  std::mt19937 rng_;
  std::vector<Daemon> d_;
  std::map<std::pair<int, int>, std::deque<Message>> links_;
  std::string broken_;
};

TEST(EpochBarrier, EveryDaemonRunsEveryCollectiveUnderTheSameEpoch) {
  for (int n = 1; n <= 8; ++n) {
    for (uint32_t seed = 1; seed <= 40; ++seed) {
      const uint64_t collectives = 30;
      const int changes = 6;
      Cluster cluster(n, seed * 7919 + n, collectives, changes);
      std::string why;
      ASSERT_TRUE(cluster.Run(&why)) << n << " daemons, seed " << seed << ": " << why;
      for (uint64_t k = 0; k < collectives; ++k) {
        for (int i = 1; i < n; ++i) {
          ASSERT_EQ(cluster.daemon(i).ran_under[k], cluster.daemon(0).ran_under[k])
              << n << " daemons, seed " << seed << ": collective " << k << " ran under different epochs on daemons 0 and "
              << i;
        }
      }
    }
  }
}

TEST(EpochBarrier, EveryChangeIsAppliedEverywhereAndLeavesNothingPending) {
  for (int n = 1; n <= 6; ++n) {
    for (uint32_t seed = 1; seed <= 20; ++seed) {
      Cluster cluster(n, seed, /*collectives=*/20, /*changes=*/5);
      std::string why;
      ASSERT_TRUE(cluster.Run(&why)) << why;
      std::vector<uint64_t> given;
      for (int i = 0; i < n; ++i) {
        const Daemon& d = cluster.daemon(i);
        // Changes asked after the last collective are applied too (nothing holds them).
        EXPECT_EQ(d.epoch, 5u) << "daemon " << i << ", seed " << seed;
        EXPECT_EQ(d.barrier.applied(), 5u);
        EXPECT_TRUE(d.barrier.idle()) << "daemon " << i << " still has a reconfiguration under way, seed " << seed;
        EXPECT_TRUE(d.requests.empty()) << "daemon " << i << " never learned the epoch of a request";
        given.insert(given.end(), d.request_epochs.begin(), d.request_epochs.end());
      }
      // Each forwarded request got an epoch of its own.
      std::sort(given.begin(), given.end());
      EXPECT_EQ(std::adjacent_find(given.begin(), given.end()), given.end());
    }
  }
}

TEST(EpochBarrier, HoldsLaunchesUntilTheSwitchPointIsKnownThenUntilItIsApplied) {
  EpochBarrier b;
  b.Init(3, 1);
  ASSERT_TRUE(b.MayLaunch(0, 4));
  Proposal p;
  p.epoch = 1;
  ASSERT_TRUE(b.Add(0, p));
  EpochBarrier::Step s = b.Next(0, 4, false);
  ASSERT_EQ(s.kind, EpochBarrier::Step::kPublish);
  EXPECT_EQ(s.count, 4u);
  EXPECT_FALSE(b.MayLaunch(0, 4)) << "launching before the switch point is known";
  ASSERT_TRUE(b.RecordCount(0, 0, 1, 6));
  EXPECT_EQ(b.Next(0, 4, false).kind, EpochBarrier::Step::kWait) << "agreed without host 2's count";
  ASSERT_TRUE(b.RecordCount(0, 2, 1, 5));
  s = b.Next(0, 4, false);
  ASSERT_EQ(s.kind, EpochBarrier::Step::kAgreed);
  EXPECT_EQ(s.count, 6u) << "the switch point is the largest count";
  EXPECT_TRUE(b.MayLaunch(0, 4));
  EXPECT_TRUE(b.MayLaunch(0, 5));
  EXPECT_FALSE(b.MayLaunch(0, 6));
  EXPECT_EQ(b.Next(0, 5, false).kind, EpochBarrier::Step::kWait);
  EXPECT_EQ(b.Next(0, 6, true).kind, EpochBarrier::Step::kWait) << "applied under a running collective";
  EXPECT_EQ(b.Next(0, 7, false).kind, EpochBarrier::Step::kBroken);
  s = b.Next(0, 6, false);
  ASSERT_EQ(s.kind, EpochBarrier::Step::kApply);
  EXPECT_EQ(s.proposal->epoch, 1u);
  EXPECT_FALSE(b.idle());
  b.Applied(1);
  EXPECT_TRUE(b.idle()) << "an applied epoch left its switch point behind (a live upgrade would wait forever)";
  EXPECT_TRUE(b.MayLaunch(1, 6));
  EXPECT_EQ(b.Next(1, 6, false).kind, EpochBarrier::Step::kWait);
}

TEST(EpochBarrier, RefusesStaleDuplicateAndFarAheadInput) {
  EpochBarrier b;
  b.Init(2, 0);
  Proposal p;
  p.epoch = 3;
  EXPECT_FALSE(b.Add(3, p)) << "stale";
  EXPECT_TRUE(b.Add(2, p));
  EXPECT_FALSE(b.Add(2, p)) << "duplicate";
  p.epoch = 2 + EpochBarrier::kMaxEpochsAhead + 1;
  EXPECT_FALSE(b.Add(2, p)) << "far ahead";
  p.epoch = 2 + EpochBarrier::kMaxEpochsAhead;
  EXPECT_TRUE(b.Add(2, p)) << "as far ahead as a correct host 0 gets";
  EXPECT_FALSE(b.RecordCount(2, 2, 3, 1)) << "host out of range";
  EXPECT_FALSE(b.RecordCount(2, -1, 3, 1)) << "host out of range";
  EXPECT_FALSE(b.RecordCount(2, 1, 2 + EpochBarrier::kMaxEpochsAhead + 1, 1)) << "far ahead";
  EXPECT_TRUE(b.RecordCount(2, 1, 1, 1)) << "an applied epoch's count is harmless";
  // The one bound Add, RecordCount and the communicator's abort share.
  EXPECT_FALSE(EpochBarrier::TooFarAhead(2, 2 + EpochBarrier::kMaxEpochsAhead));
  EXPECT_TRUE(EpochBarrier::TooFarAhead(2, 3 + EpochBarrier::kMaxEpochsAhead));
  EXPECT_FALSE(EpochBarrier::TooFarAhead(5, 1)) << "stale is not far ahead";
  EXPECT_TRUE(EpochBarrier::TooFarAhead(0, UINT64_MAX));
}

// Host 0 sequences at most kMaxPendingEpochs ahead of its configuration, so that every
// daemon (at most one epoch behind it) takes every proposal it sends.
TEST(EpochBarrier, HostZeroSequencesABoundedNumberAhead) {
  EpochBarrier b;
  b.Init(2, 0);
  uint64_t epoch = 0;
  for (uint64_t i = 1; i <= EpochBarrier::kMaxPendingEpochs; ++i) {
    ASSERT_TRUE(b.SequenceEpoch(0, &epoch));
    ASSERT_EQ(epoch, i);
  }
  EXPECT_FALSE(b.SequenceEpoch(0, &epoch)) << "more than kMaxPendingEpochs sequenced and none applied";
  EXPECT_TRUE(b.SequenceEpoch(1, &epoch)) << "one applied: room for one more";
  EXPECT_EQ(epoch, EpochBarrier::kMaxPendingEpochs + 1);
  // A daemon one epoch behind host 0 takes the last one.
  EpochBarrier behind;
  behind.Init(2, 1);
  Proposal p;
  p.epoch = epoch;
  EXPECT_TRUE(behind.Add(0, p));
}

TEST(EpochBarrier, AForgottenRequestKeepsNothing) {
  EpochBarrier b;
  b.Init(2, 1);
  const uint32_t id = b.NextRequestId();
  uint64_t epoch = 0;
  EXPECT_FALSE(b.TakeRequestEpoch(id, &epoch));
  EXPECT_FALSE(b.idle());
  b.ForgetRequest(id);  // the operator's wait ran out before host 0 sequenced it
  Proposal p;
  p.epoch = 1;
  p.origin = 1;
  p.request_id = id;
  ASSERT_TRUE(b.Add(0, p));
  EXPECT_FALSE(b.TakeRequestEpoch(id, &epoch));
  ASSERT_EQ(b.Next(0, 0, false).kind, EpochBarrier::Step::kPublish);
  ASSERT_TRUE(b.RecordCount(0, 0, 1, 0));
  ASSERT_EQ(b.Next(0, 0, false).kind, EpochBarrier::Step::kAgreed);
  ASSERT_EQ(b.Next(0, 0, false).kind, EpochBarrier::Step::kApply);
  b.Applied(1);
  EXPECT_TRUE(b.idle());
}

}  // namespace
}  // namespace conduit
