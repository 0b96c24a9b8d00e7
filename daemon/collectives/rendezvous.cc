#include "collectives/rendezvous.h"

#include <algorithm>
#include <cstring>

#include "common/frame.h"
#include "collectives/peer_messages.h"
#include "common/log.h"
#include "security/comm_secret.h"
#include "security/peer_security.h"
#include "transport/tcp.h"

namespace conduit {
namespace {

void Reply(int fd, const Status& status, const std::vector<std::string>& addrs, const std::vector<int>& ring,
           uint32_t version, Deadline deadline) {
  peerproto::MembershipReply head{};
  head.status = ToWire(status);
  head.nranks = status.ok() ? static_cast<int32_t>(addrs.size()) : 0;
  head.version = status.ok() ? version : 0;
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

size_t RendezvousTable::open() {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

void RendezvousTable::Serve(int fd, const peerproto::RegisterRequest& request, VersionRange theirs,
                            const std::string& proven, Deadline deadline) {
  std::string daemon;
  Status bad = ValidateRegister(request, proven, &daemon);
  std::shared_ptr<Entry> entry;
  std::unique_lock<std::mutex> lock(mu_);
  if (bad.ok()) {
    auto it = entries_.find(request.comm_key);
    if (it != entries_.end()) {
      entry = it->second;
    } else if (entries_.size() >= peerproto::kMaxPendingRendezvous) {
      bad = SystemError("this root daemon is serving %zu rendezvous already; try again later", entries_.size());
    } else {
      entry = std::make_shared<Entry>();
      entry->nranks = request.nranks;
      entry->versions = versions_;
      entries_[request.comm_key] = entry;
    }
  }
  // The versions the root, the ranks that joined so far and this one all speak.
  VersionRange common;
  if (bad.ok()) {
    common = VersionRange{std::max(entry->versions.oldest, theirs.oldest),
                          std::min(entry->versions.newest, theirs.newest)};
  }
  if (bad.ok() && common.oldest > common.newest) {
    bad = InvalidUsage("daemon %s speaks collective protocol %s, but the root daemon%s only %s: no version in common "
                       "(roll the upgrade through a release that speaks both)",
                       daemon.c_str(), DescribeVersions(theirs).c_str(),
                       entry->addrs.empty() ? "" : " and the ranks that joined", DescribeVersions(entry->versions).c_str());
    // The communicator cannot form: its ranks hear why now instead of timing out.
    if (entry->addrs.empty()) {
      auto it = entries_.find(request.comm_key);
      if (it != entries_.end() && it->second == entry) entries_.erase(it);
    } else if (entry->failed.ok()) {
      entry->failed = bad;
      cv_.notify_all();
    }
  }
  if (bad.ok() && request.nranks != entry->nranks) {
    bad = InvalidUsage("rank %d joined with nranks %d but the communicator has nranks %d", request.rank,
                       request.nranks, entry->nranks);
  } else if (bad.ok() && entry->addrs.count(request.rank) != 0) {
    bad = InvalidUsage("rank %d joined the communicator twice (from %s and %s)", request.rank,
                       entry->addrs[request.rank].c_str(), daemon.c_str());
  }
  if (!bad.ok()) {
    lock.unlock();
    CLOG_WARN("rendezvous: refused a Register from daemon %s: %s", proven.empty() ? daemon.c_str() : proven.c_str(),
              bad.message().c_str());
    Reply(fd, bad, {}, {}, 0, deadline);
    return;
  }
  entry->versions = common;
  entry->addrs[request.rank] = daemon;
  const int joined = static_cast<int>(entry->addrs.size());
  std::vector<std::string> addrs;
  if (joined == entry->nranks) {
    for (const auto& [rank, addr] : entry->addrs) addrs.push_back(addr);
    std::vector<std::string> hosts = HostsOf(addrs);
    if (choose_ring_) entry->ring = choose_ring_(hosts);
    if (entry->ring.size() != hosts.size()) {
      entry->ring.clear();
      for (size_t h = 0; h < hosts.size(); ++h) entry->ring.push_back(static_cast<int>(h));
    }
  }
  cv_.notify_all();
  auto complete = [&] { return static_cast<int>(entry->addrs.size()) == entry->nranks; };
  while (!complete() && entry->failed.ok()) {
    if (cv_.wait_until(lock, deadline.when()) == std::cv_status::timeout && !complete() && entry->failed.ok()) {
      std::string missing;
      for (int r = 0; r < entry->nranks && missing.size() < 200; ++r) {
        if (entry->addrs.count(r) != 0) continue;
        if (!missing.empty()) missing += ',';
        missing += std::to_string(r);
      }
      entry->failed = SystemError("only %zu of %d ranks joined the communicator before the timeout; missing ranks: %s",
                                  entry->addrs.size(), entry->nranks, missing.c_str());
      cv_.notify_all();
    }
  }
  if (entry->failed.ok() && addrs.empty()) {
    for (const auto& [rank, addr] : entry->addrs) addrs.push_back(addr);
  }
  ++entry->replied;
  if (entry->replied == static_cast<int>(entry->addrs.size())) {
    auto it = entries_.find(request.comm_key);
    if (it != entries_.end() && it->second == entry) entries_.erase(it);
  }
  Status failed = entry->failed;
  std::vector<int> ring = entry->ring;
  const uint32_t version = entry->versions.newest;
  lock.unlock();
  Reply(fd, failed, addrs, ring, version, deadline);
}

std::vector<std::string> HostsOf(const std::vector<std::string>& rank_addrs) {
  std::vector<std::string> hosts;
  for (const auto& a : rank_addrs) {
    if (std::find(hosts.begin(), hosts.end(), a) == hosts.end()) hosts.push_back(a);
  }
  return hosts;
}

Status RegisterWithRoot(const PeerSecurity& security, const CommIdentity& id, int nranks, int rank,
                        const std::string& my_addr, VersionRange versions, int timeout_ms,
                        std::vector<std::string>* rank_addrs, std::vector<int>* ring, uint32_t* version) {
  const std::string& root_addr = id.root_addr;
  // The root waits up to its own timeout for the last rank; give it a little longer.
  Deadline deadline = Deadline::AfterMs(static_cast<int64_t>(timeout_ms) + 2000);
  Conn conn;
  PeerIdentity root;
  Status st = security.Dial(root_addr, Deadline::AfterMs(timeout_ms), /*sealable=*/false, &conn, &root);
  if (!st.ok()) return SystemError("cannot reach the communicator's root daemon: %s", st.message().c_str());
  if (root.authenticated() && root.daemon != root_addr) {
    return RemoteError("the daemon answering at %s (the ncclUniqueId's root) is %s", root_addr.c_str(),
                       root.daemon.c_str());
  }
  UniqueFd fd = conn.ReleaseFd();
  TuneTcpSocket(fd.get(), 0);
  peerproto::RegisterRequest req{};
  req.comm_key = id.key;
  req.nranks = nranks;
  req.rank = rank;
  CopyCString(req.daemon_addr, my_addr.c_str());
  memcpy(req.secret, id.secret.data(), sizeof(req.secret));
  // A daemon that speaks version 3 only sends the request alone, as daemons from before
  // negotiation did, so that their roots (which accept exactly that) still serve it.
  std::vector<uint8_t> payload(sizeof(req));
  memcpy(payload.data(), &req, sizeof(req));
  const uint32_t v3 = peerproto::kCollectiveVersionBeforeNegotiation;
  if (versions.oldest != v3 || versions.newest != v3) {
    const peerproto::RegisterVersions range{versions.oldest, versions.newest};
    payload.resize(sizeof(req) + sizeof(range));
    memcpy(payload.data() + sizeof(req), &range, sizeof(range));
  }
  CONDUIT_RETURN_IF_ERROR(WriteFrame(fd.get(), peerproto::kMagic, peerproto::kVersion, peerproto::kRegister, 0,
                                     payload.data(), static_cast<uint32_t>(payload.size()), deadline));
  Frame frame;
  st = ReadFrame(fd.get(), peerproto::kMagic, peerproto::kVersion, peerproto::kMaxPayload, &frame, deadline);
  if (!st.ok()) return SystemError("rendezvous with root daemon %s failed: %s", root_addr.c_str(), st.message().c_str());
  if (frame.header.type != peerproto::kMembership) {
    return SystemError("root daemon %s answered a Register with message type %u", root_addr.c_str(), frame.header.type);
  }
  st = ParseMembership(frame.payload, nranks, rank_addrs, ring, version);
  if (!st.ok()) return Status(st.code(), "root daemon " + root_addr + ": " + st.message());
  if (*version < versions.oldest || *version > versions.newest) {
    return RemoteError("root daemon %s chose collective protocol %u for the communicator, and this daemon speaks %s",
                       root_addr.c_str(), *version, DescribeVersions(versions).c_str());
  }
  return Status::Ok();
}

}  // namespace conduit
