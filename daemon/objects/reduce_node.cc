// The node side of the Reducer: tasks of tree slots on the hosts of their objects, and the
// coordinator's sink, which streams the root's result into the target.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "common/log.h"
#include "common/thread_guard.h"
#include "objects/reducer.h"
#include "objects/reducer_state.h"
#include "objects/wait.h"
#include "reduce/reduce.h"

namespace conduit::objects {
namespace {

std::string TaskName(const std::string& coord, uint64_t key, int slot, uint32_t gen) {
  char hex[24];
  snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(key));
  return coord + "/" + hex + "/" + std::to_string(slot) + "/" + std::to_string(gen);
}

// One child of a task (or the sink's root): a local copy read in place, or a remote one
// fetched pipelined; either may still be being produced.
class ChildReader {
 public:
  ChildReader(ReducerHost* host, Reducer::Task* t, size_t index) : host_(host), t_(t), index_(index) {}
  ~ChildReader() { Close(); }

  // Waits (bounded) for the child's slot to be filled, then opens its stream at `offset`.
  Status Open(uint64_t offset) {
    objproto::ChildInfo info{};
    {
      std::unique_lock<std::mutex> lock(t_->mu);
      // A child slot is filled when its object arrives; the job's deadline bounds this.
      if (!WaitUntil(t_->cv, lock, Deadline::AfterMs(t_->timeout_ms),
                     [&] { return t_->cancelled || t_->children[index_].slot >= 0; })) {
        return Err(objproto::kTimeout, "child %zu of reduce slot %d never arrived", index_, t_->slot);
      }
      if (t_->cancelled) return Err(objproto::kTimeout, "cancelled");
      info = t_->children[index_];
    }
    std::string where = AddrFromWire(info.where), stream;
    IdFromWire(info.stream, &stream);
    if (where == host_->peers().self()) {
      // An inner slot's partial result may not exist yet: its task starts asynchronously.
      LocalStore& store = host_->store();
      local_ = stream[0] == '\x01' ? store.FindOrWait(stream, Deadline::AfterMs(5000)) : store.Find(stream);
      if (local_ == nullptr) return Err(objproto::kNotFound, "no local copy of %s", Printable(stream).c_str());
      // The size the reduce was started with, as for a remote child: a copy of another size
      // (deleted and put again meanwhile) would be read past its end.
      if (local_->size() != t_->size) {
        const uint64_t has = local_->size();
        local_.reset();
        return Err(objproto::kInvalid, "%s has %llu bytes, the reduce expects %llu", Printable(stream).c_str(),
                   static_cast<unsigned long long>(has), static_cast<unsigned long long>(t_->size));
      }
      local_->AddUser();
      return Status::Ok();
    }
    remote_ = std::make_unique<FetchStream>(&host_->pool());
    {
      std::lock_guard<std::mutex> lock(t_->mu);
      if (t_->cancelled) return Err(objproto::kTimeout, "cancelled");
      t_->streams.push_back(remote_.get());
    }
    opened_ = std::chrono::steady_clock::now();
    from_ = offset;
    Status st = remote_->Open(where, stream, offset, t_->timeout_ms);
    if (st.ok() && remote_->size() != t_->size) {
      st = Err(objproto::kInvalid, "%s has %llu bytes, the reduce expects %llu", Printable(stream).c_str(),
               static_cast<unsigned long long>(remote_->size()), static_cast<unsigned long long>(t_->size));
    }
    return st;
  }

  // The bytes [off, off + len) (consecutive calls): in place, or read into scratch.
  Status Read(uint64_t off, size_t len, uint8_t* scratch, const uint8_t** src) {
    if (local_) {
      uint64_t ready = 0;
      *src = local_->data() + off;
      return local_->WaitReady(off + len, Deadline::AfterMs(t_->timeout_ms), &ready);
    }
    *src = scratch;
    Status st = remote_->Read(scratch, len);
    if (st.ok() && off + len == t_->size && from_ == 0) {
      // A whole stream: it measured the link (eq. 2.1's B).
      host_->transfer_stats().NoteTransfer(
          t_->size, std::chrono::duration<double>(std::chrono::steady_clock::now() - opened_).count());
    }
    return st;
  }

  void Close() {
    if (remote_) {
      {
        std::lock_guard<std::mutex> lock(t_->mu);
        auto& v = t_->streams;
        v.erase(std::remove(v.begin(), v.end(), remote_.get()), v.end());
      }
      remote_->Finish();
      remote_.reset();
    }
    if (local_) {
      local_->DropUser();
      local_.reset();
    }
  }

