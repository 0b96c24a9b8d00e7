#include "objects/reducer.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <random>
#include <set>
#include <thread>

#include "common/log.h"
#include "objects/object_service.h"
#include "objects/reduce_tree.h"
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

std::string TaskName(const std::string& coord, uint64_t key, int slot, uint32_t gen) {
  return coord + "/" + Hex(key) + "/" + std::to_string(slot) + "/" + std::to_string(gen);
}

}  // namespace

struct Reducer::Job {
  uint64_t key = 0;
  std::string target;
  std::vector<std::string> sources;
  int n = 0;
  uint32_t op = 0, dtype = 0;
  Deadline deadline = Deadline::Never();

  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  ObjStatus result;

  bool have_tree = false;
  ReduceTree tree;
  uint64_t size = 0;
  bool size_known = false;

  enum State { kWaiting, kArrived, kAssigned, kFailed };
  struct Src {
    State state = kWaiting;
    std::string where;
  };
  std::vector<Src> src;
  std::deque<int> spares;           // arrived, not placed (arrival order)
  std::vector<int> arrival;         // every source in the order it arrived
  std::vector<int> slot_src;        // -1: empty
  std::vector<uint32_t> slot_gen;
  std::vector<int> slot_restarts;
  uint32_t sink_gen = 0;
  std::string sink_output;
  std::set<std::string> hosts;      // daemons that ran tasks (cleanup)
};

struct Reducer::Task {
  std::string coord;
  objproto::ReduceKey key{};
  int slot = 0;
  uint32_t gen = 0;
  std::string name;
  std::string own, output;
  uint64_t size = 0;
  uint32_t op = 0, dtype = 0;
  int timeout_ms = 0;

  std::mutex mu;
  std::condition_variable cv;
  std::vector<objproto::ChildInfo> children;
  std::vector<FetchStream*> streams;
  bool cancelled = false;
};

