// LocalStore: this host's copies of objects. Large objects live in their own sealed memfd
// (so a program can map one read-only without a copy); small ones (< 64 KiB) on the heap.
// A copy may be partial: writers advance `ready` block by block and readers (programs,
// other daemons, reduce tasks) wait on it, which is what lets every hop pipeline.
//
// Memory: every copy counts against --object-memory-bytes. When a new copy does not fit,
// the least recently used copies that are complete, unpinned (not created here by Put or
// Reduce), not in use and known to exist elsewhere are evicted; if that is not enough the
// caller gets kOutOfMemory.
#ifndef CONDUIT_DAEMON_OBJECTS_LOCAL_STORE_H_
#define CONDUIT_DAEMON_OBJECTS_LOCAL_STORE_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/deadline.h"
#include "common/fd_io.h"
#include "objects/obj_status.h"

namespace conduit::objects {

class LocalObject {
 public:
  LocalObject(std::string id, uint64_t size, bool pinned, bool internal);
  ~LocalObject();
  LocalObject(const LocalObject&) = delete;
  LocalObject& operator=(const LocalObject&) = delete;

  // Backs the object with a memfd (large) or heap bytes (small).
  ObjStatus Allocate(bool shared_memory);

  const std::string& id() const { return id_; }
  uint64_t size() const { return size_; }
  uint8_t* data() const { return data_; }
  bool has_fd() const { return fd_.valid(); }
  int fd() const { return fd_.get(); }
  // A new read-only descriptor of the memfd (a program can map it, but never writably).
  ObjStatus ReadOnlyFd(UniqueFd* out) const;
  bool pinned() const { return pinned_; }
  bool internal() const { return internal_; }

  // Writers: `ready` only grows; MarkComplete seals the memfd against new writable maps.
  void SetReady(uint64_t bytes);
  void MarkComplete();
  // Wakes every waiter with `why` (deleted, lost, creator died).
  void Fail(const ObjStatus& why);

  // Waits until at least `want` bytes are ready (want <= size). *ready gets what is there.
  ObjStatus WaitReady(uint64_t want, Deadline deadline, uint64_t* ready);
  uint64_t ready() const;
  bool complete() const;
  ObjStatus failure() const;

  // Users (program views, senders, reduce tasks) keep a copy from being evicted.
  void AddUser();
  void DropUser();
  int users() const;
  uint64_t last_used = 0;

 private:
  friend class LocalStore;  // Rename
  std::string id_;
  const uint64_t size_;
  bool pinned_;
  bool internal_;
  UniqueFd fd_;
  uint8_t* data_ = nullptr;
  std::vector<uint8_t> heap_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t ready_ = 0;
  bool complete_ = false;
  ObjStatus failed_;
  int users_ = 0;
};

using ObjectRef = std::shared_ptr<LocalObject>;

class LocalStore {
 public:
  // Asked (without the store lock) whether an evictable copy has another complete copy.
  using HasOtherCopy = std::function<bool(const std::string& id)>;
  // Told after a copy was evicted (so the directory can forget the location).
  using Evicted = std::function<void(const std::string& id)>;

  LocalStore(uint64_t limit_bytes, uint64_t inline_limit);
  void SetEvictionHooks(HasOtherCopy has_other, Evicted evicted);

  // Reserves memory (evicting if needed) and inserts a new, empty copy.
  ObjStatus Create(const std::string& id, uint64_t size, bool pinned, bool internal, ObjectRef* out);
  // The copy of `id`, or null. Marks it recently used.
  ObjectRef Find(const std::string& id);
  // Like Find, but waits (bounded) for the copy to be created: a reduce task's partial
  // result may be asked for just before the task starts.
  ObjectRef FindOrWait(const std::string& id, Deadline deadline);
  // Drops the copy (if it is still `expected` when given) and fails its waiters with `why`.
  void Remove(const std::string& id, const ObjStatus& why, const LocalObject* expected = nullptr);
  std::vector<ObjectRef> All();
  // Gives a finished internal copy (a reduce result) its public id, pinned.
  ObjStatus Rename(const std::string& from, const std::string& to);

  uint64_t used() const;
  uint64_t limit() const { return limit_; }

 private:
  ObjStatus Reserve(const std::string& id, uint64_t size);

  const uint64_t limit_;
  const uint64_t inline_limit_;
  HasOtherCopy has_other_;
  Evicted evicted_;
  mutable std::mutex mu_;
  std::condition_variable created_;
  std::map<std::string, ObjectRef> objects_;
  uint64_t used_ = 0;
  uint64_t clock_ = 0;
};

}  // namespace conduit::objects

#endif  // CONDUIT_DAEMON_OBJECTS_LOCAL_STORE_H_
