#include "objects/directory.h"

#include <atomic>
#include <chrono>
#include <thread>

#include "common/detached_thread.h"
#include "common/log.h"
#include "common/thread_guard.h"
#include "objects/access.h"

namespace conduit::objects {
namespace {

constexpr int kSweepEveryMs = 50;
// How long an object must have had no complete or origin copy registered before it is
// declared lost. The directory is soft state: while daemons reconnect or one replaces
// itself (a live upgrade), a shard may drop a copy's location that comes back within a
// reconnect (200 ms) and a re-registration. Declaring the loss at once would fail every
// reader and drop every partial copy of an object that still exists; waiting as long as
// a silent daemon takes to be called dead (2 s) costs the readers of a truly lost object
// no more than that.
constexpr auto kLostConfirm = std::chrono::milliseconds(2000);
// Small objects are handed to every daemon (DirStoreCopy) only in a store of at most this
// many daemons: each Put then costs one small message per daemon, which a larger cluster
// would pay for objects most daemons never read.
constexpr size_t kMaxStoreCopyDaemons = 64;
// How long a Delete waits for a live holder's DropCopyDone (a holder answers as soon as its
// store has let the copy go, in microseconds): past this the holder is taken to be faulty.
constexpr int kDropAnswerMs = 5000;

void RunAll(std::vector<std::function<void()>>& actions) {
  for (auto& a : actions) a();
}

Bytes AcquireReplyBody(const Status& st, uint64_t size, const std::string& sender, const Bytes* inline_data,
                       const objproto::Owner& owner = {}) {
  objproto::AcquireReply r{};
  r.status = ToObjectWire(st);
  r.size = size;
  r.sender = AddrToWire(sender);
  r.owner = owner;
  if (inline_data != nullptr) {
    r.inline_bytes = static_cast<uint32_t>(inline_data->size());
    return Encode(r, inline_data->data(), inline_data->size());
  }
  return Encode(r);
}

Status Moved(const std::string& id) {
  return Err(objproto::kRetry, "directory shard of %s moved", Printable(id).c_str());
}

// A daemon speaks to the directory only for itself: the copy it names as its own, the
// daemon a transfer is for, must be the daemon the handshake proved it is (`from`).
Status NotItsOwn(const std::string& from, const char* what, const std::string& named) {
  return Err(objproto::kInvalid, "daemon %s %s daemon %s: a daemon may only speak for its own copies", from.c_str(),
             what, named.c_str());
}

}  // namespace

Status ObjectLost(const std::string& id) {
  return Err(objproto::kLost, "object %s is lost: every complete copy died", Printable(id).c_str());
}

DirectoryShard::DirectoryShard(Peers* peers, uint64_t store_copy_bytes)
    : peers_(peers), store_copy_bytes_(store_copy_bytes) {}

std::vector<std::string> DirectoryShard::StoreCopyTargets(const objproto::Publish& p, const std::string& where) const {
  // A Put's new small object: not a Reduce's result (measured: its readers are already
  // waiting at the shard when it appears, and the copies only cost CPU), not re-published
  // soft state (its holders have it already), not a partial copy.
  const uint32_t wanted = objproto::kPubCreate | objproto::kPubComplete | objproto::kPubOrigin;
  if ((p.flags & wanted) != wanted || (p.flags & (objproto::kPubRepublish | objproto::kPubReserve)) ||
      p.size > store_copy_bytes_ || p.size >= objproto::kInlineLimit || p.inline_bytes != p.size ||
      p.owner.access < objproto::kAccessOwner || p.owner.access > objproto::kAccessWorld) {
    return {};  // (a Put's owner always has its access resolved; a receiver refuses one without)
  }
  std::vector<std::string> live = peers_->Live();
  if (live.size() > kMaxStoreCopyDaemons) return {};
  std::vector<std::string> out;
  for (std::string& addr : live) {
    if (addr != where && peers_->VersionOf(addr) >= objproto::kStoreCopyPeerVersion) out.push_back(std::move(addr));
  }
  return out;
}

void DirectoryShard::Register() {
  using namespace std::placeholders;
  peers_->Handle(objproto::kDirPublish, [this](const std::string& f, const Bytes& b, const ReplyFn& r) { OnPublish(f, b, r); });
  peers_->Handle(objproto::kDirUnpublish, [this](const std::string& f, const Bytes& b, const ReplyFn&) { OnUnpublish(f, b); });
  peers_->Handle(objproto::kDirAcquire, [this](const std::string& f, const Bytes& b, const ReplyFn& r) { OnAcquire(f, b, r); });
  peers_->Handle(objproto::kDirRelease, [this](const std::string& f, const Bytes& b, const ReplyFn&) { OnRelease(f, b); });
  peers_->Handle(objproto::kDirSubscribe, [this](const std::string& f, const Bytes& b, const ReplyFn& r) { OnSubscribe(f, b, r); });
  peers_->Handle(objproto::kDirUnsubscribe, [this](const std::string& f, const Bytes& b, const ReplyFn&) { OnUnsubscribe(f, b); });
  peers_->Handle(objproto::kDirDelete, [this](const std::string&, const Bytes& b, const ReplyFn& r) { OnDelete(b, r); });
  peers_->Handle(objproto::kDirCount, [this](const std::string&, const Bytes& b, const ReplyFn& r) { OnCount(b, r); });
  SpawnDetached("object directory sweep", [this] { KeepRunning("object directory sweep", [&] { SweepLoop(); }); });
}

bool DirectoryShard::Owned(const std::string& id) const { return peers_->Owner(id) == peers_->self(); }

void DirectoryShard::OnPublish(const std::string& from, const Bytes& body, const ReplyFn& reply) {
  objproto::Publish p{};
  std::string id;
  auto answer = [&](const Status& st) { reply(objproto::kDirPublishReply, Encode(ToObjectWire(st))); };
  if (!Decode(body, &p) || !IdFromWire(p.id, &id) || TailSize<objproto::Publish>(body) != p.inline_bytes) {
    answer(Err(objproto::kInvalid, "malformed Publish from %s", from.c_str()));
    return;
  }
  if (!Owned(id)) {
    answer(Moved(id));
    return;
  }
  const std::string where = AddrFromWire(p.where);
  if (where != from) {
    answer(NotItsOwn(from, "published a copy on", where));
    return;
  }
  const std::vector<std::string> store_copy_to = StoreCopyTargets(p, where);
  Actions actions;
  Status st;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Entry& e = entries_[id];
    bool known = !e.locs.empty() || e.has_inline;
    const bool create = p.flags & objproto::kPubCreate;
    // A create the shard has already taken (its answer was lost, the creator asks again)
    // finds only the creator's copy and the copies handed out for it.
    bool others = false;
    for (const auto& [addr, loc] : e.locs) others = others || (addr != where && !loc.handed);
    if (create && (!e.reserved_by.empty() || (known && (others || e.locs.count(where) == 0)))) {
      st = Err(objproto::kExists, "object %s already exists%s (objects are immutable; Delete it first)",
               Printable(id).c_str(), e.reserved_by.empty() ? "" : " as the target of a running Reduce");
    } else if (p.flags & objproto::kPubReserve) {
      if (known) {
        st = Err(objproto::kExists, "object %s already exists (objects are immutable; Delete it first)",
                 Printable(id).c_str());
      } else {
        e.reserved_by = where;
        e.owner = p.owner;
      }
    } else if (!e.reserved_by.empty() && e.reserved_by != where) {
      st = Err(objproto::kExists, "object %s is the target of a running Reduce on %s", Printable(id).c_str(),
               e.reserved_by.c_str());
    } else if (known && e.size != p.size) {
      st = Err(objproto::kInvalid, "object %s is %llu bytes, not %llu", Printable(id).c_str(),
               static_cast<unsigned long long>(e.size), static_cast<unsigned long long>(p.size));
    } else {
      e.size = p.size;
      e.reserved_by.clear();  // the location itself keeps the id taken from now on
      // The creator's Publish names the owner; a re-published entry learns it from the
      // first copy to arrive (every copy carries the same owner).
      if ((create || e.owner.access == objproto::kAccessDefault) && p.owner.access != objproto::kAccessDefault) {
        e.owner = p.owner;
      }
      if (p.inline_bytes > 0 || (p.size == 0 && (p.flags & objproto::kPubComplete))) {
        e.has_inline = true;
        e.inline_data.assign(Tail<objproto::Publish>(body), Tail<objproto::Publish>(body) + p.inline_bytes);
      }
      Loc& loc = e.locs[where];
      bool was_complete = loc.complete;
      loc.complete = loc.complete || (p.flags & objproto::kPubComplete);
      loc.origin = loc.origin || (p.flags & objproto::kPubOrigin);
      if (loc.complete) loc.upstream.clear();
      if (loc.complete || loc.origin) {
        e.had_source = true;
        e.sources_gone_since.reset();  // a loss noted but not yet declared is off
      }
      if (!was_complete) Notify(id, e, where, loc.complete, &actions);
      ServeWaiters(id, e, &actions);
      if (e.has_inline) HandOutCopies(id, e, store_copy_to, &actions);
    }
  }
  answer(st);
  RunAll(actions);
}

