// LocalStore: this host's copies of objects. Large objects live in their own memfd (so a
// program can map one read-only without a copy); small ones (< 64 KiB) on the heap.
// A copy may be partial: writers advance `ready` block by block and readers (programs,
// other daemons, reduce tasks) wait on it, which is what lets every hop pipeline.
//
// Immutability: a memfd is mode 0400 (owned by the daemon's uid), so a program holding a
// read-only descriptor cannot reopen it writable through /proc/self/fd. A copy the daemon
// writes (fetched, reduced) is sealed against any new writable mapping and write(2) from
// the start (F_SEAL_FUTURE_WRITE): only the daemon's own mapping ever writes it. A Put's
// memfd is written by its creator through a writable mapping; the daemon maps it
// read-only and, before the Put completes, seals it with F_SEAL_WRITE, which the kernel
// refuses (EBUSY) while the creator still maps it writable and which, once set, forbids
// writes through every descriptor and mapping.
//
// Memory: every copy counts against --object-memory-bytes. When a new copy does not fit,
// the least recently used copies that are complete, unpinned (not created here by Put or
// Reduce), not in use and known to exist elsewhere are evicted; if that is not enough the
// caller gets kOutOfMemory. Copies created by a uid's programs here (Puts, Reduce
// targets) also count against that uid's quota (quota.h), checked before anything is
// allocated.
#ifndef CONDUIT_DAEMON_OBJECTS_LOCAL_STORE_H_
#define CONDUIT_DAEMON_OBJECTS_LOCAL_STORE_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "common/deadline.h"
#include "common/fd_io.h"
#include "objects/obj_status.h"
#include "objects/quota.h"
#include "objects/spare_memory.h"
#include "protocol/object_protocol.h"

namespace conduit::objects {

// What a new copy is.
struct CopyInfo {
  bool pinned = false;          // an origin copy (Put or Reduce target): kept until Delete
  bool internal = false;        // a reduce's partial result (never served to programs)
  bool creator_writes = false;  // a program writes it through its own mapping (Put)
  objproto::Owner owner{};
  bool charge = false;          // counts against owner.uid's quota on this daemon
  // A Put's copy before the directory accepted its id (LocalStore::List): FindForProgram
  // does not see it, so no Get, Wait or Delete here takes another user's claim on an id for
  // the object.
  bool unlisted = false;
  // A small object's copy that its directory shard handed over (DirStoreCopy). Made only if
  // it fits as the store is, within a 16th of the store for all such copies (nothing is
  // evicted for it: it is made on a connection's reader thread, which must not wait for the
  // directory as an eviction does). Evicted without asking the directory: the shard holds
  // the object's bytes.
  bool from_shard = false;
};

class LocalObject {
 public:
  LocalObject(std::string id, uint64_t size, const CopyInfo& info);
  ~LocalObject();
  LocalObject(const LocalObject&) = delete;
  LocalObject& operator=(const LocalObject&) = delete;

  // Backs the object with a memfd (large) or heap bytes (small). A copy the daemon writes
  // (not a Put's) given `spares` takes a spare memfd of its size from there when one it may
  // reuse exists, and gives its memfd back to it when the copy is destroyed, if nobody
  // else holds it then (spare_memory.h).
  Status Allocate(bool shared_memory, std::shared_ptr<SpareMemory> spares = nullptr);
  // Backs it instead with a complete copy another daemon process made (a live upgrade,
  // docs/upgrade.md): its memfd, which must have this size and be sealed against writes
  // and resizing, mapped read-only; or, with no memfd, `bytes` (a small copy).
  Status AdoptComplete(UniqueFd memfd, const std::string& bytes);

  const std::string& id() const { return id_; }
  uint64_t size() const { return size_; }
  // Writable only for copies the daemon fills (fetched, reduced, small); a Put's large
  // object is mapped read-only here (its creator writes it).
  uint8_t* data() const { return data_; }
  bool has_fd() const { return fd_.valid(); }
  // Before the daemon writes [offset, offset + len) of a copy it fills: the pages are made
  // in one call instead of one fault per 4 KiB (measured: docs/benchmarks.md, "Object
  // memory on fast links"). Only a hint: a kernel without MADV_POPULATE_WRITE (< 5.14) faults as before.
  // Nothing for a reused spare block: its pages and the daemon's mapping of them exist.
  void PrepareWrite(uint64_t offset, uint64_t len) const;
  int fd() const { return fd_.get(); }
  // The memfd is being handed to another process as it is (a live upgrade's dup): it
  // never goes back to the spare memory, whose check cannot see a dup of it.
  void HandOver() { handed_over_.store(true); }
  // A new read-only descriptor of the memfd (a program can map it, but never writably).
  Status ReadOnlyFd(UniqueFd* out) const;
  bool pinned() const { return pinned_; }
  bool internal() const { return internal_; }
  const objproto::Owner& owner() const { return owner_; }
  bool charged() const { return charged_; }
  bool from_shard() const { return from_shard_; }

  // A Put's memfd: F_SEAL_WRITE (no write through any descriptor or mapping, ever),
  // SHRINK, GROW and SEAL; fails, changing nothing, while anyone still maps it writable
  // (a creator that did not unmap). Other memfds: F_SEAL_SEAL (they are F_SEAL_FUTURE_WRITE
  // from the start). Heap copies need nothing. Idempotent.
  Status Seal();
  // Writers: `ready` only grows; MarkComplete seals (Seal, logged if it fails) and wakes.
  void SetReady(uint64_t bytes);
  void MarkComplete();
  // Wakes every waiter with `why` (deleted, lost, creator died).
  void Fail(const Status& why);

