#include "objects/reducer.h"

#include <algorithm>
#include <cstring>
#include <random>
#include <set>

#include "common/log.h"
#include "objects/reduce_tree.h"
#include "objects/reducer_state.h"
#include "objects/transfer.h"
#include "objects/wait.h"
#include "reduce/reduce.h"

namespace conduit::objects {
namespace {

constexpr double kDefaultBandwidthBps = 1.25e9;  // until a transfer was measured: 10 Gbit/s
constexpr int kMaxRestartsPerSlot = 8;

std::string Hex(uint64_t v) {
  char buf[24];
  snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

Reducer::Reducer(ReducerHost* host) : host_(host) {
  std::random_device rd;
  next_key_ = (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

Reducer::~Reducer() = default;

void Reducer::Register() {
  Peers& p = host_->peers();
  p.Handle(objproto::kNodeStart, [this](const std::string& f, const Bytes& b, const ReplyFn&) { OnNodeStart(f, b); });
  p.Handle(objproto::kNodeChild, [this](const std::string& f, const Bytes& b, const ReplyFn&) { OnNodeChild(f, b); });
  p.Handle(objproto::kNodeCancel, [this](const std::string& f, const Bytes& b, const ReplyFn&) { OnNodeCancel(f, b); });
  p.Handle(objproto::kNodeReport, [this](const std::string& f, const Bytes& b, const ReplyFn&) { OnReport(f, b); });
}

// ------------------------------------------------------------------ coordinator

Status Reducer::Run(const std::string& target, const std::vector<std::string>& sources, size_t num_objects,
                       uint32_t op, uint32_t dtype, const Caller& caller, const objproto::Owner& owner,
                       Deadline deadline, std::vector<uint32_t>* used, uint32_t* degree, uint64_t* size) {
  if (!ValidId(target)) return Err(objproto::kInvalid, "bad target id");
  if (sources.empty() || num_objects == 0 || num_objects > sources.size()) {
    return Err(objproto::kInvalid, "Reduce needs 1 <= num_objects (%zu) <= number of sources (%zu)", num_objects,
               sources.size());
  }
  if (op > objproto::kMin) return Err(objproto::kInvalid, "unknown reduce op %u (sum, prod, max, min)", op);
  if (!IsValidDataType(static_cast<int>(dtype))) return Err(objproto::kInvalid, "unknown data type %u", dtype);
  std::set<std::string> unique(sources.begin(), sources.end());
  if (unique.size() != sources.size()) return Err(objproto::kInvalid, "Reduce sources must be distinct");
  if (unique.count(target)) return Err(objproto::kInvalid, "the Reduce target cannot be one of its sources");

  auto j = std::make_shared<Job>();
  j->key = next_key_++;
  j->target = target;
  j->sources = sources;
  j->n = static_cast<int>(num_objects);
  j->op = op;
  j->dtype = dtype;
  j->deadline = deadline;
  j->caller = caller;
  j->target_info.pinned = true;
  j->target_info.owner = owner;
  j->target_info.charge = !caller.is_operator;
  j->src.resize(sources.size());
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_[j->key] = j;
  }
  // Small sources this daemon holds complete (its own programs' Puts, and the copies every
  // shard hands out: docs/object-protocol.md, DirStoreCopy) arrive at once, as a Get here
  // would find them: no subscription, so no round trip to their shards.
  std::vector<ObjectRef> held(sources.size());
  for (size_t i = 0; i < sources.size(); ++i) {
    ObjectRef local = host_->store().FindForProgram(sources[i]);
    if (local != nullptr && local->size() < objproto::kInlineLimit && local->complete() && local->failure().ok()) {
      held[i] = std::move(local);
    }
  }
  bool reduced_here = false;
  {
    std::lock_guard<std::mutex> lock(j->mu);
    for (size_t i = 0; i < sources.size() && !j->done; ++i) {
      const ObjectRef& h = held[i];
      if (h != nullptr) {
        OnArrival(*j, static_cast<int>(i), host_->peers().self(), h->size(), h->owner(),
                  Bytes(h->data(), h->data() + h->size()));
      }
    }
    reduced_here = j->done;
  }
  // The target's reservation and the subscriptions (asynchronous location queries) travel
  // at the same time, in one write per daemon.
  DirectoryClient::PendingPublish reservation;
  std::vector<uint64_t> subs;
  {
    Peers::Cork cork(&host_->peers());
    reservation = host_->directory().PublishBegin(target, 0, objproto::kPubCreate | objproto::kPubReserve, {}, owner);
    for (size_t i = 0; i < sources.size(); ++i) {
      if (held[i] != nullptr || reduced_here) continue;
      subs.push_back(host_->directory().Subscribe(
          sources[i], [this, j, i](const objproto::DirEvent& ev, const Bytes& inline_data) {
            std::string where = AddrFromWire(ev.where);
            if (ev.kind != objproto::kEvLocation || where.empty()) return;
            std::lock_guard<std::mutex> lock(j->mu);
            if (!j->done) OnArrival(*j, static_cast<int>(i), where, ev.size, ev.owner, inline_data);
          }));
    }
  }
  Status reserved =
      host_->directory().PublishFinish(reservation, Deadline::AfterMs(host_->options().timeout_ms));
  {
    std::unique_lock<std::mutex> lock(j->mu);
    if (!reserved.ok()) Finish(*j, reserved);
    for (;;) {
      // Wakes for the end, or to create the target once the size is known.
      if (!WaitUntil(j->cv, lock, deadline, [&] { return j->done || (j->have_tree && j->sink == nullptr); })) {
        int arrived = 0;
        for (auto& s : j->src) arrived += s.state != Job::kWaiting ? 1 : 0;
        Finish(*j, Err(objproto::kTimeout, "Reduce into %s: %d of the %d objects needed arrived and the tree did not "
                                           "finish in time",
                       Printable(target).c_str(), std::min(arrived, j->n), j->n));
      }
      if (j->done) break;
      lock.unlock();
      Status st = CreateTarget(*j);
      lock.lock();
      if (!st.ok()) Finish(*j, st);
    }
  }
  Status st;
  std::set<std::string> hosts;
  ObjectRef out;
  Bytes small_result;
  {
    std::lock_guard<std::mutex> lock(j->mu);
    st = j->result;
    hosts = j->hosts;
    *degree = static_cast<uint32_t>(j->small ? j->n : j->tree.degree);
    *size = j->size;
    for (int i : j->arrival) {
      if (j->src[i].state == Job::kAssigned) used->push_back(static_cast<uint32_t>(i));
    }
    if (j->sink) out = j->sink->out;
    small_result = std::move(j->small_result);
  }
  // Small sources may all arrive (and be reduced) before a failed reservation's answer.
  if (!reserved.ok()) st = reserved;
  if (st.ok() && out == nullptr) {  // reduced inline: the target is a small object
    st = host_->store().Create(target, small_result.size(), j->target_info, &out);
    if (st.ok()) {
      if (!small_result.empty()) memcpy(out->data(), small_result.data(), small_result.size());
    } else {
      out.reset();
    }
  }
  if (st.ok()) {
    out->MarkComplete();
    host_->PublishReduceTarget(out, /*complete=*/true);
  } else if (reserved.ok()) {
    host_->AbandonReduceTarget(target, out.get(), st);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.erase(j->key);
  }
  // Clean-ups travel after the program has its answer.
  host_->peers().Defer([this, subs = std::move(subs), hosts = std::move(hosts), key = j->key] {
    for (uint64_t h : subs) host_->directory().Unsubscribe(h);
    objproto::NodeCancel c{};
    c.key.value = key;
    c.key.coordinator = AddrToWire(host_->peers().self());
    c.slot = -1;
    for (const auto& h : hosts) host_->peers().Send(h, objproto::kNodeCancel, Encode(c));
  });
  if (!st.ok()) used->clear();
  return st;
}

Status Reducer::CreateTarget(Job& j) {
  // Creating may evict (asking other daemons), so it happens here, not under Job::mu.
  ObjectRef out;
  CONDUIT_RETURN_IF_ERROR(host_->store().Create(j.target, j.size, j.target_info, &out));
  host_->PublishReduceTarget(out, /*complete=*/false);
  auto sink = std::make_shared<Sink>();
  sink->out = out;
  std::lock_guard<std::mutex> lock(j.mu);
  sink->final = j.final;  // no sink generation runs yet: nothing to lock
  j.sink = sink;
  UpdateFinal(j);
  if (!j.done) StartSink(j);
  return Status::Ok();
}

void Reducer::ChooseDegree(Job& j) {
  double bw = host_->transfer_stats().bandwidth_Bps();
  const ObjectOptions& o = host_->options();
  if (o.bandwidth_Bps > 0) bw = o.bandwidth_Bps;
  if (bw <= 0) bw = kDefaultBandwidthBps;
  // Per-hop latency: half a round trip plus one pipeline block (a hop forwards a block only
  // once it has it).
  double lat = o.latency_us > 0 ? o.latency_us * 1e-6 : host_->peers().rtt_us() * 0.5e-6;
  lat += static_cast<double>(std::min<uint64_t>(PipelineBlock(o.block_bytes, j.size), j.size)) / bw;
  int d = ChooseReduceDegree(j.n, static_cast<double>(j.size), bw, lat);
  j.tree = BuildReduceTree(j.n, d);
  j.slot_src.assign(j.n, -1);
  j.slot_gen.assign(j.n, 0);
  j.slot_restarts.assign(j.n, 0);
  j.have_tree = true;
  CLOG_INFO("objects: Reduce into %s: %d of %zu objects of %llu bytes, tree degree %d (B=%.0f MB/s, L=%.0f us)",
            Printable(j.target).c_str(), j.n, j.sources.size(), static_cast<unsigned long long>(j.size), d, bw / 1e6,
            lat * 1e6);
}

void Reducer::OnArrival(Job& j, int src, const std::string& where, uint64_t size, const objproto::Owner& owner,
                        const Bytes& inline_data) {
  if (j.src[src].state != Job::kWaiting) return;
  if (!MayRead(j.caller, owner)) {
    Status denied = ReadDenied(j.sources[src], j.caller, owner);
    Finish(j, Err(objproto::kPermissionDenied, "Reduce into %s: %s", Printable(j.target).c_str(),
                  denied.message().c_str()));
    return;
  }
  if (!j.size_known) {
    size_t es = DataTypeSize(static_cast<ncclDataType_t>(j.dtype));
    if (size % es != 0) {
      Finish(j, Err(objproto::kInvalid, "source %s has %llu bytes, not a whole number of %zu-byte elements",
                    Printable(j.sources[src]).c_str(), static_cast<unsigned long long>(size), es));
      return;
    }
    j.size = size;
    j.size_known = true;
    j.small = size < objproto::kInlineLimit;
  } else if (size != j.size) {
    Finish(j, Err(objproto::kInvalid, "Reduce sources differ in size: %s has %llu bytes, others %llu",
                  Printable(j.sources[src]).c_str(), static_cast<unsigned long long>(size),
                  static_cast<unsigned long long>(j.size)));
    return;
  }
  j.src[src].state = Job::kArrived;
  j.src[src].where = where;
  j.arrival.push_back(src);
  if (j.small && inline_data.size() == size) {
    j.src[src].bytes = inline_data;
    if (static_cast<int>(j.arrival.size()) == j.n) ReduceInline(j);
    return;
  }
  if (j.small) {
    // A small object without its bytes (not expected: the directory keeps them): fall back
    // to the tree, which fetches every source.
    CLOG_WARN("objects: Reduce into %s: the directory sent no bytes for small object %s; using a reduce tree",
              Printable(j.target).c_str(), Printable(j.sources[src]).c_str());
    j.small = false;
  }
  if (j.have_tree) {
    j.spares.push_back(src);
  } else {
    UseTree(j);  // queues every source arrived so far, this one included
  }
  AssignSpares(j);
}

void Reducer::ReduceInline(Job& j) {
  // The first n arrivals, combined in arrival order.
  const auto type = static_cast<ncclDataType_t>(j.dtype);
  const size_t count = j.size / DataTypeSize(type);
  j.small_result = j.src[j.arrival[0]].bytes;
  for (int k = 0; k < j.n; ++k) {
    Job::Src& s = j.src[j.arrival[k]];
    if (k > 0) ReduceInto(j.small_result.data(), s.bytes.data(), count, type, static_cast<ncclRedOp_t>(j.op));
    s.state = Job::kAssigned;
  }
  Finish(j, Status::Ok());
}

void Reducer::UseTree(Job& j) {
  ChooseDegree(j);
  // Sources that arrived while the inline path was still hoped for queue up in order.
  for (int s : j.arrival) {
    if (j.src[s].state == Job::kArrived) j.spares.push_back(s);
  }
  j.cv.notify_all();  // Run's thread creates the target, then the sink starts
}

void Reducer::AssignSpares(Job& j) {
  const std::string& self = host_->peers().self();
  while (!j.spares.empty()) {
    // Slots are filled in the tree's in-order sequence, except that an object on this
    // (the coordinator's) host takes the root when it is free: then the sink runs the
    // root's task itself, writing its result straight into the target, instead of reading
    // it from another host over this host's already busy link.
    int s = j.spares.front();
    int slot = -1;
    if (j.slot_src[0] == -1 && j.src[s].where == self) slot = 0;
    for (size_t k = 0; slot == -1 && k < j.tree.fill_order.size(); ++k) {
      if (j.slot_src[j.tree.fill_order[k]] == -1) slot = j.tree.fill_order[k];
    }
    if (slot == -1) break;
    j.spares.pop_front();
    j.slot_src[slot] = s;
    j.src[s].state = Job::kAssigned;
    ++j.slot_gen[slot];
    StartSlot(j, slot);
    NotifyParent(j, slot);
  }
  UpdateFinal(j);
}

void Reducer::UpdateFinal(Job& j) {
  // Final: every source that has not failed is in the tree and the tree is full, so a
  // failure can no longer bring in another source (it fails the Reduce instead).
  if (j.final || !j.have_tree) return;
  int placed = 0, alive = 0;
  for (const auto& s : j.src) {
    placed += s.state == Job::kAssigned ? 1 : 0;
    alive += s.state != Job::kFailed ? 1 : 0;
  }
  if (placed != j.n || alive != j.n) return;
  j.final = true;
  if (j.sink == nullptr) return;
  std::lock_guard<std::mutex> lock(j.sink->mu);
  j.sink->final = true;
  j.sink->out->SetReady(j.sink->written);
}

std::string Reducer::StreamOf(const Job& j, int slot) const {
  if (j.tree.children[slot].empty()) return j.sources[j.slot_src[slot]];  // a leaf streams its object
  return std::string("\x01r") + Hex(j.key) + "/" + std::to_string(slot) + "/" + std::to_string(j.slot_gen[slot]);
}

objproto::ChildInfo Reducer::ChildInfoOf(const Job& j, int slot) const {
  objproto::ChildInfo c{};
  c.slot = -1;
  if (slot < 0 || j.slot_src[slot] == -1) return c;
  c.slot = slot;
  c.where = AddrToWire(j.src[j.slot_src[slot]].where);
  c.stream = IdToWire(StreamOf(j, slot));
  return c;
}

bool Reducer::RootHere(const Job& j) const {
  return j.slot_src[0] != -1 && j.src[j.slot_src[0]].where == host_->peers().self();
}

void Reducer::StartSlot(Job& j, int slot) {
  const auto& kids = j.tree.children[slot];
  if (kids.empty()) return;  // leaves need no task: the parent reads their object
  if (slot == 0 && RootHere(j)) return;  // the sink runs the root's task (StartSink)
  objproto::NodeStart s{};
  s.key.value = j.key;
  s.key.coordinator = AddrToWire(host_->peers().self());
  s.slot = slot;
  s.gen = j.slot_gen[slot];
  s.own = IdToWire(j.sources[j.slot_src[slot]]);
  s.output = IdToWire(StreamOf(j, slot));
  s.size = j.size;
  s.op = j.op;
  s.dtype = j.dtype;
  s.nchildren = static_cast<uint32_t>(kids.size());
  int left = j.deadline.PollTimeoutMs();
  s.timeout_ms = static_cast<uint32_t>(left < 0 ? host_->options().timeout_ms : std::max(left, 1));
  Bytes body = Encode(s);
  for (int c : kids) {
    objproto::ChildInfo ci = ChildInfoOf(j, c);
    const uint8_t* p = reinterpret_cast<const uint8_t*>(&ci);
    body.insert(body.end(), p, p + sizeof(ci));
  }
  const std::string& host = j.src[j.slot_src[slot]].where;
  j.hosts.insert(host);
  host_->peers().Send(host, objproto::kNodeStart, std::move(body));
}

void Reducer::StartSink(Job& j) {
  ++j.sink_gen;
  if (j.sink == nullptr) return;  // CreateTarget starts it
  {
    // From now on only this generation writes the target. It resumes after the bytes
    // already written unless a source was replaced (then nobody has read them: the
    // source set was not final).
    std::lock_guard<std::mutex> lock(j.sink->mu);
    j.sink->gen = j.sink_gen;
    if (j.sources_changed) j.sink->written = 0;
    j.sources_changed = false;
  }
  objproto::NodeStart s{};
  s.key.value = j.key;
  s.key.coordinator = AddrToWire(host_->peers().self());
  s.slot = -1;
  s.gen = j.sink_gen;
  s.output = IdToWire(j.target);
  s.size = j.size;
  s.op = j.op;
  s.dtype = j.dtype;
  int left = j.deadline.PollTimeoutMs();
  s.timeout_ms = static_cast<uint32_t>(left < 0 ? host_->options().timeout_ms : std::max(left, 1));
  // With the root's object here, this generation combines it with the root's children
  // into the target (no partial result for the root, no second pass over its bytes);
  // otherwise it copies the root's stream.
  j.sink_runs_root = RootHere(j);
  std::vector<int> kids{0};
  if (j.sink_runs_root) {
    s.own = IdToWire(j.sources[j.slot_src[0]]);
    kids = j.tree.children[0];
  }
  s.nchildren = static_cast<uint32_t>(kids.size());
  Bytes body = Encode(s);
  for (int c : kids) {
    objproto::ChildInfo ci = ChildInfoOf(j, c);
    const uint8_t* p = reinterpret_cast<const uint8_t*>(&ci);
    body.insert(body.end(), p, p + sizeof(ci));
  }
  j.hosts.insert(host_->peers().self());
  host_->peers().Send(host_->peers().self(), objproto::kNodeStart, std::move(body));
}

void Reducer::NotifyParent(Job& j, int slot) {
  int parent = j.tree.parent[slot];
  objproto::NodeChild m{};
  m.key.value = j.key;
  m.key.coordinator = AddrToWire(host_->peers().self());
  m.child = ChildInfoOf(j, slot);
  std::string host;
  if (parent < 0 && RootHere(j)) {
    // The root's object is here: the sink starts again, now running the root's task.
    if (j.sink != nullptr) {
      Cancel(j, host_->peers().self(), -1, j.sink_gen);
      StartSink(j);
    }
    return;
  }
  if (parent == 0 && RootHere(j)) {
    // A child of the root, which the sink runs (told when it starts, if it has not yet).
    if (j.sink == nullptr || !j.sink_runs_root) return;
    const auto& kids = j.tree.children[0];
    m.slot = -1;
    m.gen = j.sink_gen;
    m.index = static_cast<uint32_t>(std::find(kids.begin(), kids.end(), slot) - kids.begin());
    host = host_->peers().self();
  } else if (parent < 0) {
    m.slot = -1;
    m.gen = j.sink_gen;
    m.index = 0;
    host = host_->peers().self();
  } else {
    if (j.slot_src[parent] == -1) return;  // told when the parent starts
    const auto& kids = j.tree.children[parent];
    m.slot = parent;
    m.gen = j.slot_gen[parent];
    m.index = static_cast<uint32_t>(std::find(kids.begin(), kids.end(), slot) - kids.begin());
    host = j.src[j.slot_src[parent]].where;
  }
  host_->peers().Send(host, objproto::kNodeChild, Encode(m));
}

void Reducer::Cancel(Job& j, const std::string& host, int slot, uint32_t gen) {
  objproto::NodeCancel c{};
  c.key.value = j.key;
  c.key.coordinator = AddrToWire(host_->peers().self());
  c.slot = slot;
  c.gen = gen;
  host_->peers().Send(host, objproto::kNodeCancel, Encode(c));
}

void Reducer::FailSlot(Job& j, int slot, const std::string& why) {
  int s = j.slot_src[slot];
  if (s == -1) return;
  CLOG_WARN("objects: Reduce into %s: dropping %s from tree slot %d: %s", Printable(j.target).c_str(),
            Printable(j.sources[s]).c_str(), slot, why.c_str());
  j.src[s].state = Job::kFailed;
  if (!j.tree.children[slot].empty()) Cancel(j, j.src[s].where, slot, j.slot_gen[slot]);
  j.slot_src[slot] = -1;
  ++j.slot_gen[slot];
  int possible = 0;
  for (auto& x : j.src) possible += x.state != Job::kFailed ? 1 : 0;
  if (possible < j.n) {
    Finish(j, Err(objproto::kLost, "Reduce into %s needs %d objects but only %d of its %zu sources survive (%s)",
                  Printable(j.target).c_str(), j.n, possible, j.sources.size(), why.c_str()));
    return;
  }
  // Another source takes the slot: every partial result that included the failed object
  // is recomputed, and so is the target from its first byte. (Not final: nobody read it.)
  j.sources_changed = true;
  RestartPath(j, j.tree.parent[slot]);
  AssignSpares(j);
}

void Reducer::RestartPath(Job& j, int slot) {
  for (int a = slot; a >= 0; a = j.tree.parent[a]) {
    if (j.slot_src[a] == -1) continue;
    if (++j.slot_restarts[a] > kMaxRestartsPerSlot) {
      Finish(j, Err(objproto::kUnavailable, "Reduce into %s: tree slot %d failed %d times; giving up",
                    Printable(j.target).c_str(), a, kMaxRestartsPerSlot));
      return;
    }
    Cancel(j, j.src[j.slot_src[a]].where, a, j.slot_gen[a]);
    ++j.slot_gen[a];
    StartSlot(j, a);
  }
  Cancel(j, host_->peers().self(), -1, j.sink_gen);
  StartSink(j);
}

void Reducer::Finish(Job& j, Status st) {
  if (j.done) return;
  j.done = true;
  j.result = std::move(st);
  j.cv.notify_all();
}

void Reducer::OnReport(const std::string& from, const Bytes& body) {
  objproto::NodeReport r{};
  if (!Decode(body, &r)) return;
  std::shared_ptr<Job> j;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = jobs_.find(r.key.value);
    if (it == jobs_.end()) return;
    j = it->second;
  }
  std::lock_guard<std::mutex> lock(j->mu);
  if (j->done) return;
  // Only the daemon running the node reports on it: this one for the sink, the slot's
  // source's daemon for a slot (the generation check below drops a replaced node's words).
  const bool slot_known = r.slot >= 0 && r.slot < j->n && j->slot_src[r.slot] != -1;
  const std::string runner =
      r.slot == -1 ? host_->peers().self() : (slot_known ? j->src[j->slot_src[r.slot]].where : std::string());
  if (from != runner) {
    if (!runner.empty()) {
      CLOG_WARN("objects: daemon %s reported on reduce node %d, which runs on %s; ignored", from.c_str(), r.slot,
                runner.c_str());
    }
    return;
  }
  Status st = FromObjectWire(r.status);
  if (r.slot == -1) {
    if (r.gen != j->sink_gen) return;
    if (r.outcome == objproto::kNodeDone) {
      Finish(*j, Status::Ok());
    } else if (j->sink_runs_root) {
      // The sink ran the root's task: its own object or a child failed as the root's would.
      if (j->slot_src[0] != -1) OnNodeFailed(*j, 0, r.outcome, r.child, st);
    } else if (r.outcome == objproto::kNodeChildFailed) {
      const int root = 0;
      if (j->slot_src[root] == -1) return;  // emptied meanwhile: the refill restarts the sink
      if (!host_->peers().IsLive(j->src[j->slot_src[root]].where) || IsNotFound(st) ||
          IsDataLoss(st)) {
        FailSlot(*j, root, st.message());
      } else {
        RestartPath(*j, -1);
      }
    } else {
      Finish(*j, st);
    }
    return;
  }
  if (r.slot < 0 || r.slot >= j->n || r.gen != j->slot_gen[r.slot] || j->slot_src[r.slot] == -1) return;
  OnNodeFailed(*j, r.slot, r.outcome, r.child, st);
}

void Reducer::OnNodeFailed(Job& j, int slot, uint32_t outcome, uint32_t child, const Status& st) {
  if (outcome == objproto::kNodeOwnFailed) {
    if (IsResourceExhausted(st)) {
      Finish(j, st);
    } else {
      FailSlot(j, slot, st.message());
    }
  } else if (outcome == objproto::kNodeChildFailed) {
    const auto& kids = j.tree.children[slot];
    if (child >= kids.size()) return;
    int c = kids[child];
    if (j.slot_src[c] != -1 && (!host_->peers().IsLive(j.src[j.slot_src[c]].where) ||
                                IsNotFound(st) || IsDataLoss(st))) {
      FailSlot(j, c, st.message());
    } else {
      RestartPath(j, slot);
    }
  }
}

void Reducer::OnMembershipChange() {
  std::vector<std::shared_ptr<Job>> jobs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [k, j] : jobs_) jobs.push_back(j);
  }
  for (auto& j : jobs) {
    std::lock_guard<std::mutex> lock(j->mu);
    if (j->done || !j->have_tree) continue;
    for (int slot = 0; slot < j->n && !j->done; ++slot) {
      int s = j->slot_src[slot];
      if (s != -1 && !host_->peers().IsLive(j->src[s].where)) FailSlot(*j, slot, "its daemon " + j->src[s].where + " died");
    }
    // Arrived but unplaced objects on dead daemons can no longer take part.
    for (auto it = j->spares.begin(); it != j->spares.end();) {
      if (!host_->peers().IsLive(j->src[*it].where)) {
        j->src[*it].state = Job::kFailed;
        it = j->spares.erase(it);
      } else {
        ++it;
      }
    }
    if (!j->done) UpdateFinal(*j);
  }
  // Tasks for coordinators that died are abandoned.
  std::vector<std::shared_ptr<Task>> orphans;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = tasks_.begin(); it != tasks_.end();) {
      if (!host_->peers().IsLive(it->second->coord)) {
        orphans.push_back(it->second);
        it = tasks_.erase(it);
      } else {
        ++it;
      }
    }
  }
  CancelTasks(std::move(orphans));
}