 private:
  ReducerHost* host_;
  Reducer::Task* t_;
  size_t index_;
  ObjectRef local_;
  std::unique_ptr<FetchStream> remote_;
  std::chrono::steady_clock::time_point opened_;
  uint64_t from_ = 0;
};

// The pipelining block of a reduce: whole elements.
size_t BlockFor(const ObjectOptions& o, uint32_t dtype, uint64_t size) {
  const size_t es = DataTypeSize(static_cast<ncclDataType_t>(dtype));
  return std::max(es, PipelineBlock(o.block_bytes, size) / es * es);
}

}  // namespace

void Reducer::OnNodeStart(const std::string& from, const Bytes& body) {
  objproto::NodeStart s{};
  auto t = std::make_shared<Task>();
  if (!DecodeNodeStart(body, &s, &t->own, &t->output, &t->children)) {
    CLOG_WARN("objects: malformed NodeStart from %s", from.c_str());
    return;
  }
  t->coord = AddrFromWire(s.key.coordinator);
  t->key = s.key;
  t->slot = s.slot;
  t->gen = s.gen;
  t->size = s.size;
  t->op = s.op;
  t->dtype = s.dtype;
  t->timeout_ms = static_cast<int>(std::min<uint32_t>(s.timeout_ms, static_cast<uint32_t>(host_->options().timeout_ms)));
  t->name = TaskName(t->coord, s.key.value, s.slot, s.gen);
  // A reduce's nodes are started, told and cancelled by its coordinator only: the daemon
  // the handshake proved, never one a message names.
  if (t->coord != from) {
    CLOG_WARN("objects: daemon %s started a reduce node for coordinator %s; refused", from.c_str(), t->coord.c_str());
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (t->slot == -1) {
      // The sink runs where its job is, started by this daemon itself: it writes the job's
      // target from one child of the target's size, or, running the root's task, from its
      // own object and the root's children.
      auto it = jobs_.find(s.key.value);
      if (from != host_->peers().self() || t->coord != host_->peers().self() || it == jobs_.end() ||
          (t->own.empty() && s.nchildren != 1)) {
        return;
      }
      std::lock_guard<std::mutex> jlock(it->second->mu);
      t->sink = it->second->sink;
      if (t->sink == nullptr) return;
    }
    tasks_[t->name] = t;
  }
  const bool started = t->sink ? StartDetached("reduce sink", [this, t] { RunSink(t); })
                                : StartDetached("reduce task", [this, t] { RunTask(t); });
  if (!started) {
    // The coordinator hears of it as of any failed node and schedules the reduce again.
    {
      std::lock_guard<std::mutex> lock(mu_);
      tasks_.erase(t->name);
    }
    Report(*t, objproto::kNodeOwnFailed, 0,
           Err(objproto::kUnavailable, "daemon %s cannot start a thread for a reduce node now",
               host_->peers().self().c_str()));
  }
}

void Reducer::OnNodeChild(const std::string& from, const Bytes& body) {
  objproto::NodeChild m{};
  if (!Decode(body, &m) || AddrFromWire(m.key.coordinator) != from) return;
  std::shared_ptr<Task> t;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = tasks_.find(TaskName(AddrFromWire(m.key.coordinator), m.key.value, m.slot, m.gen));
    if (it == tasks_.end()) return;
    t = it->second;
  }
  std::lock_guard<std::mutex> lock(t->mu);
  if (m.index < t->children.size()) t->children[m.index] = m.child;
  t->cv.notify_all();
}

void Reducer::OnNodeCancel(const std::string& from, const Bytes& body) {
  objproto::NodeCancel c{};
  if (!Decode(body, &c)) return;
  const std::string coord = AddrFromWire(c.key.coordinator);
  if (coord != from) return;  // a node is the coordinator's to cancel
  std::vector<std::shared_ptr<Task>> victims;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = tasks_.begin(); it != tasks_.end();) {
      const Task& t = *it->second;
      bool match = t.coord == coord && t.key.value == c.key.value &&
                   (c.slot == -1 && c.gen == 0 ? true : (t.slot == c.slot && t.gen == c.gen));
      if (match) {
        victims.push_back(it->second);
        it = tasks_.erase(it);
      } else {
        ++it;
      }
    }
  }
  CancelTasks(std::move(victims));
}

