#include "objects/peers.h"

#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <thread>

#include "common/busy_poll.h"
#include "common/detached_thread.h"
#include "common/frame.h"
#include "common/log.h"
#include "common/thread_guard.h"
#include "common/version_range.h"
#include "objects/wait.h"
#include "protocol/peer_protocol.h"
#include "security/peer_security.h"
#include "transport/tcp.h"

namespace conduit::objects {
namespace {

// Set on a thread serving another daemon's requests (ServeIncoming), for Begin.
thread_local bool t_serving_peer = false;

constexpr int kPingEveryMs = 250;
constexpr int kSilenceMs = 2000;       // a peer silent this long is dead
constexpr int kReconnectMs = 200;
constexpr int kWriteTimeoutMs = 5000;

Status WriteMsg(Conn& conn, uint16_t type, uint32_t tag, const Bytes& body) {
  return WriteFrame(conn, peerproto::kMagic, peerproto::kVersion, type, tag, body.data(),
                    static_cast<uint32_t>(body.size()), Deadline::AfterMs(kWriteTimeoutMs));
}

Status ReadMsg(Conn& conn, Frame* frame, Deadline deadline) {
  return ReadFrame(conn, peerproto::kMagic, peerproto::kVersion, objproto::kMaxPayload, frame, deadline);
}

}  // namespace

struct Peers::Pending {
  std::mutex mu;
  std::condition_variable cv;
  // Written under mu, after the answer below; atomic so that a spinning Await may read it
  // without mu (an acquire load then sees the answer too).
  std::atomic<bool> done{false};
  Status status;
  uint16_t type = 0;
  Bytes body;
  std::function<void(const Status&)> then;  // Peers::Then: run once, after done is set
  // Peers::Then's deadline; read and written under the channel's mu (ExpireCalls).
  Deadline::Clock::time_point expires = Deadline::Clock::time_point::max();

  void Finish(Status st, uint16_t t, Bytes b) {
    std::function<void(const Status&)> after;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (done.load(std::memory_order_relaxed)) return;
      status = std::move(st);
      type = t;
      body = std::move(b);
      done.store(true, std::memory_order_release);
      cv.notify_all();
      after = std::move(then);
    }
    // status is not written again once done is set.
    if (after) after(status);
  }
};

struct Peers::Channel {
  std::string addr;
  std::mutex mu;        // fd, up, pending, ping state
  std::mutex write_mu;  // one frame at a time on the socket; guards wfd
  int fd = -1;          // the live connection's socket (names it while it lives)
  int wfd = -1;         // the descriptor writers use; -1 once it is about to be closed
  Conn* wconn = nullptr;  // the connection writers use (with wfd, under write_mu)
  bool up = false;
  uint32_t version = 0;  // the object protocol version negotiated on the live connection
  uint32_t next_tag = 1;
  std::map<uint32_t, std::shared_ptr<Pending>> pending;
  bool ping_outstanding = false;
  std::chrono::steady_clock::time_point ping_sent;
};

struct Peers::Incoming {
  Conn conn;
  std::mutex write_mu;
  std::atomic<bool> closed{false};
};

Peers::Peers(std::string self, std::vector<std::string> peers, const PeerSecurity* security, VersionRange versions)
    : self_(std::move(self)), all_(std::move(peers)), security_(security), versions_(versions) {
  if (std::find(all_.begin(), all_.end(), self_) == all_.end()) all_.push_back(self_);
  std::sort(all_.begin(), all_.end());
  for (const auto& a : all_) {
    if (a == self_) continue;
    auto ch = std::make_unique<Channel>();
    ch->addr = a;
    channels_.push_back(std::move(ch));
  }
  ring_ = std::make_shared<HashRing>(std::vector<std::string>{self_});
}

Peers::~Peers() = default;

void Peers::Handle(uint16_t type, Handler handler) { handlers_[type] = std::move(handler); }
void Peers::OnChange(std::function<void()> changed) { changed_ = std::move(changed); }

void Peers::OnPeerUp(std::function<void(const std::string& addr)> up) { peer_up_ = std::move(up); }
void Peers::OnPush(std::function<void(uint16_t, const Bytes&)> push) { push_ = std::move(push); }

