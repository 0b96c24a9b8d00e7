#include "collectives/registry.h"

#include <algorithm>
#include <cstring>

#include "collectives/link_dial.h"
#include "collectives/peer_messages.h"
#include "common/frame.h"
#include "common/log.h"
#include "common/unique_id.h"
#include "protocol/peer_protocol.h"
#include "security/comm_secret.h"
#include "security/peer_security.h"
#include "transport/tcp.h"

namespace conduit {

CommRegistry::CommRegistry(std::string my_addr, CommOptions options, Fabric* fabric)
    : my_addr_(std::move(my_addr)),
      options_(std::move(options)),
      fabric_(fabric),
      rendezvous_(options_.protocol_versions,
                  fabric == nullptr ? RingChooser()
                                    : RingChooser([fabric](const std::vector<std::string>& hosts) {
                                        return fabric->ChooseRing(hosts);
                                      })),
      expirer_([this] { ExpireParkedLoop(); }) {}

CommRegistry::~CommRegistry() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  expirer_.join();
}

void CommRegistry::ExpireParkedLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    stop_cv_.wait_for(lock, std::chrono::seconds(1));
    if (stopping_) return;
    auto lost = ExpireHanded();
    if (!lost.empty()) {
      lock.unlock();
      for (auto& [comm, why] : lost) comm->Abort(why);
      lock.lock();
    }
    size_t dropped = ExpireParked();
    if (dropped > 0) {
      CLOG_WARN("dropped %zu link(s) from other daemons for communicators that did not form here within %d ms",
                dropped, options_.timeout_ms);
    }
    // Programs' device buffers whose last collective has run and that they freed since:
    // their mappings close now, not at the communicator's next collective.
    lock.unlock();
    // List's communicators die with the loop's statement, outside mu_, should the loop
    // hold a communicator's last reference.
    for (const auto& comm : List()) comm->ReleaseFinishedDeviceWork();
    lock.lock();
  }
}

size_t CommRegistry::ExpireParked() {
  size_t dropped = 0;
  for (auto it = parked_.begin(); it != parked_.end();) {
    auto& links = it->second;
    dropped += std::erase_if(links, [](const ParkedLink& p) { return p.expires.expired(); });
    it = links.empty() ? parked_.erase(it) : std::next(it);
  }
  parked_count_ -= dropped;
  return dropped;
}

size_t CommRegistry::ParkedLinks() {
  std::lock_guard<std::mutex> lock(mu_);
  return parked_count_;
}

size_t CommRegistry::LiveCommunicators() {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (auto& [key, weak] : comms_) n += weak.expired() ? 0 : 1;
  return n;
}

std::vector<std::shared_ptr<Communicator>> CommRegistry::List() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<Communicator>> out;
  for (auto& [key, weak] : comms_) {
    if (auto comm = weak.lock()) out.push_back(std::move(comm));
  }
  return out;
}

void CommRegistry::Stop(const Status& reason) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = reason;
  }
  for (const auto& comm : List()) comm->Abort(reason);
}

Status CommRegistry::Join(const CommIdentity& id, int nranks, int rank, std::shared_ptr<Communicator>* out,
                          const std::string& exe) {
  if (nranks <= 0 || rank < 0 || rank >= nranks) {
    return InvalidArgument("invalid rank %d for nranks %d", rank, nranks);
  }
  std::shared_ptr<Communicator> comm;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopped_.ok()) return stopped_;
    for (auto it = comms_.begin(); it != comms_.end();) {  // forget destroyed communicators
      if (it->second.expired()) {
        accepting_.erase(it->first);
        it = comms_.erase(it);
      } else {
        ++it;
      }
    }
    comm = comms_[id.key].lock();
    if (!comm) {
      comm = std::make_shared<Communicator>(id.key, nranks, my_addr_, options_, fabric_, exe, id.secret);
      comms_[id.key] = comm;
    }
  }
  if (comm->nranks() != nranks) {
    return InvalidUsage("rank %d passed nranks %d but another local rank of this communicator passed %d", rank, nranks,
                        comm->nranks());
  }
  std::vector<std::string> rank_addrs;
  std::vector<int> ring;
  uint32_t version = 0;
  CONDUIT_RETURN_IF_ERROR(RegisterWithRoot(*options_.security, id, nranks, rank, my_addr_, options_.protocol_versions,
                                           options_.timeout_ms, &rank_addrs, &ring, &version));
  if (rank_addrs[rank] != my_addr_) {
    return InternalError("root reports rank %d at %s, but this daemon is %s", rank, rank_addrs[rank].c_str(),
                         my_addr_.c_str());
  }
  CONDUIT_RETURN_IF_ERROR(
      comm->Setup(rank_addrs, ring, version, [this](Communicator& c) { return ConnectLinks(c); }));
  // The id may name a communicator formed earlier, which a new rendezvous does not change:
  // the rank must be one it placed here, and not held by another connection.
  CONDUIT_RETURN_IF_ERROR(comm->ClaimRank(rank));
  *out = std::move(comm);
  return Status::Ok();
}