Reducer::Reducer(ObjectService* service) : svc_(service) {
  std::random_device rd;
  next_key_ = (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

Reducer::~Reducer() = default;

void Reducer::Register() {
  Peers& p = svc_->peers();
  p.Handle(objproto::kNodeStart, [this](const std::string& f, const Bytes& b, const ReplyFn&) { OnNodeStart(f, b); });
  p.Handle(objproto::kNodeChild, [this](const std::string&, const Bytes& b, const ReplyFn&) { OnNodeChild(b); });
  p.Handle(objproto::kNodeCancel, [this](const std::string&, const Bytes& b, const ReplyFn&) { OnNodeCancel(b); });
  p.Handle(objproto::kNodeReport, [this](const std::string&, const Bytes& b, const ReplyFn&) { OnReport(b); });
}

void Reducer::NoteTransfer(uint64_t bytes, double secs) {
  if (bytes < (1u << 20) || secs <= 0) return;
  std::lock_guard<std::mutex> lock(stats_mu_);
  double bw = bytes / secs;
  bandwidth_Bps_ = bandwidth_Bps_ == 0 ? bw : 0.7 * bandwidth_Bps_ + 0.3 * bw;
}

// ------------------------------------------------------------------ coordinator

ObjStatus Reducer::Run(const std::string& target, const std::vector<std::string>& sources, size_t num_objects,
                       uint32_t op, uint32_t dtype, Deadline deadline, std::vector<uint32_t>* used, uint32_t* degree,
                       uint64_t* size) {
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
  j->src.resize(sources.size());
  j->sink_output = std::string("\x01t") + Hex(j->key);
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_[j->key] = j;
  }
  std::vector<uint64_t> subs;
  for (size_t i = 0; i < sources.size(); ++i) {
    subs.push_back(svc_->directory().Subscribe(sources[i], [this, j, i](const objproto::DirEvent& ev) {
      std::string where = AddrFromWire(ev.where);
      if (ev.kind != objproto::kEvLocation || where.empty()) return;
      std::lock_guard<std::mutex> lock(j->mu);
      if (!j->done) OnArrival(*j, static_cast<int>(i), where, ev.size);
    }));
  }
  {
    std::unique_lock<std::mutex> lock(j->mu);
    if (!WaitUntil(j->cv, lock, deadline, [&] { return j->done; })) {
      int arrived = 0;
      for (auto& s : j->src) arrived += s.state != Job::kWaiting ? 1 : 0;
      Finish(*j, Err(objproto::kTimeout, "Reduce into %s: %d of the %d objects needed arrived and the tree did not "
                                         "finish in time",
                     Printable(target).c_str(), std::min(arrived, j->n), j->n));
    }
  }
  for (uint64_t h : subs) svc_->directory().Unsubscribe(h);
  ObjStatus st;
  std::set<std::string> hosts;
  {
    std::lock_guard<std::mutex> lock(j->mu);
    st = j->result;
    hosts = j->hosts;
    *degree = static_cast<uint32_t>(j->tree.degree);
    *size = j->size;
    for (int i : j->arrival) {
      if (j->src[i].state == Job::kAssigned) used->push_back(static_cast<uint32_t>(i));
    }
  }
  if (st.ok()) {
    st = svc_->store().Rename(j->sink_output, target);
    if (st.ok()) {
      ObjectRef obj = svc_->store().Find(target);
      Bytes inline_bytes;
      if (obj->size() < objproto::kInlineLimit) inline_bytes.assign(obj->data(), obj->data() + obj->size());
      st = svc_->directory().Publish(target, obj->size(),
                                     objproto::kPubCreate | objproto::kPubOrigin | objproto::kPubComplete,
                                     inline_bytes, Deadline::AfterMs(svc_->options().timeout_ms));
      if (!st.ok()) svc_->store().Remove(target, st, obj.get());
    }
  }
  objproto::NodeCancel c{};
  c.key.value = j->key;
  c.key.coordinator = AddrToWire(svc_->peers().self());
  c.slot = -1;
  for (const auto& h : hosts) svc_->peers().Send(h, objproto::kNodeCancel, Encode(c));
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.erase(j->key);
  }
  if (!st.ok()) used->clear();
  return st;
}

void Reducer::ChooseDegree(Job& j) {
  double bw;
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    bw = bandwidth_Bps_;
  }
  const ObjectOptions& o = svc_->options();
  if (o.bandwidth_Bps > 0) bw = o.bandwidth_Bps;
  if (bw <= 0) bw = kDefaultBandwidthBps;
  // Per-hop latency: half a round trip plus one pipeline block (a hop forwards a block only
  // once it has it).
  double lat = o.latency_us > 0 ? o.latency_us * 1e-6 : svc_->peers().rtt_us() * 0.5e-6;
  lat += static_cast<double>(std::min<uint64_t>(o.block_bytes, j.size)) / bw;
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

void Reducer::OnArrival(Job& j, int src, const std::string& where, uint64_t size) {
  if (j.src[src].state != Job::kWaiting) return;
  if (!j.size_known) {
    size_t es = DataTypeSize(static_cast<ncclDataType_t>(j.dtype));
    if (size % es != 0) {
      Finish(j, Err(objproto::kInvalid, "source %s has %llu bytes, not a whole number of %zu-byte elements",
                    Printable(j.sources[src]).c_str(), static_cast<unsigned long long>(size), es));
      return;
    }
    j.size = size;
    j.size_known = true;
    ChooseDegree(j);
    StartSink(j);
  } else if (size != j.size) {
    Finish(j, Err(objproto::kInvalid, "Reduce sources differ in size: %s has %llu bytes, others %llu",
                  Printable(j.sources[src]).c_str(), static_cast<unsigned long long>(size),
                  static_cast<unsigned long long>(j.size)));
    return;
  }
  j.src[src].state = Job::kArrived;
  j.src[src].where = where;
  j.arrival.push_back(src);
  j.spares.push_back(src);
  AssignSpares(j);
}

