#include "objects/directory_client.h"

#include <chrono>
#include <thread>

#include "common/busy_poll.h"
#include "common/detached_thread.h"
#include "common/thread_guard.h"

namespace conduit::objects {
namespace {

constexpr int kRetryPauseMs = 20;
constexpr int kReplySlackMs = 3000;  // an owner answers a timed-out wait itself; this covers its silence

// A directory call is one round trip to the shard's daemon, on the path of a program's
// Put, Get or Reduce (a Reduce answers only once its target is reserved). Its caller spins
// for the answer for the budget of waits on peer daemons before it sleeps
// (common/busy_poll.h): the answer usually comes within it, and waking the caller would
// add a wake-up to every small call (measured: docs/benchmarks.md, "Directory answers
// without a wake-up").
int SpinMicros() { return PeerBusyPollMicros(); }

int RemainingMs(Deadline d) {
  int ms = d.PollTimeoutMs();
  return ms < 0 ? 24 * 3600 * 1000 : ms;
}

}  // namespace

DirectoryClient::DirectoryClient(Peers* peers) : peers_(peers) {}

void DirectoryClient::Start() {
  SpawnDetached("object resubscription", [this] { KeepRunning("object resubscription", [&] { ResubscribeLoop(); }); });
}

Status DirectoryClient::CallOwner(const std::string& id, uint16_t type, const Bytes& body, uint16_t reply_type,
                                     Bytes* reply, Deadline deadline) {
  for (;;) {
    const std::string owner = peers_->Owner(id);
    Deadline call_deadline = Deadline::AfterMs(RemainingMs(deadline) + kReplySlackMs);
    Status st = peers_->Call(owner, type, body, reply_type, reply, call_deadline, SpinMicros());
    objproto::Status ws{};
    if (st.ok()) {
      if (!Decode(*reply, &ws)) return Err(objproto::kInternal, "short reply 0x%04x from %s", reply_type, owner.c_str());
      st = FromObjectWire(ws);
    }
    // Unavailable or aborted: the shard moved or its owner died, and asking again finds
    // the new owner; but not once this daemon is shutting down (every call fails then).
    if (st.ok() || (!IsAborted(st) && !IsUnavailable(st)) || peers_->stopping()) return st;
    if (deadline.expired()) {
      return Err(objproto::kUnavailable, "directory of %s unreachable: %s", Printable(id).c_str(), st.message().c_str());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(kRetryPauseMs));
  }
}

Bytes DirectoryClient::PublishBody(const std::string& id, uint64_t size, uint32_t flags, const Bytes& inline_data,
                                   const objproto::Owner& owner) {
  objproto::Publish p{};
  p.id = IdToWire(id);
  p.where = AddrToWire(peers_->self());
  p.size = size;
  p.flags = flags;
  p.inline_bytes = static_cast<uint32_t>(inline_data.size());
  p.owner = owner;
  return Encode(p, inline_data.data(), inline_data.size());
}

Status DirectoryClient::Publish(const std::string& id, uint64_t size, uint32_t flags, const Bytes& inline_data,
                                   const objproto::Owner& owner, Deadline deadline) {
  Bytes reply;
  return CallOwner(id, objproto::kDirPublish, PublishBody(id, size, flags, inline_data, owner),
                   objproto::kDirPublishReply, &reply, deadline);
}

DirectoryClient::PendingPublish DirectoryClient::PublishBegin(const std::string& id, uint64_t size, uint32_t flags,
                                                              const Bytes& inline_data, const objproto::Owner& owner) {
  PendingPublish p;
  p.id = id;
  p.body = PublishBody(id, size, flags, inline_data, owner);
  p.call = peers_->Begin(peers_->Owner(id), objproto::kDirPublish, p.body);
  return p;
}

Status DirectoryClient::PublishFinish(PendingPublish& p, Deadline deadline) {
  Bytes reply;
  Status st = peers_->Await(p.call, objproto::kDirPublishReply, &reply, Deadline::AfterMs(RemainingMs(deadline) + kReplySlackMs),
                            SpinMicros());
  objproto::Status ws{};
  if (st.ok()) st = Decode(reply, &ws) ? FromObjectWire(ws) : Err(objproto::kInternal, "short Publish reply");
  if (!IsAborted(st) && !IsUnavailable(st)) return st;
  // The shard moved (or its owner died) meanwhile: the slow path, with retries.
  return CallOwner(p.id, objproto::kDirPublish, p.body, objproto::kDirPublishReply, &reply, deadline);
}

void DirectoryClient::PublishAsync(const std::string& id, uint64_t size, uint32_t flags, const Bytes& inline_data,
                                   const objproto::Owner& owner) {
  peers_->Send(peers_->Owner(id), objproto::kDirPublish, PublishBody(id, size, flags, inline_data, owner));
}

void DirectoryClient::Unpublish(const std::string& id) {
  objproto::Location l{};
  l.id = IdToWire(id);
  l.where = AddrToWire(peers_->self());
  peers_->Send(peers_->Owner(id), objproto::kDirUnpublish, Encode(l));
}

Status DirectoryClient::Acquire(const std::string& id, const std::string& prev_sender, const std::string& avoid,
                                   Deadline deadline, AcquireResult* out) {
  objproto::Acquire a{};
  a.id = IdToWire(id);
  a.requester = AddrToWire(peers_->self());
  a.prev_sender = AddrToWire(prev_sender);
  a.avoid = AddrToWire(avoid);
  for (;;) {
    a.timeout_ms = static_cast<uint32_t>(RemainingMs(deadline));
    Bytes reply;
    Status st = CallOwner(id, objproto::kDirAcquire, Encode(a), objproto::kDirAcquireReply, &reply, deadline);
    if (!st.ok()) return st;
    objproto::AcquireReply r{};
    if (!Decode(reply, &r) || TailSize<objproto::AcquireReply>(reply) != r.inline_bytes) {
      return Err(objproto::kInternal, "malformed Acquire reply for %s", Printable(id).c_str());
    }
    out->size = r.size;
    out->sender = AddrFromWire(r.sender);
    out->is_inline = out->sender.empty();
    out->owner = r.owner;
    out->inline_data.assign(Tail<objproto::AcquireReply>(reply), Tail<objproto::AcquireReply>(reply) + r.inline_bytes);
    return Status::Ok();
  }
}

void DirectoryClient::Release(const std::string& id, const std::string& sender, bool receiver_complete) {
  objproto::Release r{};
  r.id = IdToWire(id);
  r.sender = AddrToWire(sender);
  r.receiver = AddrToWire(peers_->self());
  r.receiver_complete = receiver_complete ? 1 : 0;
  peers_->Send(peers_->Owner(id), objproto::kDirRelease, Encode(r));
}

Status DirectoryClient::Delete(const std::string& id, uint32_t uid, bool as_operator, Deadline deadline) {
  objproto::DeleteRequest d{};
  d.id = IdToWire(id);
  d.uid = uid;
  d.flags = as_operator ? objproto::kDeleteAsOperator : 0u;
  Bytes reply;
  return CallOwner(id, objproto::kDirDelete, Encode(d), objproto::kDirDeleteReply, &reply, deadline);
}

Status DirectoryClient::CountComplete(const std::string& id, Deadline deadline, uint32_t* complete) {
  Bytes reply;
  CONDUIT_RETURN_IF_ERROR(CallOwner(id, objproto::kDirCount, Encode(IdToWire(id)), objproto::kDirCountReply, &reply, deadline));
  objproto::CountReply r{};
  Decode(reply, &r);
  *complete = r.complete;
  return Status::Ok();
}

uint64_t DirectoryClient::Subscribe(const std::string& id, EventFn fn) {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t h = next_handle_++;
  Watch& w = watches_[h];
  w.id = id;
  w.fn = std::move(fn);
  SendSubscribe(h, w);
  return h;
}

void DirectoryClient::SendSubscribe(uint64_t handle, Watch& w) {
  objproto::Subscribe s{};
  s.id = IdToWire(w.id);
  s.sub = handle;
  w.owner = peers_->Owner(w.id);
  peers_->Send(w.owner, objproto::kDirSubscribe, Encode(s));
}

void DirectoryClient::Unsubscribe(uint64_t handle) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = watches_.find(handle);
  if (it == watches_.end()) return;
  objproto::Subscribe s{};
  s.id = IdToWire(it->second.id);
  s.sub = handle;
  peers_->Send(it->second.owner, objproto::kDirUnsubscribe, Encode(s));
  watches_.erase(it);
}

