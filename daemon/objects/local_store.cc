#include "objects/local_store.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "common/log.h"
#include "objects/messages.h"
#include "objects/wait.h"

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older kernels answer EINVAL
#endif

namespace conduit::objects {
namespace {

constexpr uint64_t kHugePageBytes = 2 << 20;

}  // namespace

LocalObject::LocalObject(std::string id, uint64_t size, const CopyInfo& info)
    : id_(std::move(id)),
      size_(size),
      pinned_(info.pinned),
      internal_(info.internal),
      creator_writes_(info.creator_writes),
      owner_(info.owner),
      charged_(info.charge),
      from_shard_(info.from_shard) {}

LocalObject::~LocalObject() {
  if (!fd_.valid() || data_ == nullptr) return;
  // A copy programs could read goes back only once no program holds its file any more
  // (spare_memory.h); otherwise its pages go when the last holder lets go.
  UniqueFd probe;
  if (spares_ != nullptr && !handed_over_.load() &&
      (internal_ || (ReadOnlyFd(&probe).ok() && OnlyOpenFile(probe.get())))) {
    spares_->Give(SpareMemory::Block{std::move(fd_), data_, size_, !internal_, owner_});
  } else {
    munmap(data_, size_);
  }
}

Status LocalObject::Allocate(bool shared_memory, std::shared_ptr<SpareMemory> spares) {
  if (!shared_memory || size_ == 0) {
    heap_.resize(size_);
    data_ = heap_.data();
    return Status::Ok();
  }
  // Only copies the daemon writes through its own mapping are made from spare memory and
  // given back to it; a Put's memfd was writable in its creator's hands.
  if (!creator_writes_ && spares != nullptr) {
    spares_ = std::move(spares);
    SpareMemory::Block spare;
    if (spares_->Take(size_, internal_ ? nullptr : &owner_, &spare)) {  // sealed as below already, its pages made
      fd_ = std::move(spare.fd);
      data_ = spare.data;
      pages_made_ = true;
      return Status::Ok();
    }
  }
  std::string name = "hoplite:" + Printable(id_).substr(0, 200);
  UniqueFd fd(memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd.valid()) return Err(objproto::kOutOfMemory, "memfd_create: %s", strerror(errno));
  if (ftruncate(fd.get(), static_cast<off_t>(size_)) != 0) {
    return Err(objproto::kOutOfMemory, "cannot size a %llu-byte object: %s", static_cast<unsigned long long>(size_),
               strerror(errno));
  }
  // Nobody may resize it under a mapping (that would be a SIGBUS in the daemon).
  fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW);
  // A memfd's inode is mode 0777: anyone holding a read-only descriptor could reopen it
  // read-write through /proc/self/fd and write a copy others are reading. Owned by the
  // daemon's uid with mode 0400, only the daemon (and root) can reopen it at all.
  if (fchmod(fd.get(), 0400) != 0) return Err(objproto::kInternal, "fchmod of an object memfd: %s", strerror(errno));
  fd_ = std::move(fd);
  void* p;
  if (creator_writes_) {
    // The daemon only reads what a Put's creator writes. Its mapping is of a read-only
    // descriptor, which F_SEAL_WRITE does not count as writable (see Seal).
    UniqueFd ro;
    CONDUIT_RETURN_IF_ERROR(ReadOnlyFd(&ro));
    p = mmap(nullptr, size_, PROT_READ, MAP_SHARED, ro.get(), 0);
  } else {
    p = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_.get(), 0);
  }
  if (p == MAP_FAILED) {
    fd_.reset();
    return Err(objproto::kOutOfMemory, "mmap of a %llu-byte object: %s", static_cast<unsigned long long>(size_),
               strerror(errno));
  }
  data_ = static_cast<uint8_t*>(p);
  // Where the host lets shared memory use huge pages on request (transparent_hugepage/
  // shmem_enabled = advise), a large copy is made of 2 MiB pages: 512 times fewer
  // allocations and faults per byte received. Elsewhere this changes nothing.
  if (size_ >= kHugePageBytes) (void)madvise(p, size_, MADV_HUGEPAGE);
  // Only the daemon writes a fetched or reduced copy, through the mapping it already has:
  // no new writable mapping, nor write(2), from now on, by anyone.
  if (!creator_writes_ && fcntl(fd_.get(), F_ADD_SEALS, F_SEAL_FUTURE_WRITE) != 0) {
    return Err(objproto::kInternal, "sealing an object memfd against writes: %s", strerror(errno));
  }
  return Status::Ok();
}