void Reducer::AssignSpares(Job& j) {
  const std::string& self = svc_->peers().self();
  while (!j.spares.empty()) {
    // Slots are filled in the tree's in-order sequence, except that an object on this
    // (the coordinator's) host takes the root when it is free: then the sink reads the
    // root's result locally instead of over this host's already busy link.
    int s = j.spares.front();
    int slot = -1;
    if (j.slot_src[0] == -1 && j.src[s].where == self) slot = 0;
    for (size_t k = 0; slot == -1 && k < j.tree.fill_order.size(); ++k) {
      if (j.slot_src[j.tree.fill_order[k]] == -1) slot = j.tree.fill_order[k];
    }
    if (slot == -1) return;
    j.spares.pop_front();
    j.slot_src[slot] = s;
    j.src[s].state = Job::kAssigned;
    ++j.slot_gen[slot];
    StartSlot(j, slot);
    NotifyParent(j, slot);
  }
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

void Reducer::StartSlot(Job& j, int slot) {
  const auto& kids = j.tree.children[slot];
  if (kids.empty()) return;  // leaves need no task: the parent reads their object
  objproto::NodeStart s{};
  s.key.value = j.key;
  s.key.coordinator = AddrToWire(svc_->peers().self());
  s.slot = slot;
  s.gen = j.slot_gen[slot];
  s.own = IdToWire(j.sources[j.slot_src[slot]]);
  s.output = IdToWire(StreamOf(j, slot));
  s.size = j.size;
  s.op = j.op;
  s.dtype = j.dtype;
  s.nchildren = static_cast<uint32_t>(kids.size());
  int left = j.deadline.PollTimeoutMs();
  s.timeout_ms = static_cast<uint32_t>(left < 0 ? svc_->options().timeout_ms : std::max(left, 1));
  Bytes body = Encode(s);
  for (int c : kids) {
    objproto::ChildInfo ci = ChildInfoOf(j, c);
    const uint8_t* p = reinterpret_cast<const uint8_t*>(&ci);
    body.insert(body.end(), p, p + sizeof(ci));
  }
  const std::string& host = j.src[j.slot_src[slot]].where;
  j.hosts.insert(host);
  svc_->peers().Send(host, objproto::kNodeStart, std::move(body));
}

void Reducer::StartSink(Job& j) {
  ++j.sink_gen;
  objproto::NodeStart s{};
  s.key.value = j.key;
  s.key.coordinator = AddrToWire(svc_->peers().self());
  s.slot = -1;
  s.gen = j.sink_gen;
  s.output = IdToWire(j.sink_output);
  s.size = j.size;
  s.op = j.op;
  s.dtype = j.dtype;
  s.nchildren = 1;
  int left = j.deadline.PollTimeoutMs();
  s.timeout_ms = static_cast<uint32_t>(left < 0 ? svc_->options().timeout_ms : std::max(left, 1));
  objproto::ChildInfo root = ChildInfoOf(j, 0);
  j.hosts.insert(svc_->peers().self());
  svc_->peers().Send(svc_->peers().self(), objproto::kNodeStart, Encode(s, &root, sizeof(root)));
}

void Reducer::NotifyParent(Job& j, int slot) {
  int parent = j.tree.parent[slot];
  objproto::NodeChild m{};
  m.key.value = j.key;
  m.key.coordinator = AddrToWire(svc_->peers().self());
  m.child = ChildInfoOf(j, slot);
  std::string host;
  if (parent < 0) {
    m.slot = -1;
    m.gen = j.sink_gen;
    m.index = 0;
    host = svc_->peers().self();
  } else {
    if (j.slot_src[parent] == -1) return;  // told when the parent starts
    const auto& kids = j.tree.children[parent];
    m.slot = parent;
    m.gen = j.slot_gen[parent];
    m.index = static_cast<uint32_t>(std::find(kids.begin(), kids.end(), slot) - kids.begin());
    host = j.src[j.slot_src[parent]].where;
  }
  svc_->peers().Send(host, objproto::kNodeChild, Encode(m));
}

void Reducer::Cancel(Job& j, const std::string& host, int slot, uint32_t gen) {
  objproto::NodeCancel c{};
  c.key.value = j.key;
  c.key.coordinator = AddrToWire(svc_->peers().self());
  c.slot = slot;
  c.gen = gen;
  svc_->peers().Send(host, objproto::kNodeCancel, Encode(c));
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
  // Every partial result that included the failed object is recomputed.
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
  Cancel(j, svc_->peers().self(), -1, j.sink_gen);
  StartSink(j);
}

void Reducer::Finish(Job& j, ObjStatus st) {
  if (j.done) return;
  j.done = true;
  j.result = std::move(st);
  j.cv.notify_all();
}

void Reducer::OnReport(const Bytes& body) {
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
  ObjStatus st = FromWire(r.status);
  if (r.slot == -1) {
    if (r.gen != j->sink_gen) return;
    if (r.outcome == objproto::kNodeDone) {
      Finish(*j, ObjStatus::Ok());
    } else if (r.outcome == objproto::kNodeChildFailed) {
      int root = 0;
      if (!svc_->peers().IsLive(j->src[j->slot_src[root]].where) || st.code() == objproto::kNotFound ||
          st.code() == objproto::kLost) {
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
  if (r.outcome == objproto::kNodeOwnFailed) {
    if (st.code() == objproto::kOutOfMemory) {
      Finish(*j, st);
    } else {
      FailSlot(*j, r.slot, st.message());
    }
  } else if (r.outcome == objproto::kNodeChildFailed) {
    const auto& kids = j->tree.children[r.slot];
    if (r.child >= kids.size()) return;
    int c = kids[r.child];
    if (j->slot_src[c] != -1 && (!svc_->peers().IsLive(j->src[j->slot_src[c]].where) ||
                                 st.code() == objproto::kNotFound || st.code() == objproto::kLost)) {
      FailSlot(*j, c, st.message());
    } else {
      RestartPath(*j, r.slot);
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
      if (s != -1 && !svc_->peers().IsLive(j->src[s].where)) FailSlot(*j, slot, "its daemon " + j->src[s].where + " died");
    }
    // Arrived but unplaced objects on dead daemons can no longer take part.
    for (auto it = j->spares.begin(); it != j->spares.end();) {
      if (!svc_->peers().IsLive(j->src[*it].where)) {
        j->src[*it].state = Job::kFailed;
        it = j->spares.erase(it);
      } else {
        ++it;
      }
    }
  }
  // Tasks for coordinators that died are abandoned.
  std::vector<std::shared_ptr<Task>> orphans;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = tasks_.begin(); it != tasks_.end();) {
      if (!svc_->peers().IsLive(it->second->coord)) {
        orphans.push_back(it->second);
        it = tasks_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& t : orphans) {
    std::lock_guard<std::mutex> lock(t->mu);
    t->cancelled = true;
    for (FetchStream* s : t->streams) s->Abort();
    t->cv.notify_all();
    svc_->store().Remove(t->output, Err(objproto::kNotFound, "reduce cancelled"));
  }
}

// ------------------------------------------------------------------ node side

void Reducer::OnNodeStart(const std::string& from, const Bytes& body) {
  objproto::NodeStart s{};
  auto t = std::make_shared<Task>();
  if (!Decode(body, &s) || s.nchildren > 1024 ||
      TailSize<objproto::NodeStart>(body) != s.nchildren * sizeof(objproto::ChildInfo) ||
      !IdFromWire(s.output, &t->output) || !IsValidDataType(static_cast<int>(s.dtype))) {
    CLOG_WARN("objects: malformed NodeStart from %s", from.c_str());
    return;
  }
  IdFromWire(s.own, &t->own);  // empty for the sink
  t->coord = AddrFromWire(s.key.coordinator);
  t->key = s.key;
  t->slot = s.slot;
  t->gen = s.gen;
  t->size = s.size;
  t->op = s.op;
  t->dtype = s.dtype;
  t->timeout_ms = static_cast<int>(std::min<uint32_t>(s.timeout_ms, static_cast<uint32_t>(svc_->options().timeout_ms)));
  t->children.resize(s.nchildren);
  memcpy(t->children.data(), Tail<objproto::NodeStart>(body), s.nchildren * sizeof(objproto::ChildInfo));
  t->name = TaskName(t->coord, s.key.value, s.slot, s.gen);
  {
    std::lock_guard<std::mutex> lock(mu_);
    tasks_[t->name] = t;
  }
  std::thread([this, t] { RunTask(t); }).detach();
}

void Reducer::OnNodeChild(const Bytes& body) {
  objproto::NodeChild m{};
  if (!Decode(body, &m)) return;
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

void Reducer::OnNodeCancel(const Bytes& body) {
  objproto::NodeCancel c{};
  if (!Decode(body, &c)) return;
  const std::string coord = AddrFromWire(c.key.coordinator);
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
  for (auto& t : victims) {
    {
      std::lock_guard<std::mutex> lock(t->mu);
      t->cancelled = true;
      for (FetchStream* s : t->streams) s->Abort();
      t->cv.notify_all();
    }
    svc_->store().Remove(t->output, Err(objproto::kNotFound, "partial reduce result cancelled"));
  }
}

void Reducer::Report(const Task& t, uint32_t outcome, uint32_t child, const ObjStatus& st) {
  objproto::NodeReport r{};
  r.key = t.key;
  r.slot = t.slot;
  r.gen = t.gen;
  r.outcome = outcome;
  r.child = child;
  r.status = ToWire(st);
  svc_->peers().Send(t.coord, objproto::kNodeReport, Encode(r));
}

void Reducer::RunTask(std::shared_ptr<Task> t) {
  LocalStore& store = svc_->store();
  const size_t es = DataTypeSize(static_cast<ncclDataType_t>(t->dtype));
  const size_t block = std::max(es, svc_->options().block_bytes / es * es);
  const size_t k = t->children.size();
  const std::string self = svc_->peers().self();
  ObjectRef own, out;
  std::vector<ObjectRef> local(k);
  std::vector<std::unique_ptr<FetchStream>> remote(k);
  std::vector<bool> opened(k, false);
  Bytes scratch(std::min<uint64_t>(block, t->size));

  auto cancelled = [&] {
    std::lock_guard<std::mutex> lock(t->mu);
    return t->cancelled;
  };
  auto cleanup = [&] {
    {
      std::lock_guard<std::mutex> lock(t->mu);
      t->streams.clear();
    }
    for (auto& r : remote) {
      if (r) r->Finish();
    }
    for (auto& l : local) {
      if (l) l->DropUser();
    }
    if (own) own->DropUser();
  };
  auto fail = [&](uint32_t outcome, uint32_t child, const ObjStatus& st) {
    bool was_cancelled = cancelled();
    cleanup();
    if (out) store.Remove(t->output, st, out.get());
    if (!was_cancelled) Report(*t, outcome, child, st);
  };

  if (!t->own.empty()) {
    own = store.Find(t->own);
    if (own == nullptr || !own->failure().ok()) {
      fail(objproto::kNodeOwnFailed, 0, Err(objproto::kLost, "object %s is no longer on daemon %s",
                                            Printable(t->own).c_str(), self.c_str()));
      return;
    }
    own->AddUser();
  }
  ObjStatus st = store.Create(t->output, t->size, false, /*internal=*/true, &out);
  if (!st.ok()) {
    out.reset();
    fail(objproto::kNodeOwnFailed, 0, st);
    return;
  }
  for (uint64_t off = 0; off < t->size;) {
    const size_t len = static_cast<size_t>(std::min<uint64_t>(block, t->size - off));
    uint8_t* dst = out->data() + off;
    uint64_t ready = 0;
    if (own) {
      st = own->WaitReady(off + len, Deadline::AfterMs(t->timeout_ms), &ready);
      if (!st.ok()) return fail(objproto::kNodeOwnFailed, 0, st);
      memcpy(dst, own->data() + off, len);
    }
    for (size_t c = 0; c < k; ++c) {
      if (!opened[c]) {
        objproto::ChildInfo info{};
        {
          std::unique_lock<std::mutex> lock(t->mu);
          // A child slot is filled when its object arrives; the job's deadline bounds this.
          if (!WaitUntil(t->cv, lock, Deadline::AfterMs(t->timeout_ms),
                         [&] { return t->cancelled || t->children[c].slot >= 0; }) ||
              t->cancelled) {
            lock.unlock();
            return fail(objproto::kNodeChildFailed, static_cast<uint32_t>(c),
                        Err(objproto::kTimeout, "child %zu of reduce slot %d never arrived", c, t->slot));
          }
          info = t->children[c];
        }
        std::string where = AddrFromWire(info.where), stream;
        IdFromWire(info.stream, &stream);
        if (where == self) {
          // An inner slot's partial result may not exist yet: its task starts asynchronously.
          local[c] = stream[0] == '\x01' ? store.FindOrWait(stream, Deadline::AfterMs(5000)) : store.Find(stream);
          if (local[c] == nullptr) {
            return fail(objproto::kNodeChildFailed, static_cast<uint32_t>(c),
                        Err(objproto::kNotFound, "no local copy of %s", Printable(stream).c_str()));
          }
          local[c]->AddUser();
        } else {
          remote[c] = std::make_unique<FetchStream>(&svc_->pool());
          {
            std::lock_guard<std::mutex> lock(t->mu);
            if (t->cancelled) return fail(objproto::kNodeChildFailed, static_cast<uint32_t>(c), Err(objproto::kTimeout, "cancelled"));
            t->streams.push_back(remote[c].get());
          }
          st = remote[c]->Open(where, stream, 0, t->timeout_ms);
          if (st.ok() && remote[c]->size() != t->size) {
            st = Err(objproto::kInvalid, "%s has %llu bytes, the reduce expects %llu", Printable(stream).c_str(),
                     static_cast<unsigned long long>(remote[c]->size()), static_cast<unsigned long long>(t->size));
          }
          if (!st.ok()) return fail(objproto::kNodeChildFailed, static_cast<uint32_t>(c), st);
        }
        opened[c] = true;
      }
      const uint8_t* src;
      if (local[c]) {
        st = local[c]->WaitReady(off + len, Deadline::AfterMs(t->timeout_ms), &ready);
        src = local[c]->data() + off;
      } else {
        st = remote[c]->Read(scratch.data(), len);
        src = scratch.data();
      }
      if (!st.ok()) return fail(objproto::kNodeChildFailed, static_cast<uint32_t>(c), st);
      if (!own && c == 0) {
        memcpy(dst, src, len);
      } else {
        ReduceInto(dst, src, len / es, static_cast<ncclDataType_t>(t->dtype), static_cast<ncclRedOp_t>(t->op));
      }
    }
    off += len;
    out->SetReady(off);
    if (cancelled()) return fail(objproto::kNodeDone, 0, Err(objproto::kTimeout, "cancelled"));
  }
  out->MarkComplete();
  cleanup();
  if (t->slot == -1) Report(*t, objproto::kNodeDone, 0, ObjStatus::Ok());
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
    out += "{\"target\":\"" + Printable(j.target) + "\",\"n\":" + std::to_string(j.n) +
           ",\"degree\":" + std::to_string(j.have_tree ? j.tree.degree : 0) + ",\"placed\":" + std::to_string(placed) +
           ",\"size\":" + std::to_string(j.size) + "}";
  }
  return out + "]}";
}

}  // namespace conduit::objects