void Peers::Start() {
  for (auto& ch : channels_) {
    SpawnDetached("object peer connection", [this, c = ch.get()] { KeepRunning("object peer connection", [&] { ConnectLoop(c); }); });
  }
  SpawnDetached("object peer pings", [this] { KeepRunning("object peer pings", [&] { PingLoop(); }); });
}

Peers::Channel* Peers::Find(const std::string& addr) const {
  for (const auto& ch : channels_) {
    if (ch->addr == addr) return ch.get();
  }
  return nullptr;
}

std::vector<std::string> Peers::Live() const {
  std::vector<std::string> live{self_};
  for (const auto& ch : channels_) {
    std::lock_guard<std::mutex> lock(ch->mu);
    if (ch->up) live.push_back(ch->addr);
  }
  std::sort(live.begin(), live.end());
  return live;
}

bool Peers::IsLive(const std::string& addr) const {
  if (addr == self_) return true;
  Channel* ch = Find(addr);
  if (ch == nullptr) return false;
  std::lock_guard<std::mutex> lock(ch->mu);
  return ch->up;
}

uint32_t Peers::VersionOf(const std::string& addr) const {
  if (addr == self_) return versions_.newest;
  Channel* ch = Find(addr);
  if (ch == nullptr) return 0;
  std::lock_guard<std::mutex> lock(ch->mu);
  return ch->up ? ch->version : 0;
}

void Peers::NoteReplacing(const std::string& addr, int grace_ms) {
  std::lock_guard<std::mutex> lock(replacing_mu_);
  replacing_[addr] = std::chrono::steady_clock::now() + std::chrono::milliseconds(grace_ms);
}

bool Peers::Replacing(const std::string& addr) const {
  std::lock_guard<std::mutex> lock(replacing_mu_);
  auto it = replacing_.find(addr);
  return it != replacing_.end() && std::chrono::steady_clock::now() < it->second;
}

std::string Peers::Owner(const std::string& id) const {
  std::lock_guard<std::mutex> lock(ring_mu_);
  return ring_->Owner(id);
}

std::vector<std::string> Peers::RingMembers() const {
  std::lock_guard<std::mutex> lock(ring_mu_);
  return ring_->members();
}

double Peers::rtt_us() const {
  std::lock_guard<std::mutex> lock(rtt_mu_);
  double best = 0;
  for (double v : rtt_samples_) {
    if (v > 0 && (best == 0 || v < best)) best = v;
  }
  return best;
}

void Peers::Changed() {
  {
    // Connections come up and go down on their own threads: the live set is read and the
    // ring replaced under one lock, so an older view can never overwrite a newer one
    // (that left daemons disagreeing about shard owners for good, every directory call
    // answered "moved").
    std::lock_guard<std::mutex> change(change_mu_);
    auto ring = std::make_shared<HashRing>(Live());
    std::lock_guard<std::mutex> lock(ring_mu_);
    ring_ = ring;
  }
  if (changed_) executor_.Post(changed_);
}