void DirectoryClient::OnPush(uint16_t type, const Bytes& body) {
  if (type != objproto::kDirEvent) return;
  objproto::DirEvent ev{};
  if (!Decode(body, &ev) || TailSize<objproto::DirEvent>(body) != ev.inline_bytes) return;
  EventFn fn;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = watches_.find(ev.sub);
    if (it == watches_.end()) return;
    if (ev.kind == objproto::kEvMoved) {
      it->second.owner.clear();  // the resubscription thread sends it again
      return;
    }
    fn = it->second.fn;
  }
  fn(ev, ev.inline_bytes > 0 ? Bytes(Tail<objproto::DirEvent>(body), Tail<objproto::DirEvent>(body) + ev.inline_bytes)
                             : Bytes());
}

void DirectoryClient::OnMembershipChange() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [h, w] : watches_) {
    if (w.owner != peers_->Owner(w.id)) SendSubscribe(h, w);
  }
}

void DirectoryClient::ResubscribeLoop() {
  while (peers_->Pause(std::chrono::milliseconds(100))) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [h, w] : watches_) {
      if (w.owner.empty() || w.owner != peers_->Owner(w.id) || !peers_->IsLive(w.owner)) SendSubscribe(h, w);
    }
  }
}

}  // namespace conduit::objects
