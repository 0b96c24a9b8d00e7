#include "collectives/rendezvous.h"

#include <algorithm>
#include <cstring>

#include "common/frame.h"
#include "common/log.h"
#include "transport/tcp.h"

namespace conduit {
namespace {

void Reply(int fd, const Status& status, const std::vector<std::string>& addrs, const std::vector<int>& ring,
           Deadline deadline) {
  peerproto::MembershipReply head{};
  head.status = ToWire(status);
  head.nranks = status.ok() ? static_cast<int32_t>(addrs.size()) : 0;
  peerproto::RingOrder order{static_cast<int32_t>(ring.size()), 0};
  const size_t addrs_bytes = head.nranks * sizeof(shimproto::DaemonAddr);
  std::vector<uint8_t> payload(sizeof(head) + addrs_bytes +
                               (status.ok() ? sizeof(order) + ring.size() * sizeof(int32_t) : 0));
  memcpy(payload.data(), &head, sizeof(head));
  for (int r = 0; r < head.nranks; ++r) {
    shimproto::DaemonAddr a{};
    CopyCString(a.text, addrs[r].c_str());
    memcpy(payload.data() + sizeof(head) + r * sizeof(a), &a, sizeof(a));
  }
  if (status.ok()) {
    uint8_t* p = payload.data() + sizeof(head) + addrs_bytes;
    memcpy(p, &order, sizeof(order));
    p += sizeof(order);
    for (int h : ring) {
      int32_t v = h;
      memcpy(p, &v, sizeof(v));
      p += sizeof(v);
    }
  }
  Status st = WriteFrame(fd, peerproto::kMagic, peerproto::kVersion, peerproto::kMembership, 0, payload.data(),
                         static_cast<uint32_t>(payload.size()), deadline);
  if (!st.ok()) CLOG_WARN("rendezvous: could not answer a member daemon: %s", st.message().c_str());
}

}  // namespace

void RendezvousTable::Serve(int fd, const peerproto::RegisterRequest& request, Deadline deadline) {
  const std::string addr = FromCString(request.daemon_addr);
  std::shared_ptr<Entry> entry;
  {
    std::unique_lock<std::mutex> lock(mu_);
    auto& slot = entries_[request.comm_key];
    if (!slot) {
      slot = std::make_shared<Entry>();
      slot->nranks = request.nranks;
      slot->addrs.resize(request.nranks);
    }
    entry = slot;
    Status bad;
    if (request.nranks != entry->nranks) {
      bad = InvalidUsage("rank %d joined with nranks %d but the communicator has nranks %d", request.rank,
                         request.nranks, entry->nranks);
    } else if (request.rank < 0 || request.rank >= entry->nranks) {
      bad = InvalidArgument("rank %d out of range for nranks %d", request.rank, entry->nranks);
    } else if (!entry->addrs[request.rank].empty()) {
      bad = InvalidUsage("rank %d joined the communicator twice (from %s and %s)", request.rank,
                         entry->addrs[request.rank].c_str(), addr.c_str());
    }
    if (!bad.ok()) {
      lock.unlock();
      Reply(fd, bad, {}, {}, deadline);
      return;
    }
    entry->addrs[request.rank] = addr;
    ++entry->joined;
    if (entry->joined == entry->nranks) {
      std::vector<std::string> hosts = HostsOf(entry->addrs);
      if (choose_ring_) entry->ring = choose_ring_(hosts);
      if (entry->ring.size() != hosts.size()) {
        entry->ring.clear();
        for (size_t h = 0; h < hosts.size(); ++h) entry->ring.push_back(static_cast<int>(h));
      }
    }
    cv_.notify_all();
    while (entry->joined < entry->nranks && entry->failed.ok()) {
      if (cv_.wait_until(lock, deadline.when()) == std::cv_status::timeout && entry->joined < entry->nranks &&
          entry->failed.ok()) {
        std::string missing;
        for (int r = 0; r < entry->nranks && missing.size() < 200; ++r) {
          if (entry->addrs[r].empty()) missing += (missing.empty() ? "" : ",") + std::to_string(r);
        }
        entry->failed = SystemError("only %d of %d ranks joined the communicator before the timeout; missing ranks: %s",
                                    entry->joined, entry->nranks, missing.c_str());
        cv_.notify_all();
      }
    }
    ++entry->replied;
    if (entry->replied == entry->joined) {
      auto it = entries_.find(request.comm_key);
      if (it != entries_.end() && it->second == entry) entries_.erase(it);
    }
  }
  Reply(fd, entry->failed, entry->addrs, entry->ring, deadline);
}

std::vector<std::string> HostsOf(const std::vector<std::string>& rank_addrs) {
  std::vector<std::string> hosts;
  for (const auto& a : rank_addrs) {
    if (std::find(hosts.begin(), hosts.end(), a) == hosts.end()) hosts.push_back(a);
  }
  return hosts;
}

Status RegisterWithRoot(const std::string& root_addr, uint64_t key, int nranks, int rank, const std::string& my_addr,
                        int timeout_ms, std::vector<std::string>* rank_addrs, std::vector<int>* ring) {
  // The root waits up to its own timeout for the last rank; give it a little longer.
  Deadline deadline = Deadline::AfterMs(static_cast<int64_t>(timeout_ms) + 2000);
  UniqueFd fd;
  Status st = TcpConnect(root_addr, Deadline::AfterMs(timeout_ms), &fd);
  if (!st.ok()) return SystemError("cannot reach the communicator's root daemon: %s", st.message().c_str());
  TuneTcpSocket(fd.get(), 0);
  peerproto::RegisterRequest req{};
  req.comm_key = key;
  req.nranks = nranks;
  req.rank = rank;
  CopyCString(req.daemon_addr, my_addr.c_str());
  CONDUIT_RETURN_IF_ERROR(WriteFrame(fd.get(), peerproto::kMagic, peerproto::kVersion, peerproto::kRegister, 0, &req,
                                     sizeof(req), deadline));
  Frame frame;
  st = ReadFrame(fd.get(), peerproto::kMagic, peerproto::kVersion, peerproto::kMaxPayload, &frame, deadline);
  if (!st.ok()) return SystemError("rendezvous with root daemon %s failed: %s", root_addr.c_str(), st.message().c_str());
  peerproto::MembershipReply head;
  if (frame.header.type != peerproto::kMembership || frame.payload.size() < sizeof(head)) {
    return SystemError("root daemon %s sent a malformed membership reply", root_addr.c_str());
  }
  memcpy(&head, frame.payload.data(), sizeof(head));
  CONDUIT_RETURN_IF_ERROR(FromWire(head.status));
  const size_t addrs_end = sizeof(head) + nranks * sizeof(shimproto::DaemonAddr);
  peerproto::RingOrder order{};
  if (head.nranks != nranks || frame.payload.size() < addrs_end + sizeof(order)) {
    return SystemError("root daemon %s sent a membership of the wrong size", root_addr.c_str());
  }
  rank_addrs->resize(nranks);
  for (int r = 0; r < nranks; ++r) {
    shimproto::DaemonAddr a;
    memcpy(&a, frame.payload.data() + sizeof(head) + r * sizeof(a), sizeof(a));
    (*rank_addrs)[r] = FromCString(a.text);
  }
  memcpy(&order, frame.payload.data() + addrs_end, sizeof(order));
  if (order.nhosts < 0 || order.nhosts > nranks ||
      frame.payload.size() != addrs_end + sizeof(order) + order.nhosts * sizeof(int32_t)) {
    return SystemError("root daemon %s sent a malformed ring order", root_addr.c_str());
  }
  ring->resize(order.nhosts);
  for (int i = 0; i < order.nhosts; ++i) {
    memcpy(&(*ring)[i], frame.payload.data() + addrs_end + sizeof(order) + i * sizeof(int32_t), sizeof(int32_t));
  }
  return Status::Ok();
}

}  // namespace conduit