void DirectoryShard::HandOutCopies(const std::string& id, Entry& e, const std::vector<std::string>& to,
                                   Actions* out) {
  objproto::StoreCopy c{};
  c.id = IdToWire(id);
  c.size = e.size;
  c.owner = e.owner;
  // Listed before the bytes leave, under the entry's lock: a Delete from now on sends its
  // DropCopy after them on the same connection, so no daemon keeps a deleted object.
  for (const std::string& addr : to) {
    if (e.locs.count(addr) != 0) continue;
    Loc& loc = e.locs[addr];
    loc.complete = true;
    loc.handed = true;
    out->push_back([this, addr, b = Encode(c, e.inline_data.data(), e.inline_data.size())]() mutable {
      peers_->Send(addr, objproto::kDirStoreCopy, std::move(b));
    });
  }
}

void DirectoryShard::OnUnpublish(const std::string& from, const Bytes& body) {
  objproto::Location l{};
  std::string id;
  if (!Decode(body, &l) || !IdFromWire(l.id, &id)) return;
  const std::string where = AddrFromWire(l.where);
  if (where != from) {
    CLOG_WARN("objects: %s", NotItsOwn(from, "withdrew the copy of", where).message().c_str());
    return;
  }
  Actions actions;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return;
    if (it->second.reserved_by == where) it->second.reserved_by.clear();
    it->second.locs.erase(where);
    FreeBusy(it->second, where);
    CheckLost(id, it->second, &actions);
    ServeWaiters(id, it->second, &actions);
  }
  RunAll(actions);
}