void Reducer::CancelTasks(std::vector<std::shared_ptr<Task>> victims) {
  for (auto& t : victims) {
    {
      std::lock_guard<std::mutex> lock(t->mu);
      t->cancelled = true;
      for (FetchStream* s : t->streams) s->Abort();
      t->cv.notify_all();
    }
    // A partial result goes (its readers fail and restart); the sink's target stays.
    if (t->sink == nullptr) host_->store().Remove(t->output, Err(objproto::kNotFound, "partial reduce result cancelled"));
  }
}

void Reducer::Report(const Task& t, uint32_t outcome, uint32_t child, const Status& st) {
  objproto::NodeReport r{};
  r.key = t.key;
  r.slot = t.slot;
  r.gen = t.gen;
  r.outcome = outcome;
  r.child = child;
  r.status = ToObjectWire(st);
  host_->peers().Send(t.coord, objproto::kNodeReport, Encode(r));
}


void Reducer::RunTask(std::shared_ptr<Task> t) {
  LocalStore& store = host_->store();
  const auto type = static_cast<ncclDataType_t>(t->dtype);
  const size_t es = DataTypeSize(type);
  const size_t block = BlockFor(host_->options(), t->dtype, t->size);
  const size_t k = t->children.size();
  ObjectRef own, out;
  std::vector<std::unique_ptr<ChildReader>> kids;
  Bytes scratch(std::min<uint64_t>(block, t->size));

  auto cancelled = [&] {
    std::lock_guard<std::mutex> lock(t->mu);
    return t->cancelled;
  };
  auto cleanup = [&] {
    kids.clear();
    if (own) own->DropUser();
  };
  auto fail = [&](uint32_t outcome, uint32_t child, const Status& st) {
    bool was_cancelled = cancelled();
    cleanup();
    if (out) store.Remove(t->output, st, out.get());
    if (!was_cancelled) Report(*t, outcome, child, st);
  };

  own = store.Find(t->own);
  if (own != nullptr && own->size() != t->size) {
    own.reset();
    return fail(objproto::kNodeOwnFailed, 0, Err(objproto::kInvalid, "object %s on daemon %s is not of the %llu bytes "
                                                 "the reduce expects", Printable(t->own).c_str(),
                                                 host_->peers().self().c_str(), static_cast<unsigned long long>(t->size)));
  }
  if (own == nullptr || !own->failure().ok()) {
    own.reset();
    return fail(objproto::kNodeOwnFailed, 0, Err(objproto::kLost, "object %s is no longer on daemon %s",
                                                 Printable(t->own).c_str(), host_->peers().self().c_str()));
  }
  own->AddUser();
  CopyInfo info;  // a partial result: internal, charged to nobody, never served to programs
  info.internal = true;
  Status st = store.Create(t->output, t->size, info, &out);
  if (!st.ok()) {
    out.reset();
    return fail(objproto::kNodeOwnFailed, 0, st);
  }
  for (uint64_t off = 0; off < t->size;) {
    const size_t len = static_cast<size_t>(std::min<uint64_t>(block, t->size - off));
    uint8_t* dst = out->data() + off;
    out->PrepareWrite(off, len);
    uint64_t ready = 0;
    st = own->WaitReady(off + len, Deadline::AfterMs(t->timeout_ms), &ready);
    if (!st.ok()) return fail(objproto::kNodeOwnFailed, 0, st);
    // The own block is combined with the first child's as it is written (Reduce2), not
    // copied first: one pass over the block fewer.
    if (k == 0) memcpy(dst, own->data() + off, len);
    for (size_t c = 0; c < k; ++c) {
      if (kids.size() == c) {  // children open lazily, in order: the first may be all there is yet
        kids.push_back(std::make_unique<ChildReader>(host_, t.get(), c));
        st = kids[c]->Open(0);
        if (!st.ok()) return fail(objproto::kNodeChildFailed, static_cast<uint32_t>(c), st);
      }
      const uint8_t* src = nullptr;
      st = kids[c]->Read(off, len, scratch.data(), &src);
      if (!st.ok()) return fail(objproto::kNodeChildFailed, static_cast<uint32_t>(c), st);
      if (c == 0) {
        Reduce2(dst, own->data() + off, src, len / es, type, static_cast<ncclRedOp_t>(t->op));
      } else {
        ReduceInto(dst, src, len / es, type, static_cast<ncclRedOp_t>(t->op));
      }
    }
    off += len;
    out->SetReady(off);
    if (cancelled()) return fail(objproto::kNodeDone, 0, Err(objproto::kTimeout, "cancelled"));
  }
  out->MarkComplete();
  cleanup();
}

