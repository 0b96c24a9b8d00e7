#include "collectives/mailbox.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "common/busy_poll.h"

namespace conduit {
namespace {

// Waits for `done` (checked under `lock`) by spinning within the busy-poll budget
// (common/busy_poll.h), outside the lock, looking again whenever `events` moves, before the
// caller blocks on the condition variable: a blocked waiter costs a wake-up. Measured on
// all-to-alls (docs/benchmarks.md, "Point-to-point between hosts").
template <typename Done>
void SpinUntil(const std::atomic<uint64_t>& events, std::unique_lock<std::mutex>& lock, Done done) {
  const int budget = BusyPollMicros();
  if (budget <= 0 || done()) return;
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(budget);
  bool moved = true;
  while (moved && !done()) {
    const uint64_t seen = events.load(std::memory_order_acquire);
    lock.unlock();
    moved = SpinUntilTrue(until, [&] { return events.load(std::memory_order_acquire) != seen; });
    lock.lock();
  }
}

}  // namespace

void Mailbox::PostLocal(int src, int dst, const uint8_t* data, size_t len, std::shared_ptr<SendTicket> ticket) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!failed_.ok()) {
    ticket->done = true;
    ticket->status = failed_;
    return;
  }
  queues_[{src, dst}].push_back(Message{data, len, {}, std::move(ticket), nullptr});
  Wake();
}

void Mailbox::PostLocalDevice(int src, int dst, std::shared_ptr<const DeviceSource> source, size_t len,
                              std::shared_ptr<SendTicket> ticket) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!failed_.ok()) {
    ticket->done = true;
    ticket->status = failed_;
    return;
  }
  queues_[{src, dst}].push_back(Message{nullptr, len, {}, std::move(ticket), std::move(source)});
  Wake();
}

Status Mailbox::ReserveRemote(int src, int dst, size_t len, Deadline deadline, uint8_t** into) {
  const uint64_t cost = len + kRemoteEntryBytes;
  *into = nullptr;
  std::unique_lock<std::mutex> lock(mu_);
  auto admitted = [&] { return remote_bytes_ + cost <= remote_cap_ || Expected(src, dst, len) != nullptr; };
  for (;;) {
    if (!failed_.ok()) return failed_;
    if (admitted()) break;
    ++reserving_;
    const bool timed_out = cv_.wait_until(lock, deadline.when()) == std::cv_status::timeout;
    --reserving_;
    if (timed_out && failed_.ok() && !admitted()) {
      return Status(StatusCode::kResourceExhausted,
                    "rank " + std::to_string(src) + " sent rank " + std::to_string(dst) + " " + std::to_string(len) +
                        " bytes that no posted receive took in time, and with the " + std::to_string(remote_bytes_) +
                        " bytes from other hosts already waiting here they are over the " +
                        std::to_string(remote_cap_) + " this daemon keeps (conduitd --p2p-queue-bytes): a rank sends "
                        "more than its peer receives");
    }
  }
  if (const Posted* posted = Expected(src, dst, len); posted != nullptr && posted->into != nullptr && len > 0) {
    // Its place in the queue now, so that what comes after it from src lines up behind.
    Message m{posted->into, len, {}, nullptr, nullptr, kRemoteEntryBytes, Fill::kFilling};
    *into = posted->into;
    queues_[{src, dst}].push_back(std::move(m));
    remote_bytes_ += kRemoteEntryBytes;
  } else {
    queues_[{src, dst}].push_back(Message{nullptr, len, {}, nullptr, nullptr, cost, Fill::kReading});
    remote_bytes_ += cost;
  }
  remote_peak_ = std::max(remote_peak_, remote_bytes_);
  return Status::Ok();
}

Mailbox::Message* Mailbox::BeingRead(int src, int dst) {
  // The reader reserves the next message from src only after this one ended: it is last.
  auto q = queues_.find({src, dst});
  if (q == queues_.end() || q->second.empty()) return nullptr;
  Message& m = q->second.back();
  return m.fill == Fill::kReading || m.fill == Fill::kFilling ? &m : nullptr;
}

void Mailbox::PostRemote(int src, int dst, std::vector<uint8_t> bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  const size_t len = bytes.size();
  Message* m = BeingRead(src, dst);
  if (m == nullptr || m->fill != Fill::kReading || m->len != len) {  // not reserved (a live upgrade's)
    queues_[{src, dst}].push_back(Message{nullptr, len, {}, nullptr, nullptr, len + kRemoteEntryBytes, Fill::kNone});
    m = &queues_[{src, dst}].back();
  }
  m->owned = std::move(bytes);
  m->data = m->owned.data();
  m->fill = Fill::kNone;
  Wake();
}

