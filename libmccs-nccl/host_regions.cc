#include "host_regions.h"

#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "common/env_bytes.h"
#include "common/shm_segment.h"
#include "page_adoption.h"

namespace conduit {
namespace {

struct Region {
  uint64_t id = 0;
  ShmSegment map;  // ncclMemAlloc's: the program's own mapping
  UniqueFd fd;
  std::unique_ptr<AdoptedPages> adopted;  // or a program's buffer, adopted
  // The program's address of byte 0 (the table's key), the bytes, the memfd.
  uintptr_t Start() const { return adopted ? adopted->base : reinterpret_cast<uintptr_t>(map.data()); }
  size_t Size() const { return adopted ? adopted->size() : map.size(); }
  int Fd() const { return adopted ? adopted->fd.get() : fd.get(); }
};

std::mutex g_mu;
std::map<uintptr_t, std::unique_ptr<Region>> g_regions;  // by start address
using RegionIt = std::map<uintptr_t, std::unique_ptr<Region>>::iterator;
uint64_t g_next_id = 1;
uint64_t g_frees = 0;
uint64_t g_adopted_bytes = 0;
size_t g_adopted_count = 0;
// Each adoption splits the program's mapping in up to three (vm.max_map_count is 65530 by
// default): at most this many at once.
constexpr size_t kMaxAdoptedRegions = 1024;
std::chrono::steady_clock::time_point g_last_sweep;
// Buffers adoption refused ((address, bytes)): not tried on every call. Forgotten when a
// region goes (the refusal may have been the overlap) and when it grows past kMaxRefused.
std::set<std::pair<uintptr_t, size_t>> g_refused;
constexpr size_t kMaxRefused = 1024;

size_t AdoptMinBytes() {
  static const size_t value = EnvBytes("CONDUIT_ADOPT_MIN_BYTES", size_t{256} << 10);
  return value;
}

size_t AdoptMaxBytes() {
  static const size_t value = EnvBytes("CONDUIT_ADOPT_MAX_BYTES", size_t{1} << 30);
  return value;
}

// The live region named `id`, or null (g_mu held). The table is keyed by address; a scan
// is enough for the calls by id, which come only on attach and after a free.
const Region* LiveRegion(uint64_t id) {
  for (const auto& [start, region] : g_regions) {
    if (region->id == id) return region.get();
  }
  return nullptr;
}

// Removes a region from the table (g_mu held): connections that attached it release it
// at their next group (RegionFrees).
RegionIt Forget(RegionIt it) {
  if (it->second->adopted) {
    g_adopted_bytes -= it->second->Size();
    --g_adopted_count;
  }
  ++g_frees;
  g_refused.clear();
  return g_regions.erase(it);
}

// The same for a region the process keeps running on (g_mu held). An adopted region's
// pages may be the memfd's still in part (the heap trimmed above them, part of them
// unmapped, shrunk or mprotect'ed, a larger buffer that superseded the region not
// remapping its first page): they become private (UnsharePagesLeft), or a child forked
// later would share them with this process.
RegionIt Drop(RegionIt it) {
  if (it->second->adopted) UnsharePagesLeft(*it->second->adopted);
  return Forget(it);
}

// Drops the adopted regions whose pages the program no longer has (g_mu held).
void DropGoneAdoptions() {
  for (auto it = g_regions.begin(); it != g_regions.end();) {
    it = it->second->adopted && !StillAdopted(*it->second->adopted) ? Drop(it) : std::next(it);
  }
}

// The region holding program bytes [at, at + bytes), or end (g_mu held). With `check`, an
// adopted one whose pages the program no longer has is dropped (one system call); without,
// for a region found that way earlier in the same NCCL call.
std::map<uintptr_t, std::unique_ptr<Region>>::iterator Holding(uintptr_t at, size_t bytes, bool check) {
  auto it = g_regions.upper_bound(at);
  if (it == g_regions.begin()) return g_regions.end();
  --it;
  const uint64_t offset = at - it->first;
  const size_t size = it->second->Size();
  if (offset > size || bytes > size - offset) return g_regions.end();
  if (check && it->second->adopted && !StillAdopted(*it->second->adopted)) {
    Drop(it);
    return g_regions.end();
  }
  return it;
}

// fork: no thread may hold the table while the child copies it, and the child gives every
// adopted page range back its own private pages (a forked child does not share the
// parent's heap): those still the memfd's, not what the program unmapped or mapped there
// since the last look (ReprivatizePages asks the kernel). The child of a threaded parent
// runs only this thread: system calls and memcpy, and glibc's free (its fork makes malloc
// usable again before the child's handlers run) when the table forgets the regions.
void LockBeforeFork() { g_mu.lock(); }
void UnlockInParent() { g_mu.unlock(); }
void ReprivatizeInTheChild() {
  for (auto it = g_regions.begin(); it != g_regions.end();) {
    if (it->second->adopted) {
      ReprivatizePages(*it->second->adopted);
      it = Forget(it);
    } else {
      ++it;
    }
  }
  g_mu.unlock();
}

// The fork handlers, registered once, before the first adoption: a fork between a remap
// and them would give the child the parent's pages. Not under g_mu (pthread_atfork takes
// the C library's fork lock).
bool RegisterForkHandlers() {
  return pthread_atfork(LockBeforeFork, UnlockInParent, ReprivatizeInTheChild) == 0;
}

}  // namespace

Status AllocateRegion(size_t bytes, void** out) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  if (bytes > SIZE_MAX - page) return InvalidArgument("cannot allocate %zu bytes", bytes);
  const size_t size = (bytes + page - 1) / page * page;
  auto region = std::make_unique<Region>();
  CONDUIT_RETURN_IF_ERROR(region->map.Create("conduit-ncclMemAlloc", size, &region->fd));
  std::lock_guard<std::mutex> lock(g_mu);
  region->id = g_next_id++;
  *out = region->map.data();
  g_regions[region->Start()] = std::move(region);
  return Status::Ok();
}