Status LocalObject::AdoptComplete(UniqueFd memfd, const std::string& bytes) {
  if (!memfd.valid()) {
    if (bytes.size() != size_ || size_ >= objproto::kInlineLimit) {
      return Err(objproto::kInvalid, "object %s: %zu handed-over bytes for a %llu-byte copy", Printable(id_).c_str(),
                 bytes.size(), static_cast<unsigned long long>(size_));
    }
    heap_.assign(bytes.begin(), bytes.end());
    data_ = heap_.data();
  } else {
    // Only a copy nobody can change any more is taken: the same size, and sealed (Seal,
    // Allocate) against resizing and against writes through any descriptor.
    struct stat st {};
    const int seals = fcntl(memfd.get(), F_GET_SEALS);
    if (fstat(memfd.get(), &st) != 0 || static_cast<uint64_t>(st.st_size) != size_ || size_ == 0) {
      return Err(objproto::kInvalid, "object %s: the handed-over memfd is not %llu bytes long", Printable(id_).c_str(),
                 static_cast<unsigned long long>(size_));
    }
    if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW) ||
        (seals & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE)) == 0) {
      return Err(objproto::kInvalid, "object %s: the handed-over memfd is not sealed against changes (seals 0x%x)",
                 Printable(id_).c_str(), seals < 0 ? 0 : seals);
    }
    void* p = mmap(nullptr, size_, PROT_READ, MAP_SHARED, memfd.get(), 0);
    if (p == MAP_FAILED) {
      return Err(objproto::kOutOfMemory, "mmap of a handed-over %llu-byte object: %s",
                 static_cast<unsigned long long>(size_), strerror(errno));
    }
    fd_ = std::move(memfd);
    data_ = static_cast<uint8_t*>(p);
  }
  std::lock_guard<std::mutex> seal_lock(seal_mu_);
  sealed_ = true;
  std::lock_guard<std::mutex> lock(mu_);
  ready_ = size_;
  complete_ = true;
  return Status::Ok();
}

void LogSharedMemoryHugePages() {
  // The file lists every mode with the one in force in brackets: "always [never] advise ...".
  std::string modes;
  if (FILE* f = fopen("/sys/kernel/mm/transparent_hugepage/shmem_enabled", "r")) {
    char line[256] = {};
    if (fgets(line, sizeof(line), f) != nullptr) modes = line;
    fclose(f);
  }
  const size_t open = modes.find('['), close = modes.find(']');
  const std::string mode = open != std::string::npos && close > open ? modes.substr(open + 1, close - open - 1) : "";
  if (mode == "never" || mode == "deny") {
    CLOG_INFO("objects: shared memory gets no huge pages on this host (transparent_hugepage/shmem_enabled is '%s'); "
              "'echo advise > /sys/kernel/mm/transparent_hugepage/shmem_enabled' lets copies of 2 MiB and more "
              "use them (broadcast and reduce of large objects ~1.3x faster: docs/configuration.md)",
              mode.c_str());
  } else if (!mode.empty()) {
    CLOG_DEBUG("objects: transparent_hugepage/shmem_enabled is '%s'", mode.c_str());
  }
}

void LocalObject::PrepareWrite(uint64_t offset, uint64_t len) const {
  if (!fd_.valid() || creator_writes_ || pages_made_ || offset >= size_) return;
  len = std::min(len, size_ - offset);
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data_ + offset) & ~(page - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(data_ + offset + len);
  (void)madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
}