void DirectoryShard::FreeBusy(Entry& e, const std::string& receiver) {
  for (auto& [addr, loc] : e.locs) {
    if (loc.busy_with == receiver) loc.busy_with.clear();
  }
}

bool DirectoryShard::InChain(const Entry& e, const std::string& start, const std::string& requester) const {
  std::string cur = start;
  for (size_t hops = 0; hops <= e.locs.size(); ++hops) {
    if (cur == requester) return true;
    auto it = e.locs.find(cur);
    if (it == e.locs.end() || it->second.complete || it->second.upstream.empty()) return false;
    cur = it->second.upstream;
  }
  return true;  // a loop in the records: treat as a cycle, never hand it out
}

bool DirectoryShard::TryServe(const std::string& id, Entry& e, const Waiter& w, Actions* out) {
  if (e.has_inline) {
    out->push_back([reply = w.reply, size = e.size, data = e.inline_data, owner = e.owner] {
      reply(objproto::kDirAcquireReply, AcquireReplyBody(Status::Ok(), size, "", &data, owner));
    });
    return true;
  }
  if (e.locs.count(w.requester) != 0 && AddrFromWire(w.req.prev_sender).empty()) {
    // The requester registered a copy of its own (a Put or Reduce there began after its
    // Get asked): it reads that one.
    out->push_back([reply = w.reply, size = e.size, self = w.requester, owner = e.owner] {
      reply(objproto::kDirAcquireReply, AcquireReplyBody(Status::Ok(), size, self, nullptr, owner));
    });
    return true;
  }
  const std::string avoid = AddrFromWire(w.req.avoid);
  std::string best;
  int best_rank = -1;
  for (auto& [addr, loc] : e.locs) {
    if (addr == w.requester || !loc.busy_with.empty() || !peers_->IsLive(addr)) continue;
    if (InChain(e, addr, w.requester)) continue;
    int rank = (loc.complete ? 2 : 0) + (addr != avoid ? 1 : 0);
    if (rank > best_rank) {
      best_rank = rank;
      best = addr;
    }
  }
  if (best.empty()) return false;
  e.locs[best].busy_with = w.requester;
  Loc& mine = e.locs[w.requester];
  if (!mine.complete) mine.upstream = best;
  CLOG_DEBUG("objects: %s fetches %s from %s", w.requester.c_str(), Printable(id).c_str(), best.c_str());
  out->push_back([reply = w.reply, size = e.size, best, owner = e.owner] {
    reply(objproto::kDirAcquireReply, AcquireReplyBody(Status::Ok(), size, best, nullptr, owner));
  });
  // The receiver is a partial copy from now on: later receivers may fetch from it.
  Notify(id, e, w.requester, false, out);
  return true;
}