Status CommRegistry::ConnectLinks(Communicator& comm) {
  std::vector<ParkedLink> parked;
  {
    std::lock_guard<std::mutex> lock(mu_);
    accepting_.insert(comm.key());
    auto it = parked_.find(comm.key());
    if (it != parked_.end()) {
      parked = std::move(it->second);
      parked_count_ -= parked.size();
      parked_.erase(it);
    }
  }
  const auto& m = comm.membership();
  const int nhosts = static_cast<int>(m.host_addrs.size());
  for (auto& p : parked) {
    if (p.from_host <= m.my_host || p.from_host >= nhosts) {
      CLOG_WARN("dropping link from %s claiming host index %d", p.peer.Describe().c_str(), p.from_host);
      continue;
    }
    if (p.peer.authenticated() && p.peer.daemon != m.host_addrs[p.from_host]) {
      CLOG_WARN("dropping link from %s claiming to be host %d of communicator %s, which is %s",
                p.peer.Describe().c_str(), p.from_host, CommKeyShort(comm.key()).c_str(),
                m.host_addrs[p.from_host].c_str());
      continue;
    }
    comm.AttachLink(p.from_host, p.channel, std::make_unique<TcpLink>(std::move(p.fd), m.host_addrs[p.from_host]), 0,
                    p.path, "");
  }
  // The higher-indexed daemon of each pair connects, so every pair gets exactly one link
  // per channel. Collective links take the path the flow policy picks; p2p links (small,
  // latency-bound, carrying control messages) stay on the primary address.
  int priority = 0;
  if (fabric_ != nullptr) {
    if (auto tenant = fabric_->tenants().Resolve(comm.exe(), CommKeyText(comm.key())); tenant) {
      priority = tenant->policy().priority;
    }
  }
  const std::vector<int>& ring = m.initial_ring;
  for (int h = 0; h < m.my_host; ++h) {
    for (uint32_t channel : {peerproto::kCollective, peerproto::kP2p}) {
      LinkPath lp;
      if (channel == peerproto::kCollective && fabric_ != nullptr) {
        lp = fabric_->ChooseLinkPath(my_addr_, m.host_addrs[h], priority, comm.key(), RingNeighbours(ring, m.my_host, h),
                                     kPolicyPath);
      } else {
        lp.connect_addr = m.host_addrs[h];
      }
      peerproto::LinkHello hello{comm.key(), m.my_host, channel, 0, lp.path};
      UniqueFd fd;
      CONDUIT_RETURN_IF_ERROR(
          DialLink(*options_.security, m.host_addrs[h], lp.connect_addr, lp.local_ip, hello, options_.timeout_ms, &fd));
      comm.AttachLink(h, channel, std::make_unique<TcpLink>(std::move(fd), m.host_addrs[h]), 0, lp.path, lp.local_ip,
                      std::move(lp.lease));
    }
  }
  return Status::Ok();
}