void Peers::ConnectLoop(Channel* ch) {
  std::string last_refusal;  // logged once, not every retry
  while (!stopping()) {
    Conn conn;
    PeerIdentity peer;
    // A dead peer refuses the connection: tried for 1 s at most, then this loop pauses
    // (and sees the daemon stopping) before it dials again.
    Status st = security_->DialOnce(ch->addr, Deadline::AfterMs(1000), /*sealable=*/true, &conn, &peer);
    if (st.ok() && peer.authenticated() && peer.daemon != ch->addr) {
      st = RemoteError("the daemon answering at %s is %s, not the --object-peers entry %s", ch->addr.c_str(),
                       peer.daemon.c_str(), ch->addr.c_str());
    }
    // A daemon that is not up yet refuses the TCP connection: routine. One that answers
    // but fails authentication is a misconfiguration (or worse): say so, once.
    if (!st.ok() && !peer.remote.empty() && st.message() != last_refusal) {
      CLOG_WARN("objects: peer %s: %s", ch->addr.c_str(), st.message().c_str());
      last_refusal = st.message();
    }
    if (st.ok()) {
      last_refusal.clear();
      TuneTcpSocket(conn.fd(), 3 * kSilenceMs);
      objproto::PeerHello hello{};
      hello.version = versions_.oldest;
      hello.newest = versions_.newest;
      hello.from = AddrToWire(self_);
      st = WriteMsg(conn, objproto::kPeerHello, 0, Encode(hello));
      Frame reply;
      if (st.ok()) st = ReadMsg(conn, &reply, Deadline::AfterMs(kSilenceMs));
      objproto::Status ws{};
      if (st.ok() && (reply.header.type != objproto::kPeerHelloReply || !Decode(reply.payload, &ws))) {
        st = SystemError("bad PeerHello reply");
      }
      Status ost = st.ok() ? FromObjectWire(ws) : FromConduit(st, objproto::kUnavailable);
      // The version both use: the acceptor's choice, which must be one we speak; a daemon
      // that predates negotiation accepted our oldest.
      uint32_t version = versions_.oldest;
      objproto::PeerHelloAccept accept{};
      if (ost.ok() && reply.payload.size() >= sizeof(objproto::Status) + sizeof(accept)) {
        memcpy(&accept, reply.payload.data() + sizeof(objproto::Status), sizeof(accept));
        version = accept.version;
        if (version < versions_.oldest || version > versions_.newest) {
          ost = Err(objproto::kInvalid, "it chose object protocol version %u, which this daemon does not speak (%s)",
                    version, DescribeVersions(versions_).c_str());
        }
      }
      if (ost.ok()) {
        {
          std::lock_guard<std::mutex> lock(ch->mu);
          ch->fd = conn.fd();
          ch->up = true;
          ch->version = version;
          ch->ping_outstanding = false;
        }
        {
          std::lock_guard<std::mutex> wlock(ch->write_mu);
          ch->wfd = conn.fd();
          ch->wconn = &conn;
        }
        CLOG_INFO("objects: peer %s is up (object protocol %u%s)", ch->addr.c_str(), version,
                  conn.sealed() ? ", sealed" : "");
        // However the reader ends (an exception included), the channel goes down and no
        // writer may use the connection once it is closed (and its number reused).
        struct Release {
          Peers* peers;
          Channel* ch;
          int fd;
          ~Release() {
            peers->MarkDown(ch, fd, "its reader stopped");
            std::lock_guard<std::mutex> wlock(ch->write_mu);
            ch->wfd = -1;
            ch->wconn = nullptr;
          }
        } release{this, ch, conn.fd()};
        Changed();
        if (peer_up_) executor_.Post([this, addr = ch->addr] { peer_up_(addr); });
        // FailCalls shuts the channels' connections down after it marks the daemon
        // stopping: one that came up after its sweep is not read at all.
        if (!stopping()) ReadLoop(ch, conn);
      } else {
        CLOG_WARN("objects: peer %s refused the control connection: %s", ch->addr.c_str(), ost.message().c_str());
      }
    }
    if (!Pause(std::chrono::milliseconds(kReconnectMs))) return;
  }
}

void Peers::ReadLoop(Channel* ch, Conn& conn) {
  const int fd = conn.fd();
  for (;;) {
    Frame frame;
    Status st = ReadMsg(conn, &frame, Deadline::AfterMs(kSilenceMs));
    if (!st.ok()) {
      MarkDown(ch, fd, st.message());
      return;
    }
    const uint16_t type = frame.header.type;
    if (type == objproto::kPong) {
      std::lock_guard<std::mutex> lock(ch->mu);
      if (ch->ping_outstanding) {
        double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - ch->ping_sent).count();
        std::lock_guard<std::mutex> rlock(rtt_mu_);
        rtt_samples_[rtt_next_++ % rtt_samples_.size()] = us;
        ch->ping_outstanding = false;
      }
      continue;
    }
    std::shared_ptr<Pending> p;
    if (frame.header.tag != 0) {
      std::lock_guard<std::mutex> lock(ch->mu);
      auto it = ch->pending.find(frame.header.tag);
      if (it != ch->pending.end()) {
        p = it->second;
        ch->pending.erase(it);
      }
    }
    if (p) {
      p->Finish(Status::Ok(), type, std::move(frame.payload));
    } else if (push_) {
      // Pushed events are handled right here, without a thread handoff (a reduce's
      // sources arrive this way): push handlers only take short locks and never wait for
      // another daemon.
      push_(type, frame.payload);
    }
  }
}