void DirectoryShard::ServeWaiters(const std::string& id, Entry& e, Actions* out) {
  for (size_t i = 0; i < e.waiters.size();) {
    if (TryServe(id, e, e.waiters[i], out)) {
      e.waiters.erase(e.waiters.begin() + static_cast<long>(i));
    } else {
      ++i;
    }
  }
}

Bytes DirectoryShard::EventBody(uint64_t sub, const std::string& id, const Entry& e, const std::string& where,
                                bool complete) {
  objproto::DirEvent ev{};
  ev.sub = sub;
  ev.id = IdToWire(id);
  ev.where = AddrToWire(where);
  ev.size = e.size;
  ev.kind = objproto::kEvLocation;
  ev.complete = complete ? 1 : 0;
  ev.owner = e.owner;
  if (!e.has_inline) return Encode(ev);
  ev.inline_bytes = static_cast<uint32_t>(e.inline_data.size());
  return Encode(ev, e.inline_data.data(), e.inline_data.size());
}

void DirectoryShard::Notify(const std::string& id, Entry& e, const std::string& where, bool complete, Actions* out) {
  for (const Sub& s : e.subs) {
    out->push_back([push = s.push, body = EventBody(s.sub, id, e, where, complete)] { push(objproto::kDirEvent, body); });
  }
}

void DirectoryShard::CheckLost(const std::string& id, Entry& e, Actions* out) {
  bool sources_gone = !e.has_inline && !e.locs.empty() && e.had_source;
  for (auto& [addr, loc] : e.locs) sources_gone = sources_gone && !loc.complete && !loc.origin;
  if (!sources_gone) {
    e.sources_gone_since.reset();
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  if (!e.sources_gone_since) {
    e.sources_gone_since = now;
    CLOG_INFO("objects: %s has no complete copy and no creator registered; lost unless one is registered "
              "again within %lld ms",
              Printable(id).c_str(), static_cast<long long>(kLostConfirm.count()));
  }
  if (now - *e.sources_gone_since < kLostConfirm) return;
  // Only partial copies remain and nothing can finish them: tell their holders.
  CLOG_WARN("objects: %s is lost: no complete copy and no creator survives (%zu partial copies dropped)",
            Printable(id).c_str(), e.locs.size());
  objproto::DropCopy d{};
  d.id = IdToWire(id);
  d.reason = objproto::kDropLost;
  for (auto& [addr, loc] : e.locs) {
    out->push_back([this, addr = addr, body = Encode(d)] { peers_->Send(addr, objproto::kDropCopy, body); });
  }
  // A holder asking for another copy to resume from (its sender died) is told now, not at
  // its Acquire's deadline: its fetch ends with the loss.
  const Status lost = ObjectLost(id);
  for (size_t i = 0; i < e.waiters.size();) {
    if (e.locs.count(e.waiters[i].requester) == 0) {
      ++i;
      continue;
    }
    out->push_back([reply = e.waiters[i].reply, lost] {
      reply(objproto::kDirAcquireReply, AcquireReplyBody(lost, 0, "", nullptr));
    });
    e.waiters.erase(e.waiters.begin() + static_cast<long>(i));
  }
  e.locs.clear();
  e.had_source = false;
  e.sources_gone_since.reset();
}

void DirectoryShard::OnAcquire(const std::string& from, const Bytes& body, const ReplyFn& reply) {
  Waiter w;
  std::string id;
  if (!Decode(body, &w.req) || !IdFromWire(w.req.id, &id)) {
    reply(objproto::kDirAcquireReply, AcquireReplyBody(Err(objproto::kInvalid, "malformed Acquire from %s", from.c_str()), 0, "", nullptr));
    return;
  }
  if (!Owned(id)) {
    reply(objproto::kDirAcquireReply, AcquireReplyBody(Moved(id), 0, "", nullptr));
    return;
  }
  w.requester = AddrFromWire(w.req.requester);
  if (w.requester != from) {
    reply(objproto::kDirAcquireReply, AcquireReplyBody(NotItsOwn(from, "asked for a copy for", w.requester), 0, "", nullptr));
    return;
  }
  w.reply = reply;
  w.deadline = Deadline::AfterMs(w.req.timeout_ms);
  const std::string prev = AddrFromWire(w.req.prev_sender);
  Actions actions;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Entry& e = entries_[id];
    if (!prev.empty()) {
      auto it = e.locs.find(prev);
      if (it != e.locs.end() && it->second.busy_with == w.requester) it->second.busy_with.clear();
    }
    if (!TryServe(id, e, w, &actions)) e.waiters.push_back(std::move(w));
    ServeWaiters(id, e, &actions);  // a freed previous sender may serve someone else
  }
  RunAll(actions);
}

