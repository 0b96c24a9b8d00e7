#include "timer_queue.h"

#include "common/detached_thread.h"

namespace conduit::grpcshim {

TimerQueue& TimerQueue::Get() {
  static TimerQueue* queue = new TimerQueue();  // never destroyed: its thread outlives main
  return *queue;
}

uint64_t TimerQueue::Schedule(Clock::time_point when, CallSink* call) {
  call->Ref();
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t id = next_id_++;
  order_.emplace(when, id);
  timers_.emplace(id, std::make_pair(when, call));
  if (!running_) {
    running_ = true;
    SpawnDetached("the timer queue", [this] { Run(); });
  }
  if (order_.begin()->second == id) cv_.notify_one();
  return id;
}

CallSink* TimerQueue::Cancel(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = timers_.find(id);
  if (it == timers_.end()) return nullptr;
  CallSink* call = it->second.second;
  order_.erase({it->second.first, id});
  timers_.erase(it);
  return call;
}

void TimerQueue::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (order_.empty()) {
      cv_.wait(lock);
      continue;
    }
    auto first = *order_.begin();
    if (Clock::now() < first.first) {
      cv_.wait_until(lock, first.first);
      continue;
    }
    order_.erase(order_.begin());
    auto it = timers_.find(first.second);
    CallSink* call = it->second.second;
    timers_.erase(it);
    lock.unlock();
    call->OnDeadline();
    call->Unref();
    lock.lock();
  }
}

}  // namespace conduit::grpcshim