uint8_t* Mailbox::RetargetRemote(int src, int dst) {
  std::lock_guard<std::mutex> lock(mu_);
  Message* m = BeingRead(src, dst);
  if (m == nullptr || m->fill != Fill::kReading || m->len == 0) return nullptr;
  // It is the last queued message from src to dst: the receive at its place matches it.
  const Posted* posted = PostedAt(src, dst, queues_[{src, dst}].size() - 1, m->len);
  if (posted == nullptr || posted->into == nullptr) return nullptr;
  m->data = posted->into;
  m->fill = Fill::kFilling;
  remote_bytes_ -= m->counted - kRemoteEntryBytes;  // its bytes go to the receive's buffer
  m->counted = kRemoteEntryBytes;
  if (reserving_ > 0) cv_.notify_all();
  return posted->into;
}

void Mailbox::FilledRemote(int src, int dst, bool whole) {
  std::lock_guard<std::mutex> lock(mu_);
  if (Message* m = BeingRead(src, dst); m != nullptr) {
    m->fill = whole && m->fill == Fill::kFilling ? Fill::kFilled : Fill::kBroken;
    if (m->fill == Fill::kBroken) m->data = nullptr;
  }
  Wake();
}

const Mailbox::Posted* Mailbox::PostedAt(int src, int dst, size_t index, size_t len) const {
  auto e = expected_.find({src, dst});
  if (e == expected_.end() || index >= e->second.size() || e->second[index].len != len) return nullptr;
  return &e->second[index];
}

const Mailbox::Posted* Mailbox::Expected(int src, int dst, size_t len) const {
  auto q = queues_.find({src, dst});
  return PostedAt(src, dst, q == queues_.end() ? 0 : q->second.size(), len);
}

void Mailbox::Expect(int src, int dst, size_t len, uint8_t* into) {
  std::lock_guard<std::mutex> lock(mu_);
  expected_[{src, dst}].push_back(Posted{len, into});
  if (reserving_ > 0) cv_.notify_all();  // a reader may be waiting for this receive
}

void Mailbox::NameReceiveBuffer(int src, int dst, size_t index, uint8_t* into) {
  std::lock_guard<std::mutex> lock(mu_);
  auto e = expected_.find({src, dst});
  if (e != expected_.end() && index < e->second.size()) e->second[index].into = into;
}

void Mailbox::ForgetExpected(int dst) {
  std::unique_lock<std::mutex> lock(mu_);
  // dst's buffers are about to go: no reader may still write them, and what was read into
  // them for a receive that did not take it (its group failed first) moves here.
  auto filling = [&] {
    for (const auto& [pair, queue] : queues_) {
      if (pair.second != dst) continue;
      for (const Message& m : queue) {
        if (m.fill == Fill::kFilling) return true;
      }
    }
    return false;
  };
  cv_.wait(lock, [&] { return !filling(); });
  for (auto& [pair, queue] : queues_) {
    if (pair.second != dst) continue;
    for (Message& m : queue) {
      if (m.fill != Fill::kFilled) continue;
      m.owned.assign(m.data, m.data + m.len);
      m.data = m.owned.data();
      m.fill = Fill::kNone;
      m.counted += m.len;
      remote_bytes_ += m.len;
      remote_peak_ = std::max(remote_peak_, remote_bytes_);
    }
  }
  for (auto it = expected_.begin(); it != expected_.end();) {
    it = it->first.second == dst ? expected_.erase(it) : std::next(it);
  }
}

void Mailbox::RestoreArrived(ArrivedMessage message) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    remote_bytes_ += message.bytes.size() + kRemoteEntryBytes;
    remote_peak_ = std::max(remote_peak_, remote_bytes_);
  }
  PostRemote(message.src, message.dst, std::move(message.bytes));
}

uint64_t Mailbox::remote_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return remote_bytes_;
}

uint64_t Mailbox::remote_peak_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return remote_peak_;
}