void DirectoryShard::OnRelease(const std::string& from, const Bytes& body) {
  objproto::Release r{};
  std::string id;
  if (!Decode(body, &r) || !IdFromWire(r.id, &id)) return;
  const std::string sender = AddrFromWire(r.sender);
  const std::string receiver = AddrFromWire(r.receiver);
  if (receiver != from) {
    CLOG_WARN("objects: %s", NotItsOwn(from, "reported a transfer done for", receiver).message().c_str());
    return;
  }
  Actions actions;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return;
    Entry& e = it->second;
    auto s = e.locs.find(sender);
    if (s != e.locs.end() && s->second.busy_with == receiver) s->second.busy_with.clear();
    auto rl = e.locs.find(receiver);
    if (rl != e.locs.end()) {
      if (r.receiver_complete) {
        if (!rl->second.complete) {
          rl->second.complete = true;
          rl->second.upstream.clear();
          e.had_source = true;
          e.sources_gone_since.reset();
          Notify(id, e, receiver, true, &actions);
        }
      } else if (!rl->second.complete && !rl->second.origin) {
        e.locs.erase(rl);
        FreeBusy(e, receiver);
      }
    }
    CheckLost(id, e, &actions);
    ServeWaiters(id, e, &actions);
  }
  RunAll(actions);
}

void DirectoryShard::OnSubscribe(const std::string& from, const Bytes& body, const ReplyFn& reply) {
  objproto::Subscribe s{};
  std::string id;
  if (!Decode(body, &s) || !IdFromWire(s.id, &id)) return;
  Actions actions;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!Owned(id)) {
      objproto::DirEvent ev{};
      ev.sub = s.sub;
      ev.id = s.id;
      ev.kind = objproto::kEvMoved;
      actions.push_back([reply, body = Encode(ev)] { reply(objproto::kDirEvent, body); });
    } else {
      Entry& e = entries_[id];
      e.subs.push_back(Sub{from, s.sub, reply});
      // Tell the new subscriber what exists already: its best location.
      std::string where;
      bool complete = false;
      for (auto& [addr, loc] : e.locs) {
        if (where.empty() || (loc.complete && !complete)) {
          where = addr;
          complete = loc.complete;
        }
      }
      if (!where.empty()) {
        actions.push_back([reply, body = EventBody(s.sub, id, e, where, complete)] { reply(objproto::kDirEvent, body); });
      }
    }
  }
  RunAll(actions);
}

void DirectoryShard::OnUnsubscribe(const std::string& from, const Bytes& body) {
  objproto::Subscribe s{};
  std::string id;
  if (!Decode(body, &s) || !IdFromWire(s.id, &id)) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  auto& subs = it->second.subs;
  for (size_t i = 0; i < subs.size(); ++i) {
    if (subs[i].from == from && subs[i].sub == s.sub) {
      subs.erase(subs.begin() + static_cast<long>(i));
      break;
    }
  }
}