void Reducer::RunSink(std::shared_ptr<Task> t) {
  Sink& sink = *t->sink;
  const auto type = static_cast<ncclDataType_t>(t->dtype);
  const size_t es = DataTypeSize(type);
  const size_t block = BlockFor(host_->options(), t->dtype, t->size);
  uint64_t off;
  bool fits;
  {
    std::lock_guard<std::mutex> lock(sink.mu);
    if (sink.gen != t->gen) return;  // already replaced by a newer generation
    fits = sink.out != nullptr && sink.out->size() == t->size;
    off = sink.written;
  }
  if (!fits) {  // never so from this daemon's own coordinator; nothing is written
    Report(*t, objproto::kNodeChildFailed, 0,
           Err(objproto::kInvalid, "%s asks for %llu bytes, not its target's size", t->name.c_str(),
               static_cast<unsigned long long>(t->size)));
    return;
  }
  // Running the root's task, the sink combines the root's own object (here) with the
  // root's children block by block, as RunTask does, straight into the target: no partial
  // result for the root and no second pass over its bytes. Only the newest generation may
  // write the target, so a block is combined under the sink's lock, once every child's
  // part of it has been read (a read may block; the combining does not).
  ObjectRef own;
  Status st;
  if (!t->own.empty()) {
    own = host_->store().Find(t->own);
    if (own == nullptr || own->size() != t->size || !own->failure().ok()) {
      own.reset();
      Report(*t, objproto::kNodeOwnFailed, 0,
             Err(objproto::kLost, "object %s is no longer on daemon %s with the %llu bytes the reduce expects",
                 Printable(t->own).c_str(), host_->peers().self().c_str(), static_cast<unsigned long long>(t->size)));
      return;
    }
    own->AddUser();
  }
  const size_t k = t->children.size();
  std::vector<std::unique_ptr<ChildReader>> kids;
  std::vector<Bytes> scratch(k, Bytes(std::min<uint64_t>(block, t->size)));
  std::vector<const uint8_t*> in(k);
  uint32_t outcome = objproto::kNodeChildFailed, failed_child = 0;
  bool stale = false;
  while (st.ok() && off < t->size && !stale) {
    const size_t len = static_cast<size_t>(std::min<uint64_t>(block, t->size - off));
    if (own) {
      uint64_t ready = 0;
      st = own->WaitReady(off + len, Deadline::AfterMs(t->timeout_ms), &ready);
      if (!st.ok()) {
        outcome = objproto::kNodeOwnFailed;
        break;
      }
    }
    for (size_t c = 0; c < k && st.ok(); ++c) {
      if (kids.size() == c) {  // children open lazily, in order, where this generation starts
        kids.push_back(std::make_unique<ChildReader>(host_, t.get(), c));
        st = kids[c]->Open(off);
      }
      if (st.ok()) st = kids[c]->Read(off, len, scratch[c].data(), &in[c]);
      if (!st.ok()) failed_child = static_cast<uint32_t>(c);
    }
    if (!st.ok()) break;
    std::lock_guard<std::mutex> lock(sink.mu);
    if (sink.gen != t->gen) {
      stale = true;
      break;
    }
    uint8_t* dst = sink.out->data() + off;
    sink.out->PrepareWrite(off, len);
    const auto op = static_cast<ncclRedOp_t>(t->op);
    if (own == nullptr) {
      memcpy(dst, in[0], len);  // the root's stream (k is 1)
    } else if (k == 0) {
      memcpy(dst, own->data() + off, len);  // one object: the root is a leaf
    } else {
      Reduce2(dst, own->data() + off, in[0], len / es, type, op);
      for (size_t c = 1; c < k; ++c) ReduceInto(dst, in[c], len / es, type, op);
    }
    off += len;
    sink.written = off;
    // Readers see the block at once when it is final (see reducer.h).
    if (sink.final) sink.out->SetReady(off);
  }
  kids.clear();
  if (own) own->DropUser();
  bool was_cancelled;
  {
    std::lock_guard<std::mutex> lock(t->mu);
    was_cancelled = t->cancelled;
  }
  if (stale || was_cancelled) return;
  if (st.ok()) {
    Report(*t, objproto::kNodeDone, 0, st);
  } else {
    Report(*t, outcome, failed_child, st);
  }
}

}  // namespace conduit::objects
