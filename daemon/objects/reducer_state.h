// The Reducer's internal state, shared by its coordinator (reducer.cc) and node
// (reduce_node.cc) halves. Not for use outside the reducer.
#ifndef CONDUIT_DAEMON_OBJECTS_REDUCER_STATE_H_
#define CONDUIT_DAEMON_OBJECTS_REDUCER_STATE_H_

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "objects/access.h"
#include "objects/local_store.h"
#include "objects/reduce_tree.h"
#include "objects/reducer.h"
#include "objects/transfer.h"

namespace conduit::objects {

// The target being written by the coordinator's sink. Generations of the sink may overlap
// for a moment after a restart: only the current one (gen) may write, under mu.
struct Reducer::Sink {
  std::mutex mu;
  ObjectRef out;
  uint32_t gen = 0;      // the sink generation allowed to write
  uint64_t written = 0;  // bytes [0, written) hold the current source set's result
  bool final = false;    // the source set can no longer change: written bytes are readable
};

struct Reducer::Job {
  uint64_t key = 0;
  std::string target;
  std::vector<std::string> sources;
  int n = 0;
  uint32_t op = 0, dtype = 0;
  Deadline deadline = Deadline::Never();
  Caller caller;            // who asked: every source must be readable by it
  CopyInfo target_info;     // the target: pinned, owned by the caller, charged to its quota

  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  Status result;

  uint64_t size = 0;
  bool size_known = false;
  // Small objects: every source's bytes came with its directory event; reduced here.
  bool small = false;
  Bytes small_result;

  bool have_tree = false;
  ReduceTree tree;

  enum State { kWaiting, kArrived, kAssigned, kFailed };
  struct Src {
    State state = kWaiting;
    std::string where;
    Bytes bytes;  // small objects
  };
  std::vector<Src> src;
  std::deque<int> spares;           // arrived, not placed (arrival order)
  std::vector<int> arrival;         // every source in the order it arrived
  std::vector<int> slot_src;        // -1: empty
  std::vector<uint32_t> slot_gen;
  std::vector<int> slot_restarts;
  uint32_t sink_gen = 0;
  bool sink_runs_root = false;      // the sink generation running also runs the root's task
  bool sources_changed = false;     // a slot was refilled since the sink last started
  bool final = false;               // see Sink::final
  std::shared_ptr<Sink> sink;       // once the target exists
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
  std::shared_ptr<Sink> sink;  // the sink (slot -1) only

  std::mutex mu;
  std::condition_variable cv;
  std::vector<objproto::ChildInfo> children;
  std::vector<FetchStream*> streams;
  bool cancelled = false;
};

}  // namespace conduit::objects

#endif  // CONDUIT_DAEMON_OBJECTS_REDUCER_STATE_H_