void DirectoryShard::OnDelete(const Bytes& body, const ReplyFn& reply) {
  objproto::DeleteRequest req{};
  std::string id;
  if (!Decode(body, &req) || !IdFromWire(req.id, &id)) {
    reply(objproto::kDirDeleteReply, Encode(ToObjectWire(Err(objproto::kInvalid, "malformed Delete"))));
    return;
  }
  if (!Owned(id)) {
    reply(objproto::kDirDeleteReply, Encode(ToObjectWire(Moved(id))));
    return;
  }
  Status st;
  std::vector<std::string> holders;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(id);
    const objproto::Owner owner = it == entries_.end() ? objproto::Owner{} : it->second.owner;
    if (owner.access != objproto::kAccessDefault && owner.uid != req.uid &&
        !(req.flags & objproto::kDeleteAsOperator)) {
      st = DeleteDenied(id, req.uid, owner);
    } else if (it != entries_.end()) {
      for (auto& [addr, loc] : it->second.locs) holders.push_back(addr);
      it->second.locs.clear();
      it->second.reserved_by.clear();
      it->second.has_inline = false;
      it->second.inline_data.clear();
      it->second.size = 0;
      it->second.owner = objproto::Owner{};
    }
  }
  DropHolders(id, req.id, holders, [reply, answer = Encode(ToObjectWire(st))] {
    reply(objproto::kDirDeleteReply, answer);
  });
}

void DirectoryShard::DropHolders(const std::string& id, const objproto::Id& wire_id,
                                 const std::vector<std::string>& holders, std::function<void()> then) {
  // The Delete is answered once every holder that speaks version 5 (this daemon included) has
  // dropped its copy: a program told of the Delete finds no copy of the old object anywhere,
  // and no DropCopy still on its way can remove the copy of a Put of the id made after it
  // (docs/object-protocol.md). Older holders get the one-way message before the answer. A
  // holder that goes silent is declared down within 2 s, which ends its call; one that stays
  // up but does not answer (a faulty daemon) is waited for kDropAnswerMs at most, and the
  // Delete is answered without it: the entry is gone, and a Delete must not hang on a holder.
  struct Waiting {
    std::atomic<size_t> left;
    std::function<void()> then;
  };
  auto waiting = std::make_shared<Waiting>();
  waiting->left.store(holders.size() + 1);
  waiting->then = std::move(then);
  auto one_done = [waiting] {
    if (waiting->left.fetch_sub(1) == 1) waiting->then();
  };
  for (const std::string& addr : holders) {
    objproto::DropCopy d{};
    d.id = wire_id;
    d.reason = objproto::kDropDeleted;
    if (peers_->VersionOf(addr) >= objproto::kDropAckPeerVersion) {
      d.flags = objproto::kDropAck;
      auto answered = [one_done, addr, shown = Printable(id)](const Status& st) {
        if (ObjectCodeOf(st) == objproto::kTimeout) {
          CLOG_WARN("objects: daemon %s did not confirm dropping its copy of deleted %s within %d ms; the Delete "
                    "is answered without it (that daemon may still serve the old bytes)",
                    addr.c_str(), shown.c_str(), kDropAnswerMs);
        }
        one_done();
      };
      peers_->Then(peers_->Begin(addr, objproto::kDropCopy, Encode(d)), answered, Deadline::AfterMs(kDropAnswerMs));
    } else {
      peers_->Send(addr, objproto::kDropCopy, Encode(d));
      one_done();
    }
  }
  one_done();
}

void DirectoryShard::OnCount(const Bytes& body, const ReplyFn& reply) {
  objproto::Id wid{};
  std::string id;
  objproto::CountReply r{};
  if (!Decode(body, &wid) || !IdFromWire(wid, &id)) {
    r.status = ToObjectWire(Err(objproto::kInvalid, "malformed Count"));
  } else if (!Owned(id)) {
    r.status = ToObjectWire(Moved(id));
  } else {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(id);
    if (it != entries_.end()) {
      for (auto& [addr, loc] : it->second.locs) {
        if (!peers_->IsLive(addr)) continue;
        (loc.complete ? r.complete : r.partial) += 1;
      }
    }
  }
  reply(objproto::kDirCountReply, Encode(r));
}