  // Waits until at least `want` bytes are ready (want <= size). *ready gets what is there.
  Status WaitReady(uint64_t want, Deadline deadline, uint64_t* ready);
  uint64_t ready() const;
  bool complete() const;
  Status failure() const;

  // Users (program views, senders, reduce tasks) keep a copy from being evicted.
  void AddUser();
  void DropUser();
  int users() const;
  uint64_t last_used = 0;

 private:
  std::string id_;
  const uint64_t size_;
  bool pinned_;
  bool internal_;
  const bool creator_writes_;
  const objproto::Owner owner_;
  const bool charged_;
  const bool from_shard_;
  UniqueFd fd_;
  uint8_t* data_ = nullptr;
  bool pages_made_ = false;  // a spare block's pages, already mapped writable here
  std::shared_ptr<SpareMemory> spares_;  // where the memfd goes when the copy is destroyed
  std::atomic<bool> handed_over_{false};
  std::vector<uint8_t> heap_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t ready_ = 0;
  // What each WaitReady in progress waits for: SetReady wakes them only once the least of
  // these is met, so a reader waiting for the whole copy sleeps through the blocks before.
  std::multiset<uint64_t> wants_;
  bool complete_ = false;
  std::mutex seal_mu_;
  bool sealed_ = false;    // under seal_mu_
  Status failed_;
  int users_ = 0;
};

using ObjectRef = std::shared_ptr<LocalObject>;

// At start: says in the log whether large copies can use huge pages on this host
// (/sys/kernel/mm/transparent_hugepage/shmem_enabled), and what to set if they cannot.
void LogSharedMemoryHugePages();

class LocalStore {
 public:
  // Asked (without the store lock) whether an evictable copy has another complete copy.
  using HasOtherCopy = std::function<bool(const std::string& id)>;
  // Told after a copy was evicted (so the directory can forget the location).
  using Evicted = std::function<void(const std::string& id)>;

  // quota_bytes / quota_objects: per uid, for copies created with CopyInfo::charge.
  LocalStore(uint64_t limit_bytes, uint64_t inline_limit, uint64_t quota_bytes = UINT64_MAX,
             uint64_t quota_objects = UINT64_MAX);
  void SetEvictionHooks(HasOtherCopy has_other, Evicted evicted);

  // Charges the owner's quota (with info.charge), reserves memory (evicting if needed) and
  // inserts a new, empty copy.
  Status Create(const std::string& id, uint64_t size, const CopyInfo& info, ObjectRef* out);
  // The same for a complete copy handed over by the daemon this one replaced
  // (LocalObject::AdoptComplete).
  Status Adopt(const std::string& id, uint64_t size, const CopyInfo& info, UniqueFd memfd, const std::string& bytes,
                  ObjectRef* out);
  // The copy of `id`, or null. Marks it recently used. For what the directory sent here (a
  // fetch, a reduce task): the directory lists a Put's copy only once it accepted its id.
  ObjectRef Find(const std::string& id);
  // The same for a program's Get, Wait or Delete: null also while the copy is unlisted.
  ObjectRef FindForProgram(const std::string& id);
  // The copy `obj`, created unlisted, may be found from now on (its id is the creator's).
  void List(const LocalObject* obj);
  // Like Find, but waits (bounded) for the copy to be created: a reduce task's partial
  // result may be asked for just before the task starts.
  ObjectRef FindOrWait(const std::string& id, Deadline deadline);
  // Drops the copy (if it is still `expected` when given) and fails its waiters with `why`.
  // Returns whether there was such a copy to drop.
  bool Remove(const std::string& id, const Status& why, const LocalObject* expected = nullptr);
  std::vector<ObjectRef> All();

  uint64_t used() const;
  uint64_t limit() const { return limit_; }
  // Bytes held for reuse by later copies (within the limit: given up before any eviction).
  uint64_t spare_bytes() const { return spares_->bytes(); }
  // Copies made from spare memory, since start.
  uint64_t spare_reused() const { return spares_->reused(); }
  UidQuotas& quotas() { return quotas_; }

 private:
  // Memory for a new copy, evicting for it unless it comes from a shard (CopyInfo).
  Status Reserve(const std::string& id, uint64_t size, bool from_shard);
  // The least recently used copy that may be evicted (complete, unused, neither pinned nor
  // internal, not in `refused`), or "" (mu_ held); adds the pinned and internal bytes seen.
  // Find's lookup (mu_ held).
  ObjectRef FindLocked(const std::string& id);
  std::string EvictionCandidateLocked(const std::vector<std::string>& refused, uint64_t* pinned_bytes);
  // Create and Adopt: charges, reserves, backs the copy with `back` and inserts it.
  Status Add(const std::string& id, uint64_t size, const CopyInfo& info,
                const std::function<Status(LocalObject&)>& back, ObjectRef* out);

  const uint64_t limit_;
  const uint64_t inline_limit_;
  HasOtherCopy has_other_;
  Evicted evicted_;
  UidQuotas quotas_;
  mutable std::mutex mu_;
  std::condition_variable created_;
  std::map<std::string, ObjectRef> objects_;
  std::set<std::string> unlisted_;  // ids of copies created unlisted and not listed yet
  uint64_t from_shard_used_ = 0;    // bytes of CopyInfo::from_shard copies (within used_)
  uint64_t used_ = 0;
  uint64_t clock_ = 0;
  // At most an eighth of the limit, counted against it.
  std::shared_ptr<SpareMemory> spares_;
};

}  // namespace conduit::objects

#endif  // CONDUIT_DAEMON_OBJECTS_LOCAL_STORE_H_