void CommRegistry::ServePeerConnection(Conn conn, const PeerIdentity& peer) {
  Deadline first_frame = Deadline::AfterMs(10000);
  UniqueFd fd = conn.ReleaseFd();  // the router never hands collectives a sealed connection
  if (!fd.valid()) return;
  Frame frame;
  Status st = ReadFrame(fd.get(), peerproto::kMagic, peerproto::kVersion, peerproto::kMaxPayload, &frame, first_frame);
  if (!st.ok()) {
    CLOG_WARN("peer connection from %s rejected: %s", peer.Describe().c_str(), st.message().c_str());
    return;
  }
  if (frame.header.type == peerproto::kRegister) {
    peerproto::RegisterRequest req;
    VersionRange versions;
    if (Status bad = ParseRegister(frame.payload, &req, &versions); !bad.ok()) {
      CLOG_WARN("peer connection from %s rejected: %s", peer.Describe().c_str(), bad.message().c_str());
      return;
    }
    // The rank's daemon is the one this connection proved to be; its claim must agree.
    rendezvous_.Serve(fd.get(), req, versions, peer.daemon, Deadline::AfterMs(options_.timeout_ms));
    return;
  }
  if (frame.header.type != peerproto::kLinkHello || frame.payload.size() != sizeof(peerproto::LinkHello)) {
    CLOG_WARN("peer connection from %s rejected: unexpected first frame type %u (%zu bytes)", peer.Describe().c_str(),
              frame.header.type, frame.payload.size());
    return;
  }
  peerproto::LinkHello hello;
  memcpy(&hello, frame.payload.data(), sizeof(hello));
  if (Status bad = ValidateLinkHello(hello); !bad.ok()) {
    CLOG_WARN("peer connection from %s rejected: %s", peer.Describe().c_str(), bad.message().c_str());
    return;
  }
  TuneTcpSocket(fd.get(), options_.timeout_ms);
  std::shared_ptr<Communicator> comm;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (accepting_.count(hello.comm_key)) comm = comms_[hello.comm_key].lock();
    if (!comm) {
      if (hello.epoch > 0) {
        CLOG_WARN("dropping a reconfiguration link from %s for unknown communicator %s", peer.Describe().c_str(),
                  CommKeyShort(hello.comm_key).c_str());
        return;
      }
      auto& list = parked_[hello.comm_key];
      if (list.size() >= kMaxParkedPerComm || parked_count_ >= kMaxParked) {
        CLOG_WARN("dropping a link from %s for communicator %s: %zu links are already waiting for communicators that "
                  "have not formed here", peer.Describe().c_str(), CommKeyShort(hello.comm_key).c_str(), parked_count_);
        if (list.empty()) parked_.erase(hello.comm_key);
        return;
      }
      peerproto::LinkHelloReply reply{ToWire(Status::Ok())};
      if (!WriteFrame(fd.get(), peerproto::kMagic, peerproto::kVersion, peerproto::kLinkHelloReply, 0, &reply,
                      sizeof(reply), first_frame)
               .ok()) {
        if (list.empty()) parked_.erase(hello.comm_key);
        return;
      }
      // Links for communicators that never form here are dropped after the timeout
      // (ExpireParkedLoop).
      list.push_back(ParkedLink{hello.from_host, hello.channel, hello.path, std::move(fd), peer,
                                Deadline::AfterMs(options_.timeout_ms)});
      ++parked_count_;
      return;
    }
  }
  const int nhosts = static_cast<int>(comm->membership().host_addrs.size());
  if (hello.from_host <= comm->membership().my_host || hello.from_host >= nhosts) {
    CLOG_WARN("dropping link from %s claiming host index %d", peer.Describe().c_str(), hello.from_host);
    return;
  }
  const std::string& member = comm->membership().host_addrs[hello.from_host];
  if (peer.authenticated() && peer.daemon != member) {
    Status refused = InvalidUsage("daemon %s is not host %d of communicator %s (%s is)", peer.daemon.c_str(),
                                  hello.from_host, CommKeyShort(hello.comm_key).c_str(), member.c_str());
    CLOG_WARN("dropping link from %s: %s", peer.Describe().c_str(), refused.message().c_str());
    peerproto::LinkHelloReply no{ToWire(refused)};
    (void)WriteFrame(fd.get(), peerproto::kMagic, peerproto::kVersion, peerproto::kLinkHelloReply, 0, &no, sizeof(no),
                     first_frame);
    return;
  }
  peerproto::LinkHelloReply reply{ToWire(Status::Ok())};
  st = WriteFrame(fd.get(), peerproto::kMagic, peerproto::kVersion, peerproto::kLinkHelloReply, 0, &reply,
                  sizeof(reply), first_frame);
  if (!st.ok()) return;
  comm->AttachLink(hello.from_host, hello.channel, std::make_unique<TcpLink>(std::move(fd), member), hello.epoch,
                   hello.path, "");
}

}  // namespace conduit
