#include "double_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "double_errors.h"
#include "double_streams.h"

namespace cuda_double {
namespace {

using conduit::cuda::IpcMemHandle;

enum class Kind { kDevice, kPinned, kOpened, kMapped };

struct Region {
  Kind kind = Kind::kDevice;
  uint64_t base = 0;  // the address programs see
  size_t size = 0;    // as requested
  size_t mapped = 0;  // whole pages
  uint8_t* rw = nullptr;
  SharedFile file;  // device memory: the memfd (owner) or -1 (opened)
  uint64_t buffer_id = 0;
  int device = -1;
  CUcontext context = nullptr;
  std::pair<int, uint64_t> source{0, 0};  // opened: owner pid and inode
};

// The handle's 64 bytes.
struct MemHandle {
  uint32_t magic;
  int32_t pid;
  int32_t fd;
  int32_t device;
  uint64_t inode;
  uint64_t size;
};
static_assert(sizeof(MemHandle) <= sizeof(IpcMemHandle));
constexpr uint32_t kMemMagic = 0x4d424443;  // "CDBM"

struct Memory {
  std::mutex mu;
  std::map<uint64_t, Region> by_base;
  std::set<std::pair<int, uint64_t>> opened;  // (pid, inode) mapped here through IPC
};

Memory& State() {
  static auto* state = new Memory;  // never destroyed: streams may still run at exit
  return *state;
}

std::atomic<uint64_t> g_next_buffer_id{1};  // as CUDA's: never reused in a process
// How long a free waits for queued work before it leaves the memory mapped instead.
constexpr int kFreeWaitMs = 10000;

size_t Pages(size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}

// The region holding ptr, or nullptr. Caller holds mu.
Region* Find(Memory& m, uint64_t ptr) {
  auto it = m.by_base.upper_bound(ptr);
  if (it == m.by_base.begin()) return nullptr;
  --it;
  Region& r = it->second;
  return ptr < r.base + std::max<size_t>(r.size, 1) ? &r : nullptr;
}

// Maps `fd` as a device region: a PROT_NONE view at the address programs use and a
// read-write view for the double.
bool MapViews(int fd, size_t mapped, uint64_t* base, uint8_t** rw) {
  void* none = mmap(nullptr, mapped, PROT_NONE, MAP_SHARED, fd, 0);
  if (none == MAP_FAILED) return false;
  void* view = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (view == MAP_FAILED) {
    munmap(none, mapped);
    return false;
  }
  *base = reinterpret_cast<uint64_t>(none);
  *rw = static_cast<uint8_t*>(view);
  return true;
}

void Unmap(const Region& r) {
  if (r.kind == Kind::kPinned) {
    munmap(r.rw, r.mapped);
    return;
  }
  munmap(reinterpret_cast<void*>(r.base), r.mapped);
  munmap(r.rw, r.mapped);
  if (r.file.fd >= 0) close(r.file.fd);
}

// Removes the region that starts at `base` from the registry if it is of `kind` (an opened
// one from the set of opened handles too); false when there is none.
bool Take(uint64_t base, Kind kind, Region* out) {
  Memory& m = State();
  std::lock_guard<std::mutex> lock(m.mu);
  auto it = m.by_base.find(base);
  if (it == m.by_base.end() || it->second.kind != kind) return false;
  *out = it->second;
  if (kind == Kind::kOpened) m.opened.erase(out->source);
  m.by_base.erase(it);
  return true;
}

// cuMemFree / cuMemFreeHost. They wait for the device's work first, as cudaFree does:
// queued copies may use the memory. Work that never ends (a wait on an event nobody
// records) leaves the memory mapped.
CUresult Free(uint64_t base, Kind kind) {
  const bool idle = SynchronizeAllStreams(kFreeWaitMs);
  Region r;
  if (!Take(base, kind, &r)) return conduit::cuda::kErrorInvalidValue;
  if (idle) Unmap(r);
  return conduit::cuda::kSuccess;
}

}  // namespace

bool CreateSharedFile(const char* name, size_t bytes, SharedFile* out) {
  int fd = memfd_create(name, MFD_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0 || fstat(fd, &st) != 0) {
    close(fd);
    return false;
  }
  out->fd = fd;
  out->inode = st.st_ino;
  return true;
}

int OpenSharedFile(int pid, int fd, uint64_t inode) {
  const std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
  int opened = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (opened < 0) return -1;
  struct stat st {};
  if (fstat(opened, &st) != 0 || st.st_ino != inode) {  // freed, its fd number reused
    close(opened);
    return -1;
  }
  return opened;
}

CUresult AllocateDevice(size_t bytes, int device, CUcontext ctx, conduit::cuda::CUdeviceptr* out) {
  if (bytes == 0 || out == nullptr) return conduit::cuda::kErrorInvalidValue;
  Region r;
  r.kind = Kind::kDevice;
  r.size = bytes;
  r.mapped = Pages(bytes);
  if (!CreateSharedFile("cuda-double-device", r.mapped, &r.file)) return kErrorOutOfMemory;
  if (!MapViews(r.file.fd, r.mapped, &r.base, &r.rw)) {
    close(r.file.fd);
    return kErrorOutOfMemory;
  }
  r.buffer_id = g_next_buffer_id++;
  r.device = device;
  r.context = ctx;
  Memory& m = State();
  std::lock_guard<std::mutex> lock(m.mu);
  m.by_base[r.base] = r;
  *out = r.base;
  return conduit::cuda::kSuccess;
}

CUresult FreeDevice(uint64_t ptr) {
  if (ptr == 0) return conduit::cuda::kSuccess;
  return Free(ptr, Kind::kDevice);
}

CUresult AllocatePinned(size_t bytes, CUcontext ctx, void** out) {
  if (bytes == 0 || out == nullptr) return conduit::cuda::kErrorInvalidValue;
  Region r;
  r.kind = Kind::kPinned;
  r.size = bytes;
  r.mapped = Pages(bytes);
  void* p = mmap(nullptr, r.mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return kErrorOutOfMemory;
  r.base = reinterpret_cast<uint64_t>(p);
  r.rw = static_cast<uint8_t*>(p);
  r.buffer_id = g_next_buffer_id++;
  r.context = ctx;
  Memory& m = State();
  std::lock_guard<std::mutex> lock(m.mu);
  m.by_base[r.base] = r;
  *out = p;
  return conduit::cuda::kSuccess;
}

CUresult FreePinned(void* ptr) { return Free(reinterpret_cast<uint64_t>(ptr), Kind::kPinned); }

PointerFacts Describe(uint64_t ptr) {
  PointerFacts f;
  Memory& m = State();
  std::lock_guard<std::mutex> lock(m.mu);
  const Region* r = Find(m, ptr);
  if (r == nullptr) return f;
  f.memory_type = r->kind == Kind::kPinned ? conduit::cuda::kMemoryTypeHost : conduit::cuda::kMemoryTypeDevice;
  f.base = r->base;
  f.size = r->size;
  f.buffer_id = r->buffer_id;
  f.device = r->device;
  f.ipc_capable = r->kind == Kind::kDevice;  // kMapped: shared as file descriptors instead
  f.context = r->context;
  return f;
}

uint8_t* HostView(uint64_t ptr, size_t bytes) {
  Memory& m = State();
  std::lock_guard<std::mutex> lock(m.mu);
  const Region* r = Find(m, ptr);
  if (r == nullptr) return reinterpret_cast<uint8_t*>(ptr);
  uint8_t* view = r->rw + (ptr - r->base);
  // Virtual-memory mappings side by side (whose views are side by side too) are one range,
  // as on a GPU.
  uint64_t end = r->base + r->size;
  while (bytes > end - ptr && r->kind == Kind::kMapped) {
    auto next = m.by_base.find(end);
    if (next == m.by_base.end() || next->second.kind != Kind::kMapped || next->second.rw != r->rw + r->size) break;
    r = &next->second;
    end = r->base + r->size;
  }
  return bytes <= end - ptr ? view : nullptr;
}

CUresult ExportMemory(uint64_t base, IpcMemHandle* handle) {
  if (handle == nullptr) return conduit::cuda::kErrorInvalidValue;
  if (Injected("cuIpcGetMemHandle")) return kErrorNotSupported;
  Memory& m = State();
  std::lock_guard<std::mutex> lock(m.mu);
  const Region* r = Find(m, base);
  if (r == nullptr || r->kind != Kind::kDevice) return conduit::cuda::kErrorInvalidValue;
  MemHandle h{kMemMagic, static_cast<int32_t>(getpid()), r->file.fd, r->device, r->file.inode, r->size};
  memset(handle->reserved, 0, sizeof(handle->reserved));
  memcpy(handle->reserved, &h, sizeof(h));
  return conduit::cuda::kSuccess;
}

CUresult OpenMemory(const IpcMemHandle& handle, int device, CUcontext ctx, conduit::cuda::CUdeviceptr* out) {
  if (out == nullptr) return conduit::cuda::kErrorInvalidValue;
  if (Injected("cuIpcOpenMemHandle")) return kErrorNotSupported;
  MemHandle h;
  memcpy(&h, handle.reserved, sizeof(h));
  if (h.magic != kMemMagic || h.size == 0) return conduit::cuda::kErrorInvalidValue;
  if (h.pid == getpid()) return kErrorInvalidContext;  // CUDA refuses a process's own handle
  const std::pair<int, uint64_t> source{h.pid, h.inode};
  Memory& m = State();
  {
    std::lock_guard<std::mutex> lock(m.mu);
    if (m.opened.count(source)) return conduit::cuda::kErrorAlreadyMapped;
  }
  int fd = OpenSharedFile(h.pid, h.fd, h.inode);
  if (fd < 0) return conduit::cuda::kErrorInvalidValue;
  Region r;
  r.kind = Kind::kOpened;
  r.size = h.size;
  r.mapped = Pages(h.size);
  struct stat st {};
  if (fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) < r.mapped || !MapViews(fd, r.mapped, &r.base, &r.rw)) {
    close(fd);
    return conduit::cuda::kErrorInvalidValue;
  }
  close(fd);  // the mappings keep the memory
  r.buffer_id = g_next_buffer_id++;
  r.device = device;
  r.context = ctx;
  r.source = source;
  std::lock_guard<std::mutex> lock(m.mu);
  if (!m.opened.insert(source).second) {
    Unmap(r);
    return conduit::cuda::kErrorAlreadyMapped;
  }
  m.by_base[r.base] = r;
  *out = r.base;
  return conduit::cuda::kSuccess;
}

CUresult CloseMemory(uint64_t ptr) {
  // No implicit wait, as in CUDA: work still queued on the mapping faults (here: the
  // process crashes), which is what the tests must never see.
  Region r;
  if (!Take(ptr, Kind::kOpened, &r)) return conduit::cuda::kErrorInvalidValue;
  Unmap(r);
  return conduit::cuda::kSuccess;
}

void AddMapping(uint64_t base, size_t size, uint8_t* rw, int device, CUcontext ctx) {
  Region r;
  r.kind = Kind::kMapped;
  r.base = base;
  r.size = size;
  r.mapped = size;
  r.rw = rw;
  r.buffer_id = g_next_buffer_id++;
  r.device = device;
  r.context = ctx;
  Memory& m = State();
  std::lock_guard<std::mutex> lock(m.mu);
  m.by_base[base] = r;
}

bool RemoveMapping(uint64_t base, size_t size, uint8_t** rw) {
  Memory& m = State();
  std::lock_guard<std::mutex> lock(m.mu);
  auto it = m.by_base.find(base);
  if (it == m.by_base.end() || it->second.kind != Kind::kMapped || it->second.size != size) return false;
  *rw = it->second.rw;
  m.by_base.erase(it);
  return true;
}

bool AnyRegionIn(uint64_t base, size_t size) {
  Memory& m = State();
  std::lock_guard<std::mutex> lock(m.mu);
  auto it = m.by_base.lower_bound(base);
  if (it != m.by_base.end() && it->first < base + size) return true;
  return Find(m, base) != nullptr;
}

}  // namespace cuda_double