void Peers::MarkDown(Channel* ch, int fd, const std::string& why) {
  std::map<uint32_t, std::shared_ptr<Pending>> failed;
  {
    std::lock_guard<std::mutex> lock(ch->mu);
    if (ch->fd != fd) return;
    ch->fd = -1;
    ch->up = false;
    failed.swap(ch->pending);
  }
  shutdown(fd, SHUT_RDWR);
  CLOG_WARN("objects: peer %s is down: %s", ch->addr.c_str(), why.c_str());
  for (auto& [tag, p] : failed) {
    p->Finish(Err(objproto::kUnavailable, "lost contact with daemon %s: %s", ch->addr.c_str(), why.c_str()), 0, {});
  }
  Changed();
}

void Peers::PingLoop() {
  while (Pause(std::chrono::milliseconds(kPingEveryMs))) {
    ExpireCalls();
    {
      // A replacement's grace that ended: what was kept for it is looked at again.
      bool ended = false;
      std::lock_guard<std::mutex> lock(replacing_mu_);
      for (auto it = replacing_.begin(); it != replacing_.end();) {
        if (std::chrono::steady_clock::now() < it->second) {
          ++it;
          continue;
        }
        it = replacing_.erase(it);
        ended = true;
      }
      if (ended && changed_) executor_.Post(changed_);
    }
    for (auto& ch : channels_) {
      {
        std::lock_guard<std::mutex> lock(ch->mu);
        if (!ch->up) continue;
        if (!ch->ping_outstanding) {
          ch->ping_outstanding = true;
          ch->ping_sent = std::chrono::steady_clock::now();
        }
      }
      std::lock_guard<std::mutex> wlock(ch->write_mu);
      if (ch->wfd >= 0) (void)WriteMsg(*ch->wconn, objproto::kPing, 0, {});
    }
  }
}

void Peers::Dispatch(uint16_t type, const std::string& from, const Bytes& body, const ReplyFn& reply) {
  auto it = handlers_.find(type);
  if (it == handlers_.end()) {
    CLOG_WARN("objects: daemon %s sent unknown message type 0x%04x; ignored", from.c_str(), type);
    return;
  }
  it->second(from, body, reply);
}

Status Peers::Call(const std::string& to, uint16_t type, Bytes body, uint16_t reply_type, Bytes* reply,
                      Deadline deadline, int spin_micros) {
  return Await(Begin(to, type, std::move(body)), reply_type, reply, deadline, spin_micros);
}

Peers::Outstanding Peers::Begin(const std::string& to, uint16_t type, Bytes body) {
  Outstanding o;
  o.p = std::make_shared<Pending>();
  o.to = to;
  o.type = type;
  auto p = o.p;
  if (stopping_.load(std::memory_order_acquire)) {
    p->Finish(StopReason(), 0, {});
    return o;
  }
  if (to == self_) {
    RememberLocal(p);
    auto answer = [p](uint16_t t, Bytes b) { p->Finish(Status::Ok(), t, std::move(b)); };
    // Messages to itself are in order, as on a connection: behind one-way messages still
    // queued (Send), on the executor. Otherwise at once, on this thread; also on the
    // executor itself (whose queue holds only what was posted while it runs this closure)
    // and on a thread serving another daemon's requests, which must never wait for the
    // executor: the executor may be waiting for that daemon, which may be waiting for it.
    if (self_sends_queued_.load(std::memory_order_acquire) > 0 && !executor_.OnThread() && !t_serving_peer) {
      executor_.Post([this, type, body = std::move(body), answer] { Dispatch(type, self_, body, answer); });
    } else {
      Dispatch(type, self_, body, answer);
    }
    return o;
  }
  Channel* ch = Find(to);
  if (ch == nullptr) {
    p->Finish(Err(objproto::kUnavailable, "%s is not one of this daemon's --object-peers", to.c_str()), 0, {});
    return o;
  }
  int fd;
  {
    std::lock_guard<std::mutex> lock(ch->mu);
    if (!ch->up) {
      p->Finish(Err(objproto::kUnavailable, "daemon %s is down", to.c_str()), 0, {});
      return o;
    }
    // FailCalls sets stopping_ before it takes any channel's lock: a call listed after it
    // went through this channel is seen here.
    if (stopping_.load(std::memory_order_acquire)) {
      p->Finish(StopReason(), 0, {});
      return o;
    }
    fd = ch->fd;
    o.tag = ch->next_tag++;
    if (o.tag == 0) o.tag = ch->next_tag++;
    ch->pending[o.tag] = p;
  }
  o.ch = ch;
  Status st = Write(ch, fd, type, o.tag, body);
  if (!st.ok()) {
    MarkDown(ch, fd, st.message());
    p->Finish(Err(objproto::kUnavailable, "lost contact with daemon %s: %s", to.c_str(), st.message().c_str()), 0, {});
  }
  return o;
}