bool FreeRegion(void* p) {
  std::unique_ptr<Region> gone;
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_regions.find(reinterpret_cast<uintptr_t>(p));
  if (it == g_regions.end() || it->second->adopted) return false;
  gone = std::move(it->second);  // unmapped once the lock is released
  g_regions.erase(it);
  ++g_frees;
  g_refused.clear();
  return true;
}

bool FindRegion(const void* p, size_t bytes, RegionSpan* out) {
  const uintptr_t at = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = Holding(at, bytes, /*check=*/true);
  if (it == g_regions.end()) return false;
  *out = RegionSpan{it->second->id, at - it->first, it->second->Size(), it->second->adopted != nullptr};
  return true;
}

bool AdoptionEnabled() {
  static const bool enabled = [] {
    const char* v = getenv("CONDUIT_ADOPT_HOST_BUFFERS");
    return v != nullptr && strcmp(v, "1") == 0 && PageAdoptionSupported() && RegisterForkHandlers();
  }();
  return enabled;
}

Status AdoptRegion(const void* p, size_t bytes, RegionSpan* out) {
  // First, before g_mu: the fork handlers are registered then (RegisterForkHandlers).
  if (!AdoptionEnabled()) return NotFound("adoption is off ($CONDUIT_ADOPT_HOST_BUFFERS, Linux 6.11)");
  if (bytes < AdoptMinBytes()) return NotFound("%zu bytes is under $CONDUIT_ADOPT_MIN_BYTES", bytes);
  const uintptr_t at = reinterpret_cast<uintptr_t>(p);
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  if (bytes > UINTPTR_MAX - at - page) return InvalidArgument("a buffer of %zu bytes at %p wraps", bytes, p);
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_refused.count({at, bytes}) != 0) return NotFound("refused before");
  auto refuse = [&](Status why) {
    if (g_refused.size() >= kMaxRefused) g_refused.clear();
    g_refused.insert({at, bytes});
    return why;
  };
  // Its pages, whole: no region may share one (regions' ranges never overlap), but
  // adopted regions that lie wholly inside it give way to it (a buffer used first in part,
  // then whole).
  const uintptr_t first = at & ~(page - 1), last = (at + bytes + page - 1) & ~(page - 1);
  std::vector<uintptr_t> superseded;
  std::vector<uint64_t> inodes;
  size_t superseded_bytes = 0;
  DropGoneAdoptions();
  for (const auto& [start, r] : g_regions) {
    const uintptr_t end = start + r->Size();
    if (start >= last || first >= end) continue;
    if (!r->adopted || start < first || end > last) {
      return refuse(InvalidUsage("the buffer shares pages with another region"));
    }
    superseded.push_back(start);
    inodes.push_back(r->adopted->inode);
    superseded_bytes += r->Size();
  }
  if (g_adopted_count - superseded.size() >= kMaxAdoptedRegions) {
    return InvalidUsage("%zu buffers are adopted already, the most at once", g_adopted_count);
  }
  if (g_adopted_bytes - superseded_bytes + (last - first) > AdoptMaxBytes()) {
    return InvalidUsage("adopting %zu more bytes would pass $CONDUIT_ADOPT_MAX_BYTES (%zu adopted)",
                        static_cast<size_t>(last - first), static_cast<size_t>(g_adopted_bytes));
  }
  auto region = std::make_unique<Region>();
  region->adopted = std::make_unique<AdoptedPages>();
  Status st = AdoptPages(p, bytes, region->adopted.get(), inodes);
  if (!st.ok()) return refuse(st);
  for (uintptr_t start : superseded) Drop(g_regions.find(start));
  region->id = g_next_id++;
  g_adopted_bytes += region->Size();
  ++g_adopted_count;
  *out = RegionSpan{region->id, at - region->Start(), region->Size(), true};
  g_regions[region->Start()] = std::move(region);
  return Status::Ok();
}

void SweepAdoptedRegions() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_adopted_count == 0) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - g_last_sweep < std::chrono::milliseconds(100)) return;
  g_last_sweep = now;
  DropGoneAdoptions();
}

void RegionEdgesIn(const void* p, size_t bytes) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = Holding(reinterpret_cast<uintptr_t>(p), bytes, /*check=*/false);
  if (it != g_regions.end() && it->second->adopted) CopyEdgesIn(*it->second->adopted, p, bytes);
}

void RegionEdgesOut(void* p, size_t bytes) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = Holding(reinterpret_cast<uintptr_t>(p), bytes, /*check=*/false);
  if (it != g_regions.end() && it->second->adopted) CopyEdgesOut(*it->second->adopted, p, bytes);
}

UniqueFd RegionFd(uint64_t id) {
  std::lock_guard<std::mutex> lock(g_mu);
  const Region* region = LiveRegion(id);
  UniqueFd dup;
  if (region == nullptr || !DupFd(region->Fd(), "a host region", &dup).ok()) return UniqueFd();
  return dup;
}

bool RegionLive(uint64_t id) {
  std::lock_guard<std::mutex> lock(g_mu);
  return LiveRegion(id) != nullptr;
}

uint64_t RegionFrees() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_frees;
}

bool RegionsEnabled() {
  static const bool enabled = [] {
    const char* v = getenv("CONDUIT_HOST_REGIONS");
    return v == nullptr || strcmp(v, "0") != 0;
  }();
  return enabled;
}

}  // namespace conduit
