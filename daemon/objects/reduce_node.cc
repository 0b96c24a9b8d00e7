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

// What a task combines, a block at a time: its own object (none for a sink copying the
// root's stream) and its children's streams. RunTask and RunSink read and combine through
// it alike, in two blocks of memory whatever the number of children: a child's block is
// read into `scratch_` and folded into `acc_` before the next child's is read.
class TaskInputs {
 public:
  TaskInputs(ReducerHost* host, Reducer::Task* t, size_t block) : host_(host), t_(t), scratch_(block), acc_(block) {}
  ~TaskInputs() {
    kids_.clear();
    if (own_) own_->DropUser();
  }

  // Holds the task's own object for its reads: kLost when it is gone, kInvalid when it is
  // not of the reduce's size.
  Status HoldOwn() {
    ObjectRef own = host_->store().Find(t_->own);
    if (own != nullptr && own->size() != t_->size) {
      return Err(objproto::kInvalid, "object %s on daemon %s is not of the %llu bytes the reduce expects",
                 Printable(t_->own).c_str(), host_->peers().self().c_str(), static_cast<unsigned long long>(t_->size));
    }
    if (own == nullptr || !own->failure().ok()) {
      return Err(objproto::kLost, "object %s is no longer on daemon %s", Printable(t_->own).c_str(),
                 host_->peers().self().c_str());
    }
    own->AddUser();
    own_ = std::move(own);
    return Status::Ok();
  }

  // Reads the bytes [off, off + len) of every input (the own object's, waiting for them;
  // then each child's, children opening lazily, in order, where the first block read
  // starts: the first may be all there is yet) and folds all but the last two, in order,
  // so that the block's result is *a op *b (*b null: *a alone; see Finish). On failure
  // *outcome says whose (kNodeOwnFailed, or kNodeChildFailed and *child).
  Status ReadBlock(uint64_t off, size_t len, const uint8_t** a, const uint8_t** b, uint32_t* outcome,
                   uint32_t* child) {
    *a = *b = nullptr;
    if (own_) {
      uint64_t ready = 0;
      Status st = own_->WaitReady(off + len, Deadline::AfterMs(t_->timeout_ms), &ready);
      if (!st.ok()) {
        *outcome = objproto::kNodeOwnFailed;
        return st;
      }
      *a = own_->data() + off;
    }
    const size_t k = t_->children.size();
    for (size_t c = 0; c < k; ++c) {
      if (*b != nullptr) {  // scratch is read into next: what came before goes into acc_
        Reduce2(acc_.data(), *a, *b, len / ElementSize(), Type(), Op());
        *a = acc_.data();
        *b = nullptr;
      }
      Status st;
      if (kids_.size() == c) {
        kids_.push_back(std::make_unique<ChildReader>(host_, t_, c));
        st = kids_[c]->Open(off);
      }
      const uint8_t* src = nullptr;
      if (st.ok()) st = kids_[c]->Read(off, len, scratch_.data(), &src);
      if (!st.ok()) {
        *outcome = objproto::kNodeChildFailed;
        *child = static_cast<uint32_t>(c);
        return st;
      }
      if (*a != nullptr) {
        *b = src;
      } else if (src == scratch_.data() && c + 1 < k) {
        memcpy(acc_.data(), src, len);
        *a = acc_.data();
      } else {
        *a = src;
      }
    }
    return Status::Ok();
  }

  // dst = a op b (the last step of a block, in one pass), or a copy of a when b is null.
  void Finish(uint8_t* dst, const uint8_t* a, const uint8_t* b, size_t len) const {
    if (b != nullptr) {
      Reduce2(dst, a, b, len / ElementSize(), Type(), Op());
    } else if (a != dst) {
      memcpy(dst, a, len);
    }
  }

 private:
  ncclDataType_t Type() const { return static_cast<ncclDataType_t>(t_->dtype); }
  ncclRedOp_t Op() const { return static_cast<ncclRedOp_t>(t_->op); }
  size_t ElementSize() const { return DataTypeSize(Type()); }

  ReducerHost* host_;
  Reducer::Task* t_;
  ObjectRef own_;
  std::vector<std::unique_ptr<ChildReader>> kids_;
  Bytes scratch_, acc_;
};

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
  const size_t block = BlockFor(host_->options(), t->dtype, t->size);
  ObjectRef out;
  auto inputs = std::make_unique<TaskInputs>(host_, t.get(), std::min<uint64_t>(block, t->size));

  auto cancelled = [&] {
    std::lock_guard<std::mutex> lock(t->mu);
    return t->cancelled;
  };
  auto fail = [&](uint32_t outcome, uint32_t child, const Status& st) {
    bool was_cancelled = cancelled();
    inputs.reset();
    if (out) store.Remove(t->output, st, out.get());
    if (!was_cancelled) Report(*t, outcome, child, st);
  };

  Status st = inputs->HoldOwn();
  if (!st.ok()) return fail(objproto::kNodeOwnFailed, 0, st);
  CopyInfo info;  // a partial result: internal, charged to nobody, never served to programs
  info.internal = true;
  st = store.Create(t->output, t->size, info, &out);
  if (!st.ok()) {
    out.reset();
    return fail(objproto::kNodeOwnFailed, 0, st);
  }
  for (uint64_t off = 0; off < t->size;) {
    const size_t len = static_cast<size_t>(std::min<uint64_t>(block, t->size - off));
    uint32_t outcome = 0, child = 0;
    const uint8_t *a = nullptr, *b = nullptr;
    st = inputs->ReadBlock(off, len, &a, &b, &outcome, &child);
    if (!st.ok()) return fail(outcome, child, st);
    out->PrepareWrite(off, len);
    inputs->Finish(out->data() + off, a, b, len);
    off += len;
    out->SetReady(off);
    if (cancelled()) return fail(objproto::kNodeDone, 0, Err(objproto::kTimeout, "cancelled"));
  }
  out->MarkComplete();
}

void Reducer::RunSink(std::shared_ptr<Task> t) {
  Sink& sink = *t->sink;
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
  // root's children block by block, as RunTask does, its last step straight into the
  // target: no partial result for the root, no copy of it. Only the newest generation may
  // write the target, so that step is taken under the sink's lock, once every input's part
  // of the block has been read (a read may block; the step does not).
  auto inputs = std::make_unique<TaskInputs>(host_, t.get(), std::min<uint64_t>(block, t->size));
  Status st;
  if (!t->own.empty()) {
    st = inputs->HoldOwn();
    if (!st.ok()) {
      Report(*t, objproto::kNodeOwnFailed, 0, st);
      return;
    }
  }
  uint32_t outcome = 0, failed_child = 0;
  bool stale = false;
  while (off < t->size) {
    const size_t len = static_cast<size_t>(std::min<uint64_t>(block, t->size - off));
    const uint8_t *a = nullptr, *b = nullptr;
    st = inputs->ReadBlock(off, len, &a, &b, &outcome, &failed_child);
    if (!st.ok()) break;
    std::lock_guard<std::mutex> lock(sink.mu);
    if (sink.gen != t->gen) {
      stale = true;
      break;
    }
    sink.out->PrepareWrite(off, len);
    inputs->Finish(sink.out->data() + off, a, b, len);
    off += len;
    sink.written = off;
    // Readers see the block at once when it is final (see reducer.h).
    if (sink.final) sink.out->SetReady(off);
  }
  inputs.reset();
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
