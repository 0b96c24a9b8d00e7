#include "host_regions.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>

#include "common/shm_segment.h"

namespace conduit {
namespace {

struct Region {
  uint64_t id = 0;
  ShmSegment map;
  UniqueFd fd;
};

std::mutex g_mu;
std::map<uintptr_t, std::unique_ptr<Region>> g_regions;  // by start address
uint64_t g_next_id = 1;
uint64_t g_frees = 0;

// The live region named `id`, or null (g_mu held). The table is keyed by address; a scan
// is enough for the calls by id, which come only on attach and after a free.
const Region* LiveRegion(uint64_t id) {
  for (const auto& [start, region] : g_regions) {
    if (region->id == id) return region.get();
  }
  return nullptr;
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
  g_regions[reinterpret_cast<uintptr_t>(region->map.data())] = std::move(region);
  return Status::Ok();
}

bool FreeRegion(void* p) {
  std::unique_ptr<Region> gone;
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_regions.find(reinterpret_cast<uintptr_t>(p));
  if (it == g_regions.end()) return false;
  gone = std::move(it->second);
  g_regions.erase(it);
  ++g_frees;
  return true;
}

bool FindRegion(const void* p, size_t bytes, RegionSpan* out) {
  const uintptr_t at = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_regions.upper_bound(at);
  if (it == g_regions.begin()) return false;
  --it;
  const uint64_t offset = at - it->first;
  const uint64_t size = it->second->map.size();
  if (offset > size || bytes > size - offset) return false;
  *out = RegionSpan{it->second->id, offset, size};
  return true;
}

UniqueFd RegionFd(uint64_t id) {
  std::lock_guard<std::mutex> lock(g_mu);
  const Region* region = LiveRegion(id);
  UniqueFd dup;
  if (region == nullptr || !DupFd(region->fd.get(), "a host region", &dup).ok()) return UniqueFd();
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