void Peers::Then(const Outstanding& o, std::function<void(const Status&)> done, Deadline deadline) {
  Pending* p = o.p.get();
  {
    std::lock_guard<std::mutex> lock(p->mu);
    if (!p->done) {
      p->then = std::move(done);
      done = nullptr;
    }
  }
  if (done) {
    done(p->status);
    return;
  }
  // Calls to itself are answered by this daemon's own handlers, which always answer.
  if (o.ch != nullptr && !deadline.is_never()) {
    std::lock_guard<std::mutex> lock(o.ch->mu);
    auto it = o.ch->pending.find(o.tag);
    if (it != o.ch->pending.end()) it->second->expires = deadline.when();
  }
}

void Peers::ExpireCalls() {
  const auto now = Deadline::Clock::now();
  for (auto& ch : channels_) {
    std::vector<std::shared_ptr<Pending>> expired;
    {
      std::lock_guard<std::mutex> lock(ch->mu);
      for (auto it = ch->pending.begin(); it != ch->pending.end();) {
        if (it->second->expires > now) {
          ++it;
          continue;
        }
        expired.push_back(std::move(it->second));
        it = ch->pending.erase(it);
      }
    }
    for (auto& p : expired) {
      p->Finish(Err(objproto::kTimeout, "daemon %s did not answer in time", ch->addr.c_str()), 0, {});
    }
  }
}

Status Peers::Await(const Outstanding& o, uint16_t reply_type, Bytes* reply, Deadline deadline, int spin_micros) {
  Pending* p = o.p.get();
  if (spin_micros > 0) {
    auto until = std::min(deadline.when(), std::chrono::steady_clock::now() + std::chrono::microseconds(spin_micros));
    SpinUntilTrue(until, [p] { return p->done.load(std::memory_order_acquire); });
  }
  std::unique_lock<std::mutex> lock(p->mu);
  if (!WaitUntil(p->cv, lock, deadline, [&] { return p->done.load(); })) {
    lock.unlock();
    if (o.ch != nullptr) {
      std::lock_guard<std::mutex> clock(o.ch->mu);
      o.ch->pending.erase(o.tag);
    }
    return Err(objproto::kTimeout, "daemon %s did not answer message 0x%04x in time", o.to.c_str(), o.type);
  }
  if (!p->status.ok()) return p->status;
  if (p->type != reply_type) {
    return Err(objproto::kInternal, "daemon %s answered 0x%04x with 0x%04x", o.to.c_str(), o.type, p->type);
  }
  *reply = std::move(p->body);
  return Status::Ok();
}

void Peers::RememberLocal(const std::shared_ptr<Pending>& p) {
  std::lock_guard<std::mutex> lock(calls_mu_);
  if (stopping_.load(std::memory_order_relaxed)) {
    p->Finish(stopped_, 0, {});
    return;
  }
  if (local_calls_.size() >= prune_local_at_) {
    std::erase_if(local_calls_, [](const std::weak_ptr<Pending>& w) { return w.expired(); });
    prune_local_at_ = std::max<size_t>(64, 2 * local_calls_.size());
  }
  local_calls_.push_back(p);
}

