#include "objects/object_service.h"

#include <errno.h>
#include <string.h>

#include <chrono>
#include <optional>
#include <thread>

#include "common/detached_thread.h"
#include "common/frame.h"
#include "common/log.h"
#include "common/thread_guard.h"
#include "objects/program_session.h"
#include "objects/reducer.h"
#include "objects/wait.h"
#include "protocol/peer_protocol.h"
#include "protocol/shim_protocol.h"

namespace conduit::objects {
namespace {

constexpr int kPeekTimeoutMs = 10000;
// The longest a GoingAway may ask the others to keep a replaced daemon's locations.
constexpr uint32_t kMaxReplacementGraceMs = 60000;
constexpr int kResumePauseMs = 50;
constexpr int kRelocatePauseMs = 20;

}  // namespace

ObjectService::ObjectService(ObjectOptions options, const ProgramPolicy* policy)
    : options_(std::move(options)),
      policy_(policy),
      peers_(options_.self, options_.peers, options_.security, options_.peer_versions),
      shard_(&peers_, options_.store_copy_bytes),
      dir_(&peers_),
      store_(options_.memory_bytes, objproto::kInlineLimit,
             options_.quota_bytes > 0 ? options_.quota_bytes : options_.memory_bytes / 2, options_.quota_objects),
      pool_(options_.security) {
  reducer_ = std::make_unique<Reducer>(this);
}

ObjectService::~ObjectService() = default;

void ObjectService::Start() {
  LogSharedMemoryHugePages();
  shard_.Register();
  reducer_->Register();
  peers_.Handle(objproto::kDropCopy, [this](const std::string&, const Bytes& b, const ReplyFn& reply) {
    // Answered only when the sender asked (kDropAck, version 5): it waits for that answer
    // before it answers the Delete. A build speaking 4 at most (a test's earlier release)
    // does not answer, as that release did not.
    const bool asked = OnDropCopy(b);
    if (asked && options_.peer_versions.newest >= objproto::kDropAckPeerVersion) {
      reply(objproto::kDropCopyDone, Encode(ToObjectWire(Status::Ok())));
    }
  });
  peers_.Handle(objproto::kDirStoreCopy, [this](const std::string& from, const Bytes& b, const ReplyFn&) {
    OnStoreCopy(from, b);
  });
  peers_.Handle(objproto::kGoingAway, [this](const std::string& from, const Bytes& b, const ReplyFn& reply) {
    objproto::GoingAway g{};
    Status st = Status::Ok();
    if (!Decode(b, &g) || g.grace_ms > kMaxReplacementGraceMs) {
      st = Err(objproto::kInvalid, "malformed GoingAway from %s", from.c_str());
    } else {
      CLOG_INFO("objects: daemon %s is being replaced; its copies' locations are kept for %u ms", from.c_str(),
                g.grace_ms);
      peers_.NoteReplacing(from, static_cast<int>(g.grace_ms));
    }
    reply(objproto::kGoingAwayReply, Encode(ToObjectWire(st)));
  });
  peers_.OnPush([this](uint16_t type, const Bytes& body) { dir_.OnPush(type, body); });
  peers_.OnChange([this] { OnMembershipChange(); });
  peers_.OnPeerUp([this](const std::string& addr) { RepublishTo(addr); });
  store_.SetEvictionHooks(
      [this](const std::string& id) {
        // Our own copy counts once the directory has our Release (one-way, so it may lag a
        // just-finished fetch by a moment): ask a few times before calling it the only copy.
        for (int attempt = 0; attempt < 4; ++attempt) {
          uint32_t complete = 0;
          if (dir_.CountComplete(id, Deadline::AfterMs(2000), &complete).ok() && complete >= 2) return true;
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        return false;
      },
      [this](const std::string& id) {
        dir_.Unpublish(id);
        std::lock_guard<std::mutex> lock(fetch_mu_);
        published_to_.erase(id);
      });
  dir_.Start();
  {
    // Copies adopted from the daemon this one replaced are registered from the start.
    std::lock_guard<std::mutex> lock(republish_mu_);
    ring_changed_ = !store_.All().empty();
  }
  SpawnDetached("object republication", [this] { KeepRunning("object republication", [&] { RepublishLoop(); }); });
  peers_.Start();
  CLOG_INFO("objects: store of %llu bytes, %zu-byte blocks, %zu daemons in --object-peers; per uid at most %llu "
            "bytes in %llu objects; new objects readable by %s unless their creator says otherwise",
            static_cast<unsigned long long>(options_.memory_bytes), options_.block_bytes, peers_.all().size(),
            static_cast<unsigned long long>(options_.quota_bytes > 0 ? options_.quota_bytes : options_.memory_bytes / 2),
            static_cast<unsigned long long>(options_.quota_objects),
            options_.default_access == objproto::kAccessWorld   ? "everyone"
            : options_.default_access == objproto::kAccessGroup ? "their owner's group"
                                                                : "their owner only");
}

void ObjectService::ServeProgram(UniqueFd fd, const ProgramCredentials& creds) {
  ProgramSession session(this, std::move(fd), creds);
  session.Run();
}

void ObjectService::AdoptProgram(UniqueFd fd, const ProgramCredentials& creds, const std::string& state,
                                 std::vector<UniqueFd> /*fds: an object session holds none*/) {
  ProgramSession session(this, std::move(fd), creds);
  Status st = session.Restore(state);
  if (!st.ok()) {
    CLOG_WARN("objects: a program session handed over by the previous daemon is refused: %s", st.message().c_str());
    return;
  }
  session.Run();
}

void ObjectService::ServePeer(Conn conn, const PeerIdentity& peer) {
  FrameHeader h{};
  Status st = PeekFrameHeader(conn, peerproto::kMagic, peerproto::kVersion, &h, Deadline::AfterMs(kPeekTimeoutMs));
  if (!st.ok()) return;
  // Only daemons of this object store may fetch its objects (or join its control mesh).
  const bool member = !peer.authenticated() ||
                      std::find(options_.peers.begin(), options_.peers.end(), peer.daemon) != options_.peers.end() ||
                      peer.daemon == options_.self;
  if (!member) {
    CLOG_WARN("objects: connection from %s refused: that daemon is not in --object-peers", peer.Describe().c_str());
  } else if (h.type == objproto::kPeerHello) {
    peers_.ServeIncoming(std::move(conn), peer);
  } else if (h.type == objproto::kFetch) {
    ServeFetches(std::move(conn), &store_, options_.timeout_ms, peer.Describe(), &stats_);
  } else {
    CLOG_WARN("objects: connection from %s starts with message 0x%04x; closed", peer.Describe().c_str(), h.type);
  }
}

void ObjectService::NotePublished(const std::string& id) {
  std::lock_guard<std::mutex> lock(fetch_mu_);
  published_to_[id] = peers_.Owner(id);
}

Status ObjectService::CreateForPut(const std::string& id, uint64_t size, const uint8_t* inline_data,
                                      const Caller& caller, uint32_t access, ObjectRef* out) {
  CopyInfo info;
  CONDUIT_RETURN_IF_ERROR(OwnerFor(caller, access, options_.default_access, &info.owner));
  info.pinned = true;
  info.creator_writes = true;
  info.charge = !caller.is_operator;
  info.unlisted = true;  // until the directory accepts the id as this caller's new object
  ObjectRef obj;
  Status made = store_.Create(id, size, info, &obj);
  if (ObjectCodeOf(made) == objproto::kExists && DropStaleCopy(id)) made = store_.Create(id, size, info, &obj);
  CONDUIT_RETURN_IF_ERROR(made);
  Bytes inline_bytes;
  uint32_t flags = objproto::kPubCreate | objproto::kPubOrigin;
  if (size < objproto::kInlineLimit) {
    if (size > 0) memcpy(obj->data(), inline_data, size);
    obj->MarkComplete();
    inline_bytes.assign(obj->data(), obj->data() + size);
    flags |= objproto::kPubComplete;
  }
  Status st = dir_.Publish(id, size, flags, inline_bytes, info.owner, Deadline::AfterMs(options_.timeout_ms));
  if (!st.ok()) {
    store_.Remove(id, st, obj.get());
    return st;
  }
  store_.List(obj.get());
  NotePublished(id);
  *out = std::move(obj);
  return Status::Ok();
}

bool ObjectService::DropStaleCopy(const std::string& id) {
  // A cached copy of a deleted object stays until its DropCopy arrives, which may be after a
  // program here, told of the Delete, Puts the id anew. The directory decides: with no
  // complete copy listed, the object is gone and the copy here is stale. A shard of version 5
  // answers a Delete only once this daemon has dropped its copy (DropHolders), so under one
  // a complete copy here is a live object's: it is not asked (while the ring changes, it
  // could answer before the copies are listed again, and a valid copy would go).
  // (VersionOf is the version negotiated with the shard, this daemon's newest for itself.)
  if (peers_.VersionOf(peers_.Owner(id)) >= objproto::kDropAckPeerVersion) return false;
  ObjectRef cached = store_.Find(id);
  if (cached == nullptr || cached->pinned() || cached->internal() || !cached->complete()) return false;
  uint32_t complete = 0;
  if (!dir_.CountComplete(id, Deadline::AfterMs(options_.timeout_ms), &complete).ok() || complete != 0) return false;
  store_.Remove(id, Err(objproto::kNotFound, "object %s was deleted", Printable(id).c_str()), cached.get());
  return true;
}

Status ObjectService::FinishPut(const ObjectRef& obj) {
  // Sealed before anyone may read the last block: from here on no mapping or descriptor,
  // the creator's included, can change the bytes readers get.
  Status sealed = obj->Seal();
  if (!sealed.ok()) {
    AbortPut(obj, sealed.message());
    return sealed;
  }
  obj->MarkComplete();
  // Deleted while it was being written (the store marked it failed): published now, the
  // directory would list a copy this store no longer has.
  if (Status gone = obj->failure(); !gone.ok()) return gone;
  dir_.PublishAsync(obj->id(), obj->size(), objproto::kPubOrigin | objproto::kPubComplete, {}, obj->owner());
  return WithdrawIfGone(*obj);
}

Status ObjectService::WithdrawIfGone(const LocalObject& obj) {
  // Deleted (or lost) since the caller last checked, before it published: the withdrawal
  // follows the Publish on the same connection to the shard, so the directory ends without
  // this store's copy.
  Status gone = obj.failure();
  if (!gone.ok()) dir_.Unpublish(obj.id());
  return gone;
}

void ObjectService::PublishReduceTarget(const ObjectRef& obj, bool complete) {
  // Asynchronous: the id was reserved (kPubReserve) when the Reduce began, so no create
  // check is needed, and a reader's Acquire that overtakes this waits for it.
  if (!obj->failure().ok()) return;  // deleted while it was being reduced (see FinishPut)
  Bytes inline_bytes;
  if (complete && obj->size() < objproto::kInlineLimit) inline_bytes.assign(obj->data(), obj->data() + obj->size());
  dir_.PublishAsync(obj->id(), obj->size(), objproto::kPubOrigin | (complete ? objproto::kPubComplete : 0u),
                    inline_bytes, obj->owner());
  NotePublished(obj->id());
}

void ObjectService::AbandonReduceTarget(const std::string& id, const LocalObject* obj, const Status& why) {
  if (obj != nullptr) store_.Remove(id, why, obj);
  dir_.Unpublish(id);
  std::lock_guard<std::mutex> lock(fetch_mu_);
  published_to_.erase(id);
}

void ObjectService::AbortPut(const ObjectRef& obj, const std::string& why) {
  CLOG_WARN("objects: Put of %s abandoned at byte %llu of %llu: %s", Printable(obj->id()).c_str(),
            static_cast<unsigned long long>(obj->ready()), static_cast<unsigned long long>(obj->size()), why.c_str());
  store_.Remove(obj->id(), Err(objproto::kLost, "the Put of %s was abandoned before it finished (%s)",
                               Printable(obj->id()).c_str(), why.c_str()),
                obj.get());
  dir_.Unpublish(obj->id());
}

Status ObjectService::Locate(const std::string& id, const Caller& caller, Deadline deadline, bool fill_here,
                             Located* out) {
  for (;;) {
    Status st = LocateOnce(id, caller, deadline, fill_here, out);
    if (st.ok()) {
      // A copy already here, or another request's result, is checked here; a copy made for
      // this request was checked before it was made.
      const objproto::Owner owner = out->obj != nullptr ? out->obj->owner() : out->owner;
      if (!MayRead(caller, owner)) {
        *out = Located{};
        return ReadDenied(id, caller, owner);
      }
      return st;
    }
    if (!IsAborted(st)) return st;
    if (deadline.expired()) return Err(objproto::kTimeout, "object %s: %s", Printable(id).c_str(), st.message().c_str());
    std::this_thread::sleep_for(std::chrono::milliseconds(kRelocatePauseMs));
  }
}

Status ObjectService::LocateOnce(const std::string& id, const Caller& caller, Deadline deadline, bool fill_here,
                                 Located* out) {
  std::shared_ptr<PendingFetch> mine;
  {
    std::unique_lock<std::mutex> lock(fetch_mu_);
    for (;;) {
      ObjectRef obj = store_.FindForProgram(id);
      if (obj != nullptr && obj->failure().ok()) {
        out->obj = std::move(obj);
        return Status::Ok();
      }
      auto it = pending_.find(id);
      if (it == pending_.end()) break;
      // Another request is already locating this object here: share its outcome.
      auto p = it->second;
      if (!WaitUntil(fetch_cv_, lock, deadline, [&] { return p->done; })) {
        return Err(objproto::kTimeout, "object %s was not available in time", Printable(id).c_str());
      }
      if (p->status.ok() && p->result.is_inline) {
        *out = p->result;
        return Status::Ok();
      }
      // Another caller's refusal is not ours: ask again for ourselves.
      const Status& theirs = p->status;
      if (!theirs.ok() &&
          ((!IsDeadlineExceeded(theirs) && !IsAborted(theirs) && !IsPermissionDenied(theirs)) || deadline.expired())) {
        return p->status;
      }
    }
    mine = std::make_shared<PendingFetch>();
    pending_[id] = mine;
  }
  AcquireResult r;
  Status st = dir_.Acquire(id, "", "", deadline, &r);
  Located result;
  bool fetch_here = false;
  if (st.ok() && r.sender != peers_.self() && !MayRead(caller, r.owner)) {
    // No copy is made for a caller who may not read it; the sender handed out is freed.
    if (!r.is_inline) dir_.Release(id, r.sender, false);
    st = ReadDenied(id, caller, r.owner);
  } else if (st.ok() && r.sender == peers_.self()) {
    // Our own copy (a Put or Reduce here registered it after this Get asked).
    result.obj = store_.Find(id);
    if (result.obj == nullptr) st = Err(objproto::kRetry, "the copy of %s here vanished", Printable(id).c_str());
  } else if (st.ok() && r.is_inline) {
    result.is_inline = true;
    result.inline_data = std::move(r.inline_data);
    result.owner = r.owner;
  } else if (st.ok()) {
    CopyInfo info;  // a cached copy: evictable, charged to nobody
    info.owner = r.owner;
    st = store_.Create(id, r.size, info, &result.obj);
    if (!st.ok()) {
      dir_.Release(id, r.sender, false);
    } else {
      NotePublished(id);
      if (fill_here) {
        fetch_here = true;  // below, once the requests waiting on this one know the copy
      } else if (!FetchInBackground(result.obj, r.sender, 0, Status::Ok())) {
        // Nothing will fill the copy: it goes (unpublished), the sender is freed, the caller may retry.
        st = Err(objproto::kUnavailable, "daemon %s cannot start a thread to fetch %s now", peers_.self().c_str(),
                 Printable(id).c_str());
        store_.Remove(id, st, result.obj.get());
        result.obj.reset();
        dir_.Release(id, r.sender, false);
      }
    }
  }
  {
    std::lock_guard<std::mutex> lock(fetch_mu_);
    mine->done = true;
    mine->status = st;
    mine->result = result;
    pending_.erase(id);
    fetch_cv_.notify_all();
  }
  if (!st.ok()) return st;
  if (fetch_here) FetchLoop(result.obj, r.sender, 0, deadline, Status::Ok());
  *out = std::move(result);
  return Status::Ok();
}

bool ObjectService::FetchInBackground(const ObjectRef& obj, const std::string& sender, uint64_t offset,
                                      Status resume_after) {
  return StartDetached("object fetch", [this, obj, sender, offset, resume_after] {
    FetchLoop(obj, sender, offset, Deadline::Never(), resume_after);
  });
}

void ObjectService::FetchLoop(ObjectRef obj, std::string sender, uint64_t offset, Deadline stop_by,
                              Status resume_after) {
  const std::string& id = obj->id();
  const bool whole = offset == 0;  // a continuation's time is not the transfer's
  auto started = std::chrono::steady_clock::now();
  // Resuming is bounded: after a failure, copies that keep failing without delivering a
  // byte for the daemon's timeout (a location whose daemon answers but lost the object) end
  // the fetch, instead of a retry a second forever. The first failure always gets another
  // copy (a sender that froze took the whole timeout to fail).
  uint64_t progress_offset = 0;
  std::optional<std::chrono::steady_clock::time_point> no_progress_since;
  for (;;) {
    bool stopped = false;
    Status st = resume_after;
    resume_after = Status::Ok();
    if (st.ok()) {
      st = FetchInto(&pool_, sender, obj.get(), &offset, PipelineBlock(options_.block_bytes, obj->size()),
                     options_.timeout_ms, stop_by, &stopped);
    }
    if (st.ok() && obj->failure().ok()) {
      obj->MarkComplete();
      dir_.Release(id, sender, true);
      stats_.received += 1;
      double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      if (whole) stats_.NoteTransfer(obj->size(), secs);
      return;
    }
    if (!obj->failure().ok()) {  // deleted or lost meanwhile
      dir_.Release(id, sender, false);
      return;
    }
    if (!stop_by.is_never()) {
      // A caller's thread: it does not wait for a resume. The copy is finished in the
      // background, from the same sender when the caller's time ran out (the directory still
      // lists it as this copy's upstream), else by resuming as below.
      if (FetchInBackground(obj, sender, offset, stopped ? Status::Ok() : st)) return;
      Status why = Err(objproto::kUnavailable, "daemon %s cannot start a thread to go on fetching %s",
                          peers_.self().c_str(), Printable(id).c_str());
      store_.Remove(id, why, obj.get());
      dir_.Release(id, sender, false);
      return;
    }
    const auto now = std::chrono::steady_clock::now();
    if (!no_progress_since || offset > progress_offset) {
      progress_offset = offset;
      no_progress_since = now;
    } else if (now - *no_progress_since > std::chrono::milliseconds(options_.timeout_ms)) {
      Status why = Err(objproto::kLost, "object %s: no copy delivered a byte for %d ms (last: %s at byte %llu: %s)",
                          Printable(id).c_str(), options_.timeout_ms, sender.c_str(),
                          static_cast<unsigned long long>(offset), st.message().c_str());
      CLOG_WARN("objects: %s", why.message().c_str());
      store_.Remove(id, why, obj.get());
      dir_.Release(id, sender, false);
      return;
    }
    CLOG_WARN("objects: fetching %s from %s stopped at byte %llu of %llu (%s); resuming from another copy",
              Printable(id).c_str(), sender.c_str(), static_cast<unsigned long long>(offset),
              static_cast<unsigned long long>(obj->size()), st.message().c_str());
    if (!peers_.Pause(std::chrono::milliseconds(kResumePauseMs))) {  // the daemon is stopping
      store_.Remove(id, peers_.StopReason(), obj.get());
      dir_.Release(id, sender, false);
      return;
    }
    if (!obj->failure().ok()) {  // the directory dropped this copy while we paused
      dir_.Release(id, sender, false);
      return;
    }
    AcquireResult r;
    st = dir_.Acquire(id, sender, sender, Deadline::AfterMs(options_.timeout_ms), &r);
    if (st.ok() && !obj->failure().ok()) {
      // Dropped while we asked: the id may already name a new object (its creator re-ran
      // the Put). Our copy is gone, so we must not stay registered as a receiver of it,
      // or a later Get here would be sent to a copy that no longer exists.
      if (!r.is_inline) dir_.Release(id, r.sender, false);
      return;
    }
    if (st.ok() && !r.is_inline && r.size != obj->size()) st = Err(objproto::kInternal, "size changed");
    if (st.ok() && r.is_inline) {
      memcpy(obj->data(), r.inline_data.data(), std::min<size_t>(r.inline_data.size(), obj->size()));
      obj->MarkComplete();
      return;
    }
    if (!st.ok()) {
      Status why = Err(objproto::kLost, "object %s: transfer broke at byte %llu and no other copy could be had: %s",
                          Printable(id).c_str(), static_cast<unsigned long long>(offset), st.message().c_str());
      store_.Remove(id, why, obj.get());
      dir_.Release(id, sender, false);
      return;
    }
    sender = r.sender;
  }
}

Status ObjectService::Delete(const std::string& id, const Caller& caller, Deadline deadline) {
  // The copy here is checked too: its directory entry may be missing for a moment (a shard
  // that moved and is not re-published yet), and nothing may go on the directory's silence.
  ObjectRef local = store_.FindForProgram(id);
  if (local != nullptr && !MayDelete(caller, local->owner())) return DeleteDenied(id, caller.uid, local->owner());
  Status st = dir_.Delete(id, caller.uid, caller.is_operator, deadline);
  if (IsPermissionDenied(st)) return st;
  // Only the copy checked above: one made here since (another user's Put of the same id,
  // not yet refused or published) is not this caller's to remove; the directory's drop
  // messages reach the copies it lists.
  if (local != nullptr) {
    store_.Remove(id, Err(objproto::kNotFound, "object %s was deleted", Printable(id).c_str()), local.get());
    // A Put finishing here may have published this copy after the directory's Delete (and
    // before the Remove above, which its second check would have seen): withdrawn after
    // it on the same connection, the directory lists no copy this store no longer has.
    dir_.Unpublish(id);
  }
  std::lock_guard<std::mutex> lock(fetch_mu_);
  published_to_.erase(id);
  return st;
}

bool ObjectService::OnDropCopy(const Bytes& body) {
  objproto::DropCopy d{};
  std::string id;
  if (!DecodeDropCopy(body, &d, &id)) {
    CLOG_WARN("objects: a malformed DropCopy (%zu bytes) was ignored", body.size());
    return false;
  }
  Status why = d.reason == objproto::kDropLost
                      ? ObjectLost(id)
                      : Err(objproto::kNotFound, "object %s was deleted", Printable(id).c_str());
  const bool held = store_.Remove(id, why);
  bool listed = false;
  {
    std::lock_guard<std::mutex> lock(fetch_mu_);
    listed = published_to_.erase(id) > 0;
  }
  // The directory dropped this copy before it sent this, but a republication (RepublishLoop:
  // a changed ring, a replaced daemon) may have listed it again since: withdrawn after that
  // Publish on the same connection, the directory lists no copy this store no longer has
  // (else a Put of the id anywhere would be refused as existing).
  if (held && listed) dir_.Unpublish(id);
  return (d.flags & objproto::kDropAck) != 0;
}

void ObjectService::OnStoreCopy(const std::string& from, const Bytes& body) {
  objproto::StoreCopy c{};
  std::string id;
  if (!DecodeStoreCopy(body, &c, &id)) {
    CLOG_WARN("objects: daemon %s sent a malformed StoreCopy (%zu bytes); dropped", from.c_str(), body.size());
    return;
  }
  Status st;
  if (peers_.Owner(id) != from) {
    // Only the shard of the id (as this daemon sees the ring) lists copies of it; a ring
    // that is changing re-publishes whatever is kept.
    st = Err(objproto::kRetry, "daemon %s does not own the directory shard of %s here", from.c_str(),
             Printable(id).c_str());
  } else if (store_.FindForProgram(id) != nullptr) {
    return;  // a copy is here already, and listed
  } else if (store_.Find(id) != nullptr) {
    // Another program's Put of the id here, which the shard will refuse.
    st = Err(objproto::kExists, "a Put of %s is being made here", Printable(id).c_str());
  } else {
    CopyInfo info;  // a cached copy: evictable, charged to nobody
    info.owner = c.owner;
    info.from_shard = true;
    ObjectRef obj;
    st = store_.Create(id, c.size, info, &obj);
    if (st.ok()) {
      if (c.size > 0) memcpy(obj->data(), Tail<objproto::StoreCopy>(body), c.size);
      obj->MarkComplete();
      std::lock_guard<std::mutex> lock(fetch_mu_);
      published_to_[id] = from;
      return;
    }
  }
  // Not kept: the shard must not list this daemon as a holder.
  CLOG_DEBUG("objects: not keeping the copy of %s that %s handed over: %s", Printable(id).c_str(), from.c_str(),
             st.message().c_str());
  objproto::Location l{};
  l.id = c.id;
  l.where = AddrToWire(peers_.self());
  peers_.Send(from, objproto::kDirUnpublish, Encode(l));
}

void ObjectService::EndWait(WaitState& s, Status why) {
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.ended.ok()) s.ended = std::move(why);
  s.cv.notify_all();
}

void ObjectService::Stop(const Status& reason) {
  const Status why = Err(objproto::kUnavailable, "%s", reason.message().c_str());
  std::set<std::shared_ptr<WaitState>> waits;
  {
    std::lock_guard<std::mutex> lock(waits_mu_);
    stopped_ = why;
    waits = waits_;
  }
  // Calls to other daemons first (a directory lookup, an Acquire waiting for a Put): what
  // the requests below would wait on next fails at once too.
  peers_.FailCalls(why);
  reducer_->FailAll(why);
  for (const auto& s : waits) EndWait(*s, why);
  std::lock_guard<std::mutex> lock(republish_mu_);
  republish_stopped_ = true;
  republish_cv_.notify_all();
}

Status ObjectService::Wait(const std::vector<std::string>& ids, size_t num_ready, const Caller& caller,
                              Deadline deadline, std::vector<uint32_t>* ready) {
  auto s = std::make_shared<WaitState>();
  s->seen.assign(ids.size(), false);
  {
    std::lock_guard<std::mutex> lock(waits_mu_);
    if (!stopped_.ok()) return stopped_;
    waits_.insert(s);
  }
  auto mark = [s](uint32_t i) {
    std::lock_guard<std::mutex> lock(s->mu);
    if (s->seen[i]) return;
    s->seen[i] = true;
    s->order.push_back(i);
    s->cv.notify_all();
  };
  auto deny = [s](Status why) { EndWait(*s, std::move(why)); };
  std::vector<uint64_t> handles;
  for (uint32_t i = 0; i < ids.size(); ++i) {
    ObjectRef local = store_.FindForProgram(ids[i]);
    if (local != nullptr && !MayRead(caller, local->owner())) {
      deny(ReadDenied(ids[i], caller, local->owner()));
      break;
    }
    if (local != nullptr && local->complete()) mark(i);
    handles.push_back(dir_.Subscribe(ids[i], [mark, deny, i, caller, id = ids[i]](const objproto::DirEvent& ev,
                                                                                 const Bytes&) {
      if (!MayRead(caller, ev.owner)) {
        deny(ReadDenied(id, caller, ev.owner));
      } else if (ev.complete) {
        mark(i);
      }
    }));
  }
  bool enough;
  Status ended;
  {
    std::unique_lock<std::mutex> lock(s->mu);
    enough = WaitUntil(s->cv, lock, deadline, [&] { return s->order.size() >= num_ready || !s->ended.ok(); });
    *ready = s->order;
    ended = s->ended;
  }
  for (uint64_t h : handles) dir_.Unsubscribe(h);
  {
    std::lock_guard<std::mutex> lock(waits_mu_);
    waits_.erase(s);
  }
  if (!ended.ok()) {
    ready->clear();
    return ended;
  }
  if (!enough) {
    return Err(objproto::kTimeout, "only %zu of the %zu objects waited for were ready in time", ready->size(), num_ready);
  }
  return Status::Ok();
}

Status ObjectService::Reduce(const std::string& target, const std::vector<std::string>& sources, size_t num_objects,
                                uint32_t op, uint32_t dtype, const Caller& caller, uint32_t access, Deadline deadline,
                                std::vector<uint32_t>* used, uint32_t* degree, uint64_t* size) {
  objproto::Owner owner;
  CONDUIT_RETURN_IF_ERROR(OwnerFor(caller, access, options_.default_access, &owner));
  // The target's size is known only once a source arrives; a uid already at its object
  // limit is refused before anything is reserved.
  if (!caller.is_operator) CONDUIT_RETURN_IF_ERROR(store_.quotas().Check(caller.uid, 0, target));
  return reducer_->Run(target, sources, num_objects, op, dtype, caller, owner, deadline, used, degree, size);
}

void ObjectService::RepublishLoop() {
  for (;;) {
    std::set<std::string> forced;
    {
      std::unique_lock<std::mutex> lock(republish_mu_);
      republish_cv_.wait(lock, [this] { return ring_changed_ || republish_stopped_; });
      if (republish_stopped_) return;
      ring_changed_ = false;
      forced.swap(republish_to_);
    }
    for (const ObjectRef& obj : store_.All()) {
      if (obj->internal() || !obj->failure().ok()) continue;
      const std::string owner = peers_.Owner(obj->id());
      {
        std::lock_guard<std::mutex> lock(fetch_mu_);
        auto it = published_to_.find(obj->id());
        if (it == published_to_.end()) continue;                              // unregistered
        if (it->second == owner && forced.count(owner) == 0) continue;        // in place
      }
      uint32_t flags = objproto::kPubRepublish;
      if (obj->complete()) flags |= objproto::kPubComplete;
      if (obj->pinned()) flags |= objproto::kPubOrigin;
      Bytes inline_bytes;
      if (obj->complete() && obj->size() < objproto::kInlineLimit) inline_bytes.assign(obj->data(), obj->data() + obj->size());
      Status st = dir_.Publish(obj->id(), obj->size(), flags, inline_bytes, obj->owner(), Deadline::AfterMs(5000));
      if (!st.ok()) {
        CLOG_WARN("objects: could not re-register %s with its new directory shard: %s", Printable(obj->id()).c_str(),
                  st.message().c_str());
        continue;
      }
      if (!WithdrawIfGone(*obj).ok()) continue;  // dropped (DropCopy) since the check above
      std::lock_guard<std::mutex> lock(fetch_mu_);
      auto it = published_to_.find(obj->id());
      if (it != published_to_.end()) it->second = peers_.Owner(obj->id());
    }
  }
}

void ObjectService::AnnounceReplacement(int grace_ms) {
  objproto::GoingAway g{};
  g.grace_ms = static_cast<uint32_t>(grace_ms);
  std::vector<Peers::Outstanding> calls;
  for (const std::string& addr : peers_.Live()) {
    if (addr != peers_.self()) calls.push_back(peers_.Begin(addr, objproto::kGoingAway, Encode(g)));
  }
  const Deadline deadline = Deadline::AfterMs(1000);
  for (const Peers::Outstanding& call : calls) {
    Bytes reply;
    (void)peers_.Await(call, objproto::kGoingAwayReply, &reply, deadline);
  }
}

void ObjectService::RepublishTo(const std::string& addr) {
  std::lock_guard<std::mutex> lock(republish_mu_);
  republish_to_.insert(addr);
  ring_changed_ = true;
  republish_cv_.notify_all();
}

Status ObjectService::ExportCopies(std::vector<HandedCopy>* out) {
  {
    std::lock_guard<std::mutex> lock(fetch_mu_);
    if (!pending_.empty()) {
      return Err(objproto::kUnavailable, "%zu object fetch(es) are running here", pending_.size());
    }
  }
  for (const ObjectRef& obj : store_.All()) {
    // Copies in use are fine: programs' views move with their sessions, and a daemon
    // fetching one resumes from another copy when this process ends.
    if (!obj->complete() || obj->internal()) {
      return Err(objproto::kUnavailable, "object %s is being %s here", Printable(obj->id()).c_str(),
                 obj->internal() ? "reduced" : "written");
    }
    HandedCopy c;
    c.id = obj->id();
    c.size = obj->size();
    c.pinned = obj->pinned();
    c.charged = obj->charged();
    c.owner = obj->owner();
    if (obj->has_fd()) {
      obj->HandOver();
      if (Status dup = DupFd(obj->fd(), "an object memfd", &c.memfd); !dup.ok()) {
        return Err(objproto::kInternal, "%s", dup.message().c_str());
      }
    } else {
      c.bytes.assign(reinterpret_cast<const char*>(obj->data()), obj->size());
    }
    out->push_back(std::move(c));
  }
  return Status::Ok();
}

Status ObjectService::AdoptCopies(std::vector<HandedCopy> copies) {
  for (HandedCopy& c : copies) {
    CopyInfo info;
    info.pinned = c.pinned;
    info.owner = c.owner;
    info.charge = c.charged;
    ObjectRef obj;
    CONDUIT_RETURN_IF_ERROR(store_.Adopt(c.id, c.size, info, std::move(c.memfd), c.bytes, &obj));
    std::lock_guard<std::mutex> lock(fetch_mu_);
    published_to_[c.id] = "";  // registered with nobody yet: Start's republication does it
  }
  return Status::Ok();
}

void ObjectService::OnMembershipChange() {
  shard_.OnMembershipChange();
  dir_.OnMembershipChange();
  {
    std::lock_guard<std::mutex> lock(republish_mu_);
    ring_changed_ = true;
    republish_cv_.notify_all();
  }
  reducer_->OnMembershipChange();
}

ObjectMetrics ObjectService::Metrics() {
  ObjectMetrics m;
  m.live_daemons = peers_.Live().size();
  m.local_copies = store_.All().size();
  m.store_bytes = store_.used();
  m.store_limit = store_.limit();
  m.spare_bytes = store_.spare_bytes();
  m.spare_reused = store_.spare_reused();
  m.served = stats_.served.load();
  m.resumed = stats_.resumed.load();
  m.received = stats_.received.load();
  return m;
}

std::string ObjectService::StateJson() {
  std::string out = "{\"self\":\"" + peers_.self() + "\",\"live\":[";
  auto live = peers_.Live();
  for (size_t i = 0; i < live.size(); ++i) out += (i ? ",\"" : "\"") + live[i] + "\"";
  out += "],\"ring\":[";
  auto ring = peers_.RingMembers();
  for (size_t i = 0; i < ring.size(); ++i) out += (i ? ",\"" : "\"") + ring[i] + "\"";
  out += "],\"peers\":" + std::to_string(peers_.all().size()) + ",\"rtt_us\":" + std::to_string(peers_.rtt_us()) +
         ",\"transfers\":{\"served\":" + std::to_string(stats_.served.load()) +
         ",\"resumed\":" + std::to_string(stats_.resumed.load()) + ",\"received\":" +
         std::to_string(stats_.received.load()) + "}" + ",\"store\":{\"used\":" + std::to_string(store_.used()) + ",\"limit\":" + std::to_string(store_.limit()) +
         ",\"objects\":[";
  bool first = true;
  for (const ObjectRef& obj : store_.All()) {
    if (!first) out += ",";
    first = false;
    out += "{\"id\":\"" + Printable(obj->id()) + "\",\"size\":" + std::to_string(obj->size()) +
           ",\"ready\":" + std::to_string(obj->ready()) + ",\"complete\":" + (obj->complete() ? "true" : "false") +
           ",\"pinned\":" + (obj->pinned() ? "true" : "false") + ",\"internal\":" + (obj->internal() ? "true" : "false") +
           ",\"users\":" + std::to_string(obj->users()) + ",\"owner\":" + std::to_string(obj->owner().uid) +
           ",\"access\":\"" + AccessName(obj->owner().access) + "\"}";
  }
  out += "],\"quota\":" + store_.quotas().StateJson() + "},\"directory\":" + shard_.StateJson() +
         ",\"reduce\":" + reducer_->StateJson() + "}";
  return out;
}

}  // namespace conduit::objects