Status Mailbox::Take(int src, int dst, uint8_t* out, size_t len, Deadline deadline, TakenMessage* taken,
                     bool* copied) {
  if (copied != nullptr) *copied = false;
  std::unique_lock<std::mutex> lock(mu_);
  auto& queue = queues_[{src, dst}];
  // The next message, whole (one read into its receive's buffer may still be coming in).
  auto ready = [&] {
    return !queue.empty() && queue.front().fill != Fill::kReading && queue.front().fill != Fill::kFilling;
  };
  // Spinning first: otherwise the thread that brings the message (a link's reader, a local
  // sender) wakes this one, a wake-up on the small-call path.
  SpinUntil(events_, lock, [&] { return ready() || !failed_.ok(); });
  for (;;) {
    if (!failed_.ok()) return failed_;
    if (ready()) break;
    if (cv_.wait_until(lock, deadline.when()) == std::cv_status::timeout && !ready()) {
      return queue.empty() ? RemoteError("timed out waiting for rank %d to send to rank %d", src, dst)
                           : RemoteError("timed out while rank %d's message to rank %d came in", src, dst);
    }
  }
  Message m = std::move(queue.front());
  queue.pop_front();
  if (auto e = expected_.find({src, dst}); e != expected_.end() && !e->second.empty()) {
    e->second.pop_front();  // this receive's expectation, matched
  }
  if (m.ticket) m.ticket->taken = true;  // its sender now waits for this copy, however it ends
  Status st;
  if (m.fill == Fill::kBroken) {
    st = RemoteError("the link from rank %d's daemon failed while its message to rank %d came in", src, dst);
  } else if (m.len != len) {
    st = InvalidUsage("rank %d sent %zu bytes but rank %d posted a receive of %zu bytes", src, m.len, dst, len);
  } else if (m.device) {
    if (taken != nullptr) {
      taken->device = std::move(m.device);
      taken->ticket = std::move(m.ticket);
      return Status::Ok();  // the caller copies, then completes the ticket
    }
    st = InternalError("rank %d's send of device memory reached a receive that cannot take it", src);
  } else if (len > 0 && m.data != out) {  // (a message read into this receive's buffer is there)
    // Outside the lock: the sender's segment stays mapped until its ticket is done, because
    // WaitSent does not return while a taken ticket is being copied.
    lock.unlock();
    memcpy(out, m.data, len);
    if (copied != nullptr) *copied = true;
    lock.lock();
  }
  if (m.ticket) {
    m.ticket->done = true;
    m.ticket->status = st;
    Wake();
  } else {  // from another daemon (local sends all have tickets): its room is free
    remote_bytes_ -= m.counted;
    if (reserving_ > 0) cv_.notify_all();
  }
  return st;
}

void Mailbox::Complete(const std::shared_ptr<SendTicket>& ticket, const Status& status) {
  std::lock_guard<std::mutex> lock(mu_);
  ticket->done = true;
  ticket->status = status;
  Wake();
}

Status Mailbox::WaitSent(const std::shared_ptr<SendTicket>& ticket, Deadline deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (ticket->done) return ticket->status;
    if (ticket->taken) {
      // A receiver is copying out of the sender's buffer: a memcpy, which ends, or a GPU
      // copy, whose taker waits for it within its own deadline and then completes it.
      cv_.wait(lock);
      continue;
    }
    Status why = failed_;
    if (why.ok() && cv_.wait_until(lock, deadline.when()) == std::cv_status::timeout && !ticket->done &&
        !ticket->taken) {
      why = RemoteError("timed out waiting for the receiver to take a send");
    }
    if (!why.ok()) {
      Withdraw(ticket);
      return why;
    }
  }
}

void Mailbox::Withdraw(const std::shared_ptr<SendTicket>& ticket) {
  for (auto& [pair, queue] : queues_) {
    for (auto it = queue.begin(); it != queue.end(); ++it) {
      if (it->ticket == ticket) {
        queue.erase(it);
        return;
      }
    }
  }
}

void Mailbox::Fail(const Status& status) {
  std::lock_guard<std::mutex> lock(mu_);
  if (failed_.ok()) failed_ = status;
  for (auto& [pair, queue] : queues_) {
    for (auto it = queue.begin(); it != queue.end();) {
      if (!it->ticket) {
        ++it;
        continue;
      }
      it->ticket->done = true;
      it->ticket->status = failed_;
      it = queue.erase(it);
    }
  }
  Wake();
}

Status Mailbox::ExportArrived(std::vector<ArrivedMessage>* out) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [pair, queue] : queues_) {
    for (const Message& m : queue) {
      if (m.ticket) return Status(StatusCode::kAborted, "a local send from rank " + std::to_string(pair.first) +
                                                            " to rank " + std::to_string(pair.second) + " waits");
      if (m.fill != Fill::kNone) {
        return Status(StatusCode::kAborted, "a message from rank " + std::to_string(pair.first) + " to rank " +
                                                std::to_string(pair.second) + " is read into its receive");
      }
      out->push_back(ArrivedMessage{pair.first, pair.second, m.owned});
    }
  }
  return Status::Ok();
}

}  // namespace conduit