Status Peers::StopReason() const {
  std::lock_guard<std::mutex> lock(calls_mu_);
  return stopped_;
}

void Peers::FailCalls(const Status& why) {
  std::vector<std::weak_ptr<Pending>> local;
  {
    std::lock_guard<std::mutex> lock(calls_mu_);
    stopped_ = why;
    stopping_.store(true, std::memory_order_release);
    local.swap(local_calls_);
  }
  for (const auto& w : local) {
    if (auto p = w.lock()) p->Finish(why, 0, {});
  }
  for (auto& ch : channels_) {
    std::map<uint32_t, std::shared_ptr<Pending>> failed;
    {
      std::lock_guard<std::mutex> lock(ch->mu);
      failed.swap(ch->pending);
    }
    for (auto& [tag, p] : failed) p->Finish(why, 0, {});
  }
  // The loops end: each connection's reader sees its connection shut down (the number is
  // valid while ch->fd holds it: a reader closes it only after MarkDown cleared it).
  stop_.Stop();
  executor_.Stop();
  for (auto& ch : channels_) {
    std::lock_guard<std::mutex> lock(ch->mu);
    if (ch->fd >= 0) shutdown(ch->fd, SHUT_RDWR);
  }
}

void Peers::Send(const std::string& to, uint16_t type, Bytes body) {
  if (to == self_) {
    self_sends_queued_.fetch_add(1, std::memory_order_acq_rel);
    executor_.Post([this, type, body = std::move(body)] {
      struct Dispatched {  // also when the handler throws (the executor survives that)
        std::atomic<int>* queued;
        ~Dispatched() { queued->fetch_sub(1, std::memory_order_acq_rel); }
      } dispatched{&self_sends_queued_};
      Dispatch(type, self_, body, [this](uint16_t t, Bytes b) {
        if (push_) push_(t, b);
      });
    });
    return;
  }
  Channel* ch = Find(to);
  if (ch == nullptr) return;
  int fd;
  {
    std::lock_guard<std::mutex> lock(ch->mu);
    if (!ch->up) return;
    fd = ch->fd;
  }
  Status st = Write(ch, fd, type, 0, body);
  if (!st.ok()) MarkDown(ch, fd, st.message());
}

struct Peers::Cork::Held {
  Channel* ch;
  int fd;
  std::string frames;
};

namespace {
thread_local Peers::Cork* t_cork = nullptr;
}  // namespace

Peers::Cork::Cork(Peers* peers) : peers_(peers), active_(t_cork == nullptr) {
  if (active_) t_cork = this;
}

Peers::Cork::~Cork() {
  if (!active_) return;
  t_cork = nullptr;
  for (const auto& h : held_) peers_->WriteHeld(h->ch, h->fd, h->frames);
}

Status Peers::Write(Channel* ch, int fd, uint16_t type, uint32_t tag, const Bytes& body) {
  if (t_cork != nullptr && t_cork->peers_ == this) {
    Cork::Held* held = nullptr;
    for (auto& h : t_cork->held_) {
      if (h->ch == ch && h->fd == fd) held = h.get();
    }
    if (held == nullptr) {
      t_cork->held_.push_back(std::make_unique<Cork::Held>(Cork::Held{ch, fd, {}}));
      held = t_cork->held_.back().get();
    }
    FrameHeader h{peerproto::kMagic, peerproto::kVersion, type, static_cast<uint32_t>(body.size()), tag};
    held->frames.append(reinterpret_cast<const char*>(&h), sizeof(h));
    held->frames.append(reinterpret_cast<const char*>(body.data()), body.size());
    return Status::Ok();
  }
  std::lock_guard<std::mutex> wlock(ch->write_mu);
  return ch->wfd == fd ? WriteMsg(*ch->wconn, type, tag, body) : SystemError("connection closed");
}