Status LocalObject::ReadOnlyFd(UniqueFd* out) const {
  // A new open file description that is read-only: mmap(PROT_WRITE, MAP_SHARED) on it fails.
  std::string path = "/proc/self/fd/" + std::to_string(fd_.get());
  out->reset(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!out->valid()) return Err(objproto::kInternal, "reopen of object memfd read-only: %s", strerror(errno));
  return Status::Ok();
}

void LocalObject::SetReady(uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (bytes > size_) bytes = size_;
  if (bytes <= ready_) return;
  ready_ = bytes;
  if (!wants_.empty() && ready_ >= *wants_.begin()) cv_.notify_all();
}

Status LocalObject::Seal() {
  // A partial result's memfd never leaves the daemon, so no other holder could add seals;
  // without F_SEAL_SEAL it can be reused (SpareMemory) as it is.
  if (!fd_.valid() || internal_) return Status::Ok();
  std::lock_guard<std::mutex> lock(seal_mu_);
  if (sealed_) return Status::Ok();
  // A spare memfd reused for a copy (spare_memory.h) has all its seals from before.
  if (!creator_writes_ && (fcntl(fd_.get(), F_GET_SEALS) & F_SEAL_SEAL) != 0) {
    sealed_ = true;
    return Status::Ok();
  }
  // A copy the daemon wrote has been F_SEAL_FUTURE_WRITE since it was made; the daemon's
  // own writable mapping stays (nobody else can write). A Put's memfd gets F_SEAL_WRITE,
  // which the kernel refuses (EBUSY) while any writable shared mapping of it exists: the
  // creator's, if it did not unmap. The daemon's own mapping is read-only (Allocate).
  const int seals = creator_writes_ ? F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL : F_SEAL_SEAL;
  // A writable mapping can outlive the creator's munmap by a moment: a child that another
  // of its threads forked between the creator's mmap and its madvise(MADV_DONTFORK) holds
  // one until it execs or exits. So EBUSY is tried again for about a second (and the
  // kernel's own wait for pinned pages runs within each try) before the Put is refused.
  int rc;
  for (int pause_ms = 1; (rc = fcntl(fd_.get(), F_ADD_SEALS, seals)) != 0 && errno == EBUSY && pause_ms <= 512;
       pause_ms *= 2) {
    std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
  }
  if (rc != 0) {
    if (errno == EBUSY) {
      return Err(objproto::kInvalid,
                 "Put of %s refused: the creator still maps the object writable (it must unmap before reporting the "
                 "last bytes)",
                 Printable(id_).c_str());
    }
    return Err(objproto::kInternal, "sealing object %s: %s", Printable(id_).c_str(), strerror(errno));
  }
  sealed_ = true;
  return Status::Ok();
}

void LocalObject::MarkComplete() {
  Status sealed = Seal();
  if (!sealed.ok()) CLOG_WARN("objects: %s", sealed.message().c_str());
  std::lock_guard<std::mutex> lock(mu_);
  ready_ = size_;
  complete_ = true;
  cv_.notify_all();
}

void LocalObject::Fail(const Status& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (failed_.ok()) failed_ = why;  // a complete copy that is deleted also stops its readers
  cv_.notify_all();
}

Status LocalObject::WaitReady(uint64_t want, Deadline deadline, uint64_t* ready) {
  std::unique_lock<std::mutex> lock(mu_);
  if (want > size_) want = size_;
  if (failed_.ok() && ready_ < want) {
    auto mine = wants_.insert(want);
    WaitUntil(cv_, lock, deadline, [&] { return !failed_.ok() || ready_ >= want; });
    wants_.erase(mine);
  }
  *ready = ready_;
  if (!failed_.ok()) return failed_;
  if (ready_ >= want) return Status::Ok();
  return Err(objproto::kTimeout, "object %s: %llu of %llu bytes after the wait ran out (its source stalled)",
             Printable(id_).c_str(), static_cast<unsigned long long>(ready_), static_cast<unsigned long long>(size_));
}