void DirectoryShard::OnMembershipChange() {
  Actions actions;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = entries_.begin(); it != entries_.end();) {
      const std::string& id = it->first;
      Entry& e = it->second;
      if (!Owned(id)) {
        for (Waiter& w : e.waiters) {
          actions.push_back([reply = w.reply, st = Moved(id)] {
            reply(objproto::kDirAcquireReply, AcquireReplyBody(st, 0, "", nullptr));
          });
        }
        for (Sub& s : e.subs) {
          objproto::DirEvent ev{};
          ev.sub = s.sub;
          ev.id = IdToWire(id);
          ev.kind = objproto::kEvMoved;
          actions.push_back([push = s.push, body = Encode(ev)] { push(objproto::kDirEvent, body); });
        }
        it = entries_.erase(it);
        continue;
      }
      if (!e.reserved_by.empty() && !peers_->IsLive(e.reserved_by)) e.reserved_by.clear();
      for (auto l = e.locs.begin(); l != e.locs.end();) {
        // A daemon being replaced (GoingAway) keeps its locations: the same copies are
        // behind the same address once the new process serves.
        if (!peers_->IsLive(l->first) && !peers_->Replacing(l->first)) {
          FreeBusy(e, l->first);
          l = e.locs.erase(l);
        } else {
          ++l;
        }
      }
      for (size_t i = 0; i < e.subs.size();) {
        if (!peers_->IsLive(e.subs[i].from)) {
          e.subs.erase(e.subs.begin() + static_cast<long>(i));
        } else {
          ++i;
        }
      }
      CheckLost(id, e, &actions);
      ServeWaiters(id, e, &actions);
      ++it;
    }
  }
  RunAll(actions);
}

void DirectoryShard::SweepLoop() {
  while (peers_->Pause(std::chrono::milliseconds(kSweepEveryMs))) {
    Actions actions;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto it = entries_.begin(); it != entries_.end();) {
        auto& ws = it->second.waiters;
        for (size_t i = 0; i < ws.size();) {
          if (ws[i].deadline.expired()) {
            Status st = Err(objproto::kTimeout, "object %s has no copy to fetch after %u ms (not created yet?)",
                               Printable(it->first).c_str(), ws[i].req.timeout_ms);
            actions.push_back([reply = ws[i].reply, st] {
              reply(objproto::kDirAcquireReply, AcquireReplyBody(st, 0, "", nullptr));
            });
            ws.erase(ws.begin() + static_cast<long>(i));
          } else {
            ++i;
          }
        }
        if (it->second.sources_gone_since) CheckLost(it->first, it->second, &actions);
        if (it->second.empty()) {
          it = entries_.erase(it);
        } else {
          ++it;
        }
      }
    }
    RunAll(actions);
  }
}

std::string DirectoryShard::StateJson() {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out = "{\"entries\":" + std::to_string(entries_.size()) + ",\"objects\":[";
  size_t shown = 0;
  for (auto& [id, e] : entries_) {
    if (shown++ == 100) break;
    if (shown > 1) out += ",";
    out += "{\"id\":\"" + Printable(id) + "\",\"size\":" + std::to_string(e.size) +
           ",\"inline\":" + (e.has_inline ? "true" : "false") + ",\"reserved_by\":\"" + e.reserved_by + "\"" + ",\"waiters\":" + std::to_string(e.waiters.size()) +
           ",\"subscribers\":" + std::to_string(e.subs.size()) +
           ",\"locations\":[";
    bool first = true;
    for (auto& [addr, loc] : e.locs) {
      if (!first) out += ",";
      first = false;
      out += "{\"at\":\"" + addr + "\",\"complete\":" + (loc.complete ? "true" : "false") +
             ",\"origin\":" + (loc.origin ? "true" : "false") + ",\"sending_to\":\"" + loc.busy_with +
             "\",\"fetching_from\":\"" + loc.upstream + "\",\"handed\":" + (loc.handed ? "true" : "false") + "}";
    }
    out += "],\"owner\":" + std::to_string(e.owner.uid) + ",\"access\":\"" + AccessName(e.owner.access) + "\"}";
  }
  return out + "]}";
}

}  // namespace conduit::objects
