// LaunchQueue: the collectives this host's ranks have submitted and not yet run.
//
// NCCL requires every rank to call a communicator's collectives in the same order, so the
// daemon matches them by position: each local rank has a queue in submission order, and the
// next collective is ready once every local rank has one queued; its batch is each rank's
// oldest. One thread runs a batch at a time (the running token), so batches run in order.
//
// Not thread-safe: the communicator holds it under its mutex. Requests are not owned (each
// lives on the stack of the session thread that submitted it and waits for it).
#ifndef CONDUIT_DAEMON_COLLECTIVES_LAUNCH_QUEUE_H_
#define CONDUIT_DAEMON_COLLECTIVES_LAUNCH_QUEUE_H_

#include <algorithm>
#include <cstddef>
#include <deque>
#include <vector>

namespace conduit {

template <typename Request>
class LaunchQueue {
 public:
  // Sized once the local ranks are known.
  void Init(size_t local_ranks) { queues_.assign(local_ranks, {}); }

  // Local rank `local` (index among the host's ranks) submits `request`.
  void Push(size_t local, Request* request) { queues_[local].push_back(request); }
  // A request that gives up before it ran (its communicator failed): later ones are not
  // matched with it.
  void Remove(size_t local, Request* request) {
    auto& q = queues_[local];
    q.erase(std::remove(q.begin(), q.end(), request), q.end());
  }

  // Every local rank has a collective queued, and none is running.
  bool Ready() const { return !running_ && !queues_.empty() && std::none_of(queues_.begin(), queues_.end(), Empty); }
  // Takes the running token and returns the batch (each local rank's oldest request, in
  // local rank order). Only when Ready().
  std::vector<Request*> Start() {
    running_ = true;
    std::vector<Request*> batch;
    for (auto& q : queues_) batch.push_back(q.front());
    return batch;
  }
  // The batch Start returned has run: it leaves the queues, and the token is free.
  void Finish() {
    for (auto& q : queues_) q.pop_front();
    running_ = false;
  }

  // The running token alone, for work that must not overlap a collective (applying a
  // reconfiguration).
  bool running() const { return running_; }
  void Hold() { running_ = true; }
  void Release() { running_ = false; }

  // Nothing queued and nothing running (a live upgrade may move the communicator).
  bool idle() const { return !running_ && std::all_of(queues_.begin(), queues_.end(), Empty); }
  // The local ranks (indices) with nothing queued: whom a collective waits for.
  std::vector<size_t> Missing() const {
    std::vector<size_t> out;
    for (size_t i = 0; i < queues_.size(); ++i) {
      if (queues_[i].empty()) out.push_back(i);
    }
    return out;
  }

 private:
  static bool Empty(const std::deque<Request*>& q) { return q.empty(); }

  std::vector<std::deque<Request*>> queues_;
  bool running_ = false;
};

}  // namespace conduit

#endif  // CONDUIT_DAEMON_COLLECTIVES_LAUNCH_QUEUE_H_