uint64_t LocalObject::ready() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ready_;
}

bool LocalObject::complete() const {
  std::lock_guard<std::mutex> lock(mu_);
  return complete_ && failed_.ok();
}

Status LocalObject::failure() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failed_;
}

void LocalObject::AddUser() {
  std::lock_guard<std::mutex> lock(mu_);
  ++users_;
}

void LocalObject::DropUser() {
  std::lock_guard<std::mutex> lock(mu_);
  --users_;
}

int LocalObject::users() const {
  std::lock_guard<std::mutex> lock(mu_);
  return users_;
}

LocalStore::LocalStore(uint64_t limit_bytes, uint64_t inline_limit, uint64_t quota_bytes, uint64_t quota_objects)
    : limit_(limit_bytes),
      inline_limit_(inline_limit),
      quotas_(quota_bytes, quota_objects),
      spares_(std::make_shared<SpareMemory>(limit_bytes / 8)) {}

void LocalStore::SetEvictionHooks(HasOtherCopy has_other, Evicted evicted) {
  has_other_ = std::move(has_other);
  evicted_ = std::move(evicted);
}

std::string LocalStore::EvictionCandidateLocked(const std::vector<std::string>& refused, uint64_t* pinned_bytes) {
  std::string victim;
  uint64_t best = UINT64_MAX;
  for (auto& [oid, obj] : objects_) {
    if (obj->pinned() || obj->internal()) *pinned_bytes += obj->size();
    if (obj->pinned() || obj->internal() || !obj->complete() || obj->users() > 0) continue;
    if (std::find(refused.begin(), refused.end(), oid) != refused.end()) continue;
    if (obj->last_used < best) {
      best = obj->last_used;
      victim = oid;
    }
  }
  return victim;
}

Status LocalStore::Reserve(const std::string& id, uint64_t size, bool from_shard) {
  std::vector<std::string> refused;  // evictable by the rules but the only copy
  for (;;) {
    std::string victim;
    bool victim_from_shard = false;
    uint64_t pinned_bytes = 0;
    bool clear_spares = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (objects_.count(id) != 0) return Err(objproto::kExists, "object %s already has a copy here", Printable(id).c_str());
      if (from_shard && from_shard_used_ + size > limit_ / 16) {
        return Err(objproto::kOutOfMemory, "copies handed over by directory shards fill their 16th of the store");
      }
      const uint64_t spare = spares_->bytes();
      if (size <= limit_ && used_ + spare + size <= limit_) {
        used_ += size;
        if (from_shard) from_shard_used_ += size;
        return Status::Ok();
      }
      if (from_shard) return Err(objproto::kOutOfMemory, "no room for a copy handed over by a shard without evicting");
      // Spare memory goes before any copy is evicted (unmapped outside the store's lock).
      clear_spares = spare > 0 && size <= limit_ && used_ + size <= limit_;
      if (!clear_spares) victim = EvictionCandidateLocked(refused, &pinned_bytes);
      if (!victim.empty()) victim_from_shard = objects_[victim]->from_shard();
      if (!clear_spares && victim.empty()) {
        return Err(objproto::kOutOfMemory,
                   "object store full: %s needs %llu bytes, %llu of %llu bytes in use (%llu pinned by Put/Reduce, "
                   "the rest in use or the only copy); Delete objects or raise --object-memory-bytes",
                   Printable(id).c_str(), static_cast<unsigned long long>(size),
                   static_cast<unsigned long long>(used_), static_cast<unsigned long long>(limit_),
                   static_cast<unsigned long long>(pinned_bytes));
      }
    }
    if (clear_spares) {
      spares_->Clear();
      continue;
    }
    // A copy from a shard is never the only one: the shard holds the bytes.
    if (!victim_from_shard && (!has_other_ || !has_other_(victim))) {
      refused.push_back(victim);
      continue;
    }
    CLOG_INFO("objects: evicting the copy of %s (least recently used, another copy exists)", Printable(victim).c_str());
    Remove(victim, Err(objproto::kNotFound, "the copy of %s here was evicted", Printable(victim).c_str()));
    if (evicted_) evicted_(victim);
  }
}