void Peers::WriteHeld(Channel* ch, int fd, const std::string& frames) {
  Status st;
  {
    std::lock_guard<std::mutex> wlock(ch->write_mu);
    st = ch->wfd == fd ? ch->wconn->Write(frames.data(), frames.size(), Deadline::AfterMs(kWriteTimeoutMs))
                       : SystemError("connection closed");
  }
  if (!st.ok()) MarkDown(ch, fd, st.message());
}

void Peers::ServeIncoming(Conn conn_in, const PeerIdentity& peer) {
  auto conn = std::make_shared<Incoming>();
  conn->conn = std::move(conn_in);
  Conn& sock = conn->conn;
  const std::string remote = peer.Describe();
  TuneTcpSocket(sock.fd(), 3 * kSilenceMs);
  Frame frame;
  Status st = ReadMsg(sock, &frame, Deadline::AfterMs(kSilenceMs));
  objproto::PeerHello hello{};
  if (st.ok() && (frame.header.type != objproto::kPeerHello || !Decode(frame.payload, &hello))) {
    st = InvalidArgument("expected PeerHello, got type 0x%04x", frame.header.type);
  }
  Status verdict = st.ok() ? Status::Ok() : FromConduit(st, objproto::kInvalid);
  // Its versions (a daemon that predates negotiation names one) against ours.
  const VersionRange theirs{hello.version, hello.newest != 0 ? hello.newest : hello.version};
  uint32_t version = 0;
  if (verdict.ok() && !NegotiateVersion(versions_, theirs, &version)) {
    verdict = Err(objproto::kInvalid, "it speaks object protocol versions %s, this daemon %s (upgrade the older one)",
                  DescribeVersions(theirs).c_str(), DescribeVersions(versions_).c_str());
  }
  // Who the peer is was proven by the handshake; its hello must agree (under
  // --insecure-peers, the hello is all there is).
  const std::string from = peer.authenticated() ? peer.daemon : AddrFromWire(hello.from);
  if (verdict.ok() && peer.authenticated() && AddrFromWire(hello.from) != peer.daemon) {
    verdict = Err(objproto::kRefused, "daemon %s said hello as %s", peer.daemon.c_str(), AddrFromWire(hello.from).c_str());
  }
  if (verdict.ok() && std::find(all_.begin(), all_.end(), from) == all_.end()) {
    verdict = Err(objproto::kRefused, "daemon %s is not in this daemon's --object-peers", from.c_str());
  }
  // A dialer that predates negotiation reads the status alone; ours reads the version after it.
  const objproto::PeerHelloAccept accept{version, 0};
  (void)WriteMsg(sock, objproto::kPeerHelloReply, frame.header.tag,
                 verdict.ok() ? Encode(ToObjectWire(verdict), &accept, sizeof(accept)) : Encode(ToObjectWire(verdict)));
  if (!verdict.ok()) {
    CLOG_WARN("objects: control connection from %s refused: %s", remote.c_str(), verdict.message().c_str());
    return;
  }
  if (peer_up_) executor_.Post([this, from] { peer_up_(from); });
  struct ServingPeer {  // for Begin: this thread's calls to this daemon itself run inline
    bool was = t_serving_peer;
    ServingPeer() { t_serving_peer = true; }
    ~ServingPeer() { t_serving_peer = was; }
  } serving;
  for (;;) {
    Frame f;
    st = ReadMsg(sock, &f, Deadline::AfterMs(kSilenceMs));
    if (!st.ok()) break;
    const uint16_t type = f.header.type;
    const uint32_t tag = f.header.tag;
    if (type == objproto::kPing) {
      std::lock_guard<std::mutex> wlock(conn->write_mu);
      (void)WriteMsg(sock, objproto::kPong, tag, {});
      continue;
    }
    Dispatch(type, from, f.payload, [conn, tag](uint16_t t, Bytes b) {
      if (conn->closed.load()) return;
      std::lock_guard<std::mutex> wlock(conn->write_mu);
      if (!WriteMsg(conn->conn, t, tag, b).ok()) conn->closed.store(true);
    });
  }
  conn->closed.store(true);
  sock.Shutdown();
}

}  // namespace conduit::objects
