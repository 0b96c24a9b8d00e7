#include "collectives/mailbox.h"

#include <cstring>

namespace conduit {

void Mailbox::PostLocal(int src, int dst, const uint8_t* data, size_t len, std::shared_ptr<SendTicket> ticket) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!failed_.ok()) {
    ticket->done = true;
    ticket->status = failed_;
    return;
  }
  queues_[{src, dst}].push_back(Message{data, len, {}, std::move(ticket)});
  cv_.notify_all();
}

void Mailbox::PostRemote(int src, int dst, std::vector<uint8_t> bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  Message m{nullptr, bytes.size(), std::move(bytes), nullptr};
  m.data = m.owned.data();
  queues_[{src, dst}].push_back(std::move(m));
  cv_.notify_all();
}

Status Mailbox::Receive(int src, int dst, uint8_t* out, size_t len, Deadline deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  auto& queue = queues_[{src, dst}];
  while (queue.empty()) {
    if (!failed_.ok()) return failed_;
    if (cv_.wait_until(lock, deadline.when()) == std::cv_status::timeout && queue.empty()) {
      return RemoteError("timed out waiting for rank %d to send to rank %d", src, dst);
    }
  }
  Message m = std::move(queue.front());
  queue.pop_front();
  Status st;
  if (m.len != len) {
    st = InvalidUsage("rank %d sent %zu bytes but rank %d posted a receive of %zu bytes", src, m.len, dst, len);
  } else if (len > 0) {
    // Copy outside the lock would be faster for huge messages, but the sender's segment
    // must stay valid until its ticket is signalled, which the lock order guarantees.
    lock.unlock();
    memcpy(out, m.data, len);
    lock.lock();
  }
  if (m.ticket) {
    m.ticket->done = true;
    m.ticket->status = st;
    cv_.notify_all();
  }
  return st;
}

Status Mailbox::WaitSent(const std::shared_ptr<SendTicket>& ticket, Deadline deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  while (!ticket->done) {
    if (!failed_.ok()) return failed_;
    if (cv_.wait_until(lock, deadline.when()) == std::cv_status::timeout && !ticket->done) {
      return RemoteError("timed out waiting for the receiver to take a send");
    }
  }
  return ticket->status;
}

void Mailbox::Fail(const Status& status) {
  std::lock_guard<std::mutex> lock(mu_);
  if (failed_.ok()) failed_ = status;
  cv_.notify_all();
}

Status Mailbox::ExportArrived(std::vector<ArrivedMessage>* out) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [pair, queue] : queues_) {
    for (const Message& m : queue) {
      if (m.ticket) return Status(StatusCode::kAborted, "a local send from rank " + std::to_string(pair.first) +
                                                            " to rank " + std::to_string(pair.second) + " waits");
      out->push_back(ArrivedMessage{pair.first, pair.second, m.owned});
    }
  }
  return Status::Ok();
}

}  // namespace conduit