Status LocalStore::Create(const std::string& id, uint64_t size, const CopyInfo& info, ObjectRef* out) {
  const bool shared_memory = size >= inline_limit_;
  return Add(id, size, info, [&](LocalObject& obj) { return obj.Allocate(shared_memory, spares_); }, out);
}

Status LocalStore::Adopt(const std::string& id, uint64_t size, const CopyInfo& info, UniqueFd memfd,
                            const std::string& bytes, ObjectRef* out) {
  auto fd = std::make_shared<UniqueFd>(std::move(memfd));
  return Add(id, size, info, [fd, &bytes](LocalObject& obj) { return obj.AdoptComplete(std::move(*fd), bytes); }, out);
}

Status LocalStore::Add(const std::string& id, uint64_t size, const CopyInfo& info,
                          const std::function<Status(LocalObject&)>& back, ObjectRef* out) {
  // The quota first: a uid over it costs nothing, not even an eviction.
  if (info.charge) CONDUIT_RETURN_IF_ERROR(quotas_.Charge(info.owner.uid, size, id));
  Status st = Reserve(id, size, info.from_shard);
  if (!st.ok()) {
    if (info.charge) quotas_.Release(info.owner.uid, size);
    return st;
  }
  auto obj = std::make_shared<LocalObject>(id, size, info);
  st = back(*obj);
  std::lock_guard<std::mutex> lock(mu_);
  if (st.ok() && objects_.count(id) != 0) st = Err(objproto::kExists, "object %s already has a copy here", Printable(id).c_str());
  if (!st.ok()) {
    used_ -= size;
    if (info.from_shard) from_shard_used_ -= size;
    if (info.charge) quotas_.Release(info.owner.uid, size);
    return st;
  }
  obj->last_used = ++clock_;
  objects_[id] = obj;
  if (info.unlisted) unlisted_.insert(id);
  created_.notify_all();
  *out = std::move(obj);
  return Status::Ok();
}

ObjectRef LocalStore::FindLocked(const std::string& id) {
  auto it = objects_.find(id);
  if (it == objects_.end()) return nullptr;
  it->second->last_used = ++clock_;
  return it->second;
}

ObjectRef LocalStore::Find(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  return FindLocked(id);
}

ObjectRef LocalStore::FindForProgram(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  return unlisted_.count(id) != 0 ? nullptr : FindLocked(id);
}

ObjectRef LocalStore::FindOrWait(const std::string& id, Deadline deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  ObjectRef found;
  WaitUntil(created_, lock, deadline, [&] { return (found = FindLocked(id)) != nullptr; });
  return found;
}

bool LocalStore::Remove(const std::string& id, const Status& why, const LocalObject* expected) {
  ObjectRef obj;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = objects_.find(id);
    if (it == objects_.end() || (expected != nullptr && it->second.get() != expected)) return false;
    obj = std::move(it->second);
    objects_.erase(it);
    unlisted_.erase(id);
    used_ -= obj->size();
    if (obj->from_shard()) from_shard_used_ -= obj->size();
  }
  if (obj->charged()) quotas_.Release(obj->owner().uid, obj->size());
  obj->Fail(why);
  return true;
}

void LocalStore::List(const LocalObject* obj) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = objects_.find(obj->id());
  if (it == objects_.end() || it->second.get() != obj) return;  // removed meanwhile
  unlisted_.erase(obj->id());
}

std::vector<ObjectRef> LocalStore::All() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<ObjectRef> out;
  for (auto& [id, obj] : objects_) out.push_back(obj);
  return out;
}

uint64_t LocalStore::used() const {
  std::lock_guard<std::mutex> lock(mu_);
  return used_;
}

}  // namespace conduit::objects