void Reducer::FailAll(const Status& why) {
  std::vector<std::shared_ptr<Job>> jobs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [k, j] : jobs_) jobs.push_back(j);
  }
  for (auto& j : jobs) {
    std::lock_guard<std::mutex> lock(j->mu);
    Finish(*j, why);
  }
}

std::string Reducer::StateJson() {
  std::vector<std::shared_ptr<Job>> jobs;
  size_t ntasks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [k, j] : jobs_) jobs.push_back(j);
    ntasks = tasks_.size();
  }
  std::string out = "{\"tasks\":" + std::to_string(ntasks) + ",\"jobs\":[";
  for (size_t i = 0; i < jobs.size(); ++i) {
    std::lock_guard<std::mutex> lock(jobs[i]->mu);
    Job& j = *jobs[i];
    if (i) out += ",";
    int placed = 0;
    for (int s : j.slot_src) placed += s != -1 ? 1 : 0;
    uint64_t written = 0;
    if (j.sink) {
      std::lock_guard<std::mutex> slock(j.sink->mu);
      written = j.sink->written;
    }
    // written: target bytes the sink has produced; readable once "final" (see reducer.h).
    out += "{\"target\":\"" + Printable(j.target) + "\",\"n\":" + std::to_string(j.n) +
           ",\"degree\":" + std::to_string(j.have_tree ? j.tree.degree : 0) + ",\"placed\":" + std::to_string(placed) +
           ",\"size\":" + std::to_string(j.size) + ",\"written\":" + std::to_string(written) +
           ",\"final\":" + (j.final ? "true" : "false") + "}";
  }
  return out + "]}";
}

}  // namespace conduit::objects
