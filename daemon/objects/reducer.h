// Reducer: Hoplite's tree reduce, both roles.
//
// Coordinator (the daemon where a program calls Reduce; reducer.cc): reserves the target id
// in the directory and subscribes to every source object's locations, both at once. Small
// objects (< 64 KiB) arrive with their bytes in the directory's events and are reduced
// right here: no tree, no fetch. Larger ones are placed, in arrival order, into the slots
// of a tree whose degree comes from eq. 2.1 (reduce_tree.h), and each slot's host is asked
// to run the slot's task. The coordinator runs the sink, which streams the root's result
// into the target object; when the root's object is on the coordinator's host, the sink
// runs the root's task itself, combining that object with the root's children straight
// into the target (no partial result for the root, no copy of it). Only the first
// num_objects to arrive are used.
//
// The target is a partial copy in the directory while it is being reduced, so readers
// anywhere pipeline from it (a broadcast overlapping the reduce, as in the paper's
// allreduce). Its blocks become readable only once they are final: when every source that
// can still take part is in the tree, a failure can only fail the Reduce, never change its
// bytes. With spare sources left, a failure may replace a source, so the result becomes
// readable when complete.
//
// Node task (on the host of a slot's object; reduce_node.cc): for each block, its own
// object's block (waiting for it if the object is still being written) is combined with the
// same block of every child's stream (a child is a leaf's source object or an inner slot's
// partial result, fetched pipelined) and the result block is published at once for the
// parent.
//
// Failures: a slot whose host died or whose object vanished is emptied and refilled by
// the next object to arrive; the tasks of its ancestors (and the sink) restart with a new
// generation, refetching their children's partial results from the start (the sink from
// the first byte it has not written when the sources stayed the same). If fewer than
// num_objects sources can still take part, or the deadline passes, Reduce fails with a
// message naming what is missing. Nothing waits without a bound.
#ifndef CONDUIT_DAEMON_OBJECTS_REDUCER_H_
#define CONDUIT_DAEMON_OBJECTS_REDUCER_H_

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/deadline.h"
#include "objects/access.h"
#include "objects/directory_client.h"
#include "objects/local_store.h"
#include "objects/messages.h"
#include "objects/obj_status.h"
#include "objects/object_api.h"
#include "objects/peers.h"
#include "objects/transfer.h"
#include "protocol/object_protocol.h"

namespace conduit::objects {

// What the reducer needs of the store around it (ObjectService implements it): its parts,
// and the two events of a Reduce target's life that the store publishes.
class ReducerHost {
 public:
  virtual ~ReducerHost() = default;
  virtual const ObjectOptions& options() const = 0;
  virtual Peers& peers() = 0;
  virtual LocalStore& store() = 0;
  virtual DirectoryClient& directory() = 0;
  virtual DataPool& pool() = 0;
  virtual TransferStats& transfer_stats() = 0;
  // A Reduce target made on this host (pinned, origin): registered partial while the reduce
  // runs, so readers elsewhere pipeline from it, and complete at the end.
  virtual void PublishReduceTarget(const ObjectRef& obj, bool complete) = 0;
  // A Reduce that failed: drops its target copy (if any) and its reservation in the
  // directory; readers of the partial target get `why` (or "lost" on other hosts).
  virtual void AbandonReduceTarget(const std::string& id, const LocalObject* obj, const Status& why) = 0;
};

class Reducer {
 public:
  explicit Reducer(ReducerHost* host);
  ~Reducer();
  void Register();

  // `caller` must be able to read every source it uses (a source it may not read fails the
  // Reduce with kPermissionDenied); the target is created owned by `owner` and, unless the
  // caller is an operator, charged to its quota.
  Status Run(const std::string& target, const std::vector<std::string>& sources, size_t num_objects, uint32_t op,
                uint32_t dtype, const Caller& caller, const objproto::Owner& owner, Deadline deadline,
                std::vector<uint32_t>* used, uint32_t* degree, uint64_t* size);
  void OnMembershipChange();
  // The daemon is shutting down: every Reduce this daemon coordinates ends with `why`.
  void FailAll(const Status& why);
  std::string StateJson();

  struct Job;
  struct Task;
  struct Sink;

 private:
  // Coordinator side; Job::mu is held.
  void OnArrival(Job& j, int src, const std::string& where, uint64_t size, const objproto::Owner& owner,
                 const Bytes& inline_data);
  void ReduceInline(Job& j);
  void UseTree(Job& j);
  void AssignSpares(Job& j);
  void UpdateFinal(Job& j);
  void StartSlot(Job& j, int slot);
  void StartSink(Job& j);
  void NotifyParent(Job& j, int slot);
  // Whether the root slot's object is on this host: then the sink runs the root's task.
  bool RootHere(const Job& j) const;
  // A node's task (slot's, or the sink's running the root's) reported its own object or
  // its child `child` failed.
  void OnNodeFailed(Job& j, int slot, uint32_t outcome, uint32_t child, const Status& st);
  objproto::ChildInfo ChildInfoOf(const Job& j, int slot) const;
  std::string StreamOf(const Job& j, int slot) const;
  void FailSlot(Job& j, int slot, const std::string& why);
  void RestartPath(Job& j, int slot);
  void Cancel(Job& j, const std::string& host, int slot, uint32_t gen);
  void Finish(Job& j, Status st);
  void OnReport(const std::string& from, const Bytes& body);
  void ChooseDegree(Job& j);
  // Run's thread: the target's local copy, once the size is known.
  Status CreateTarget(Job& j);

  // Node side (reduce_node.cc).
  void OnNodeStart(const std::string& from, const Bytes& body);
  void OnNodeChild(const std::string& from, const Bytes& body);
  void OnNodeCancel(const std::string& from, const Bytes& body);
  void RunTask(std::shared_ptr<Task> t);
  void RunSink(std::shared_ptr<Task> t);
  void Report(const Task& t, uint32_t outcome, uint32_t child, const Status& st);
  void CancelTasks(std::vector<std::shared_ptr<Task>> victims);

  ReducerHost* host_;
  std::mutex mu_;
  std::map<uint64_t, std::shared_ptr<Job>> jobs_;
  std::map<std::string, std::shared_ptr<Task>> tasks_;
  std::atomic<uint64_t> next_key_;
};

}  // namespace conduit::objects

#endif  // CONDUIT_DAEMON_OBJECTS_REDUCER_H_
