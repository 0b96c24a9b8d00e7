// The driver entry points: exactly the list cuda/cuda_driver.h resolves (declared below
// from that list, so a signature that drifts does not compile, and the library is linked
// with --no-undefined), each with the CUDA behaviour Conduit relies on: a current context
// for allocations and streams, unified addressing (one pointer space for host and device
// memory), memory types and buffer ids per allocation, interprocess memory and events.
//
// Devices: $CONDUIT_CUDA_DOUBLE_DEVICES of them (default 1, at most 8), compute capability
// 9.0, 4 multiprocessors, MPS on, UUIDs that are the same in every process of a host.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "cuda/cuda_driver.h"
#include "double_errors.h"
#include "double_kernels.h"
#include "double_memory.h"
#include "double_streams.h"
#include "double_vmm.h"
#include "gpu_access.h"

using namespace conduit::cuda;  // NOLINT: the ABI's types, as cuda.h would give them

extern "C" {
#define CONDUIT_DOUBLE_DECLARE_(member, symbol, params) __attribute__((visibility("default"))) CUresult symbol params;
CONDUIT_CUDA_DRIVER_API(CONDUIT_DOUBLE_DECLARE_)
#undef CONDUIT_DOUBLE_DECLARE_
}

namespace cuda_double {
namespace {

constexpr int kMaxDevices = 8;
constexpr int kDriverVersion = 13000;

struct DeviceContext {
  int device;
};
DeviceContext g_contexts[kMaxDevices] = {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}};

std::atomic<bool> g_initialized{false};
std::mutex g_peer_mu;
std::set<std::pair<int, int>> g_peer_enabled;

// The thread's context stack. Trivially destructible on purpose: a thread_local with a
// destructor in a dlopen'ed library runs it at thread exit, racing glibc's own TLS release.
// And initial-exec: in the static TLS block glibc reserves for dlopen'ed libraries, so no
// thread allocates dynamic TLS for it on first use. That allocation and its release at
// thread exit happen under the dynamic linker's locks, which TSan does not see: it reported
// them as races in conduitd (tests/tsan.supp), and a report halts the daemon under the
// sanitizer. 16 * 8 + 4 bytes of the 512 glibc reserves.
constexpr int kMaxContextDepth = 16;
__attribute__((tls_model("initial-exec"))) thread_local CUcontext t_context_stack[kMaxContextDepth];
__attribute__((tls_model("initial-exec"))) thread_local int t_context_depth = 0;

// Primary context references per device, and where each change is written
// ($CONDUIT_CUDA_DOUBLE_CONTEXT_LOG: "<device> <references>" lines), so a test can see
// which GPUs a process holds contexts on.
std::atomic<int> g_retained[kMaxDevices];

void NoteRetained(int device, int references) {
  const char* path = std::getenv("CONDUIT_CUDA_DOUBLE_CONTEXT_LOG");
  if (path == nullptr) return;
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  char line[32];
  const int n = snprintf(line, sizeof(line), "%d %d\n", device, references);
  if (n > 0) (void)!write(fd, line, static_cast<size_t>(n));
  close(fd);
}

// Every cuMemcpyAsync, as "copy <to> <from> <bytes>" lines ($CONDUIT_CUDA_DOUBLE_COPY_LOG;
// kinds: device, host for page-locked or registered host memory, pageable), so a test can
// count what a program's staged buffers cost it in copies.
const char* MemoryKindName(unsigned memory_type) {
  return memory_type == kMemoryTypeDevice ? "device" : memory_type == kMemoryTypeHost ? "host" : "pageable";
}

void NoteCopy(unsigned to, unsigned from, size_t bytes) {
  const char* path = std::getenv("CONDUIT_CUDA_DOUBLE_COPY_LOG");
  if (path == nullptr) return;
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  char line[64];
  const int n = snprintf(line, sizeof(line), "copy %s %s %zu\n", MemoryKindName(to), MemoryKindName(from), bytes);
  if (n > 0) (void)!write(fd, line, static_cast<size_t>(n));  // one write: lines of threads never interleave
  close(fd);
}

int DeviceCount() {
  static const int count = [] {
    const char* env = std::getenv("CONDUIT_CUDA_DOUBLE_DEVICES");
    int n = env != nullptr ? std::atoi(env) : 1;
    return n < 0 ? 0 : n > kMaxDevices ? kMaxDevices : n;
  }();
  return count;
}

CUcontext ContextOf(int device) { return reinterpret_cast<CUcontext>(&g_contexts[device]); }

// The device of a context the double handed out, or -1.
int DeviceOf(CUcontext ctx) {
  for (int d = 0; d < DeviceCount(); ++d) {
    if (ctx == ContextOf(d)) return d;
  }
  return -1;
}

CUcontext Current() { return t_context_depth == 0 ? nullptr : t_context_stack[t_context_depth - 1]; }

Event* AsEvent(CUevent e) { return reinterpret_cast<Event*>(e); }

struct ErrorText {
  CUresult code;
  const char* name;
  const char* text;
};
constexpr ErrorText kErrors[] = {
    {kSuccess, "CUDA_SUCCESS", "no error"},
    {kErrorInvalidValue, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {kErrorOutOfMemory, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {kErrorNotInitialized, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {kErrorNoDevice, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {kErrorInvalidDevice, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {kErrorInvalidImage, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {kErrorInvalidContext, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {kErrorAlreadyMapped, "CUDA_ERROR_ALREADY_MAPPED", "resource already mapped"},
    {kErrorInvalidHandle, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {kErrorNotFound, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {kErrorNotReady, "CUDA_ERROR_NOT_READY", "device not ready"},
    {kErrorIllegalAddress, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {kErrorPeerAccessAlreadyEnabled, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED",
     "peer access is already enabled"},
    {kErrorNotSupported, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
};

const ErrorText* FindError(CUresult r) {
  for (const ErrorText& e : kErrors) {
    if (e.code == r) return &e;
  }
  return nullptr;
}

// Stream and context of a stream-taking call.
CUresult StreamFor(CUstream handle, Stream** out) {
  *out = ResolveStream(handle, Current());
  if (*out != nullptr) return kSuccess;
  return handle == nullptr || handle == LegacyStream() || handle == PerThreadStream() ? kErrorInvalidContext
                                                                                      : kErrorInvalidHandle;
}

// One pointer attribute of `f` into `data`.
CUresult WriteAttribute(const PointerFacts& f, int attribute, void* data) {
  switch (attribute) {
    case kPointerAttributeContext: *static_cast<CUcontext*>(data) = f.context; return kSuccess;
    case kPointerAttributeMemoryType: *static_cast<unsigned*>(data) = f.memory_type; return kSuccess;
    case kPointerAttributeBufferId: *static_cast<unsigned long long*>(data) = f.buffer_id; return kSuccess;
    case kPointerAttributeIsManaged: *static_cast<unsigned*>(data) = 0; return kSuccess;
    case kPointerAttributeDeviceOrdinal: *static_cast<int*>(data) = f.device; return kSuccess;
    case kPointerAttributeIsLegacyIpcCapable: *static_cast<unsigned*>(data) = f.ipc_capable ? 1 : 0; return kSuccess;
    case kPointerAttributeRangeStartAddr: *static_cast<CUdeviceptr*>(data) = f.base; return kSuccess;
    case kPointerAttributeRangeSize: *static_cast<size_t*>(data) = f.size; return kSuccess;
    default: return kErrorInvalidValue;
  }
}

}  // namespace

bool Injected(const char* entry) {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    const char* env = std::getenv("CONDUIT_CUDA_DOUBLE_FAIL");
    std::string_view list = env != nullptr ? env : "";
    while (!list.empty()) {
      const size_t comma = list.find(',');
      out.emplace_back(list.substr(0, comma));
      if (comma == std::string_view::npos) break;
      list.remove_prefix(comma + 1);
    }
    return out;
  }();
  for (const std::string& name : names) {
    if (name == entry) return true;
  }
  return false;
}

}  // namespace cuda_double

using namespace cuda_double;  // NOLINT

#define CONDUIT_DOUBLE_REQUIRE_INIT() \
  if (!g_initialized) return kErrorNotInitialized

CUresult cuInit(unsigned flags) {
  if (flags != 0) return kErrorInvalidValue;
  g_initialized = true;
  return kSuccess;
}

CUresult cuDriverGetVersion(int* version) {
  if (version == nullptr) return kErrorInvalidValue;
  *version = kDriverVersion;
  return kSuccess;
}

CUresult cuGetErrorName(CUresult error, const char** name) {
  const ErrorText* e = FindError(error);
  if (name == nullptr || e == nullptr) return kErrorInvalidValue;
  *name = e->name;
  return kSuccess;
}

CUresult cuGetErrorString(CUresult error, const char** text) {
  const ErrorText* e = FindError(error);
  if (text == nullptr || e == nullptr) return kErrorInvalidValue;
  *text = e->text;
  return kSuccess;
}

CUresult cuDeviceGetCount(int* count) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  if (count == nullptr) return kErrorInvalidValue;
  *count = DeviceCount();
  return kSuccess;
}

CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  if (device == nullptr) return kErrorInvalidValue;
  if (ordinal < 0 || ordinal >= DeviceCount()) return kErrorInvalidDevice;
  *device = ordinal;
  return kSuccess;
}

CUresult cuDeviceGetAttribute(int* value, int attribute, CUdevice device) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  if (value == nullptr) return kErrorInvalidValue;
  if (device < 0 || device >= DeviceCount()) return kErrorInvalidDevice;
  switch (attribute) {
    case kDeviceAttributeMultiprocessorCount: *value = 4; break;
    case kDeviceAttributeUnifiedAddressing: *value = 1; break;
    case kDeviceAttributeComputeCapabilityMajor: *value = 9; break;
    case kDeviceAttributeComputeCapabilityMinor: *value = 0; break;
    case kDeviceAttributeMpsEnabled: *value = 1; break;
    default: *value = 0; break;
  }
  return kSuccess;
}

CUresult cuDeviceGetUuid_v2(Uuid* uuid, CUdevice device) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  if (uuid == nullptr) return kErrorInvalidValue;
  if (device < 0 || device >= DeviceCount()) return kErrorInvalidDevice;
  static const char kPrefix[] = "cuda-double-gpu";  // 15 bytes, then the ordinal
  memcpy(uuid->bytes, kPrefix, sizeof(kPrefix) - 1);
  uuid->bytes[15] = static_cast<char>('0' + device);
  return kSuccess;
}

CUresult cuDeviceCanAccessPeer(int* can, CUdevice device, CUdevice peer) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  if (can == nullptr) return kErrorInvalidValue;
  if (device < 0 || device >= DeviceCount() || peer < 0 || peer >= DeviceCount()) return kErrorInvalidDevice;
  *can = device != peer ? 1 : 0;
  return kSuccess;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice device) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  if (ctx == nullptr) return kErrorInvalidValue;
  if (device < 0 || device >= DeviceCount()) return kErrorInvalidDevice;
  *ctx = ContextOf(device);
  NoteRetained(device, ++g_retained[device]);
  return kSuccess;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice device) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  if (device < 0 || device >= DeviceCount()) return kErrorInvalidDevice;
  if (g_retained[device] == 0) return kErrorInvalidContext;
  NoteRetained(device, --g_retained[device]);
  return kSuccess;
}

CUresult cuCtxGetCurrent(CUcontext* ctx) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  if (ctx == nullptr) return kErrorInvalidValue;
  *ctx = Current();
  return kSuccess;
}

CUresult cuCtxSetCurrent(CUcontext ctx) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  if (ctx != nullptr && DeviceOf(ctx) < 0) return kErrorInvalidContext;
  if (t_context_depth == 0) {
    if (ctx != nullptr) t_context_stack[t_context_depth++] = ctx;
  } else if (ctx == nullptr) {
    --t_context_depth;
  } else {
    t_context_stack[t_context_depth - 1] = ctx;
  }
  return kSuccess;
}

CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  if (DeviceOf(ctx) < 0) return kErrorInvalidContext;
  if (t_context_depth == kMaxContextDepth) return kErrorInvalidValue;
  t_context_stack[t_context_depth++] = ctx;
  return kSuccess;
}

CUresult cuCtxPopCurrent_v2(CUcontext* ctx) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  if (t_context_depth == 0) return kErrorInvalidContext;
  --t_context_depth;
  if (ctx != nullptr) *ctx = t_context_stack[t_context_depth];
  return kSuccess;
}

CUresult cuCtxGetDevice(CUdevice* device) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  if (device == nullptr) return kErrorInvalidValue;
  const int d = DeviceOf(Current());
  if (d < 0) return kErrorInvalidContext;
  *device = d;
  return kSuccess;
}

CUresult cuCtxEnablePeerAccess(CUcontext peer, unsigned flags) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  const int self = DeviceOf(Current());
  const int other = DeviceOf(peer);
  if (self < 0 || other < 0 || self == other) return kErrorInvalidContext;
  if (flags != 0) return kErrorInvalidValue;
  std::lock_guard<std::mutex> lock(g_peer_mu);
  return g_peer_enabled.insert({self, other}).second ? kSuccess : kErrorPeerAccessAlreadyEnabled;
}

CUresult cuPointerGetAttribute(void* data, int attribute, CUdeviceptr ptr) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  if (data == nullptr) return kErrorInvalidValue;
  const PointerFacts f = Describe(ptr);
  if (f.memory_type == 0) return kErrorInvalidValue;  // as CUDA: not memory it knows
  return WriteAttribute(f, attribute, data);
}

CUresult cuPointerGetAttributes(unsigned count, int* attributes, void** data, CUdeviceptr ptr) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  if (attributes == nullptr || data == nullptr) return kErrorInvalidValue;
  // Unknown pointers are not an error here: memory type 0 and every other value zero.
  const PointerFacts f = Describe(ptr);
  for (unsigned i = 0; i < count; ++i) {
    if (data[i] == nullptr) return kErrorInvalidValue;
    CUresult r = WriteAttribute(f, attributes[i], data[i]);
    if (r != kSuccess) return r;
  }
  return kSuccess;
}

CUresult cuMemGetAddressRange_v2(CUdeviceptr* base, size_t* size, CUdeviceptr ptr) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  const PointerFacts f = Describe(ptr);
  if (f.memory_type != kMemoryTypeDevice) return kErrorNotFound;
  if (base != nullptr) *base = f.base;
  if (size != nullptr) *size = f.size;
  return kSuccess;
}

CUresult cuMemAlloc_v2(CUdeviceptr* ptr, size_t bytes) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  const int device = DeviceOf(Current());
  if (device < 0) return kErrorInvalidContext;
  return AllocateDevice(bytes, device, Current(), ptr);
}

CUresult cuMemFree_v2(CUdeviceptr ptr) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  return FreeDevice(ptr);
}

CUresult cuMemHostAlloc(void** ptr, size_t bytes, unsigned flags) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  if ((flags & ~(kMemHostAllocPortable | kMemHostAllocDeviceMap)) != 0) return kErrorInvalidValue;
  if (Current() == nullptr) return kErrorInvalidContext;
  return AllocatePinned(bytes, Current(), ptr);
}

CUresult cuMemFreeHost(void* ptr) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  return FreePinned(ptr);
}

CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr* dptr, void* host, unsigned flags) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  if (dptr == nullptr || flags != 0) return kErrorInvalidValue;
  if (Describe(reinterpret_cast<CUdeviceptr>(host)).memory_type != kMemoryTypeHost) return kErrorInvalidValue;
  *dptr = reinterpret_cast<CUdeviceptr>(host);  // unified addressing: the same address
  return kSuccess;
}

CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream handle) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  Stream* stream = nullptr;
  CUresult r = StreamFor(handle, &stream);
  if (r != kSuccess) return r;
  if (bytes == 0) return kSuccess;
  uint8_t* to = HostView(dst, bytes);
  uint8_t* from = HostView(src, bytes);
  if (to == nullptr || from == nullptr) return kErrorInvalidValue;
  const unsigned src_type = Describe(src).memory_type;
  const unsigned dst_type = Describe(dst).memory_type;
  const bool pageable_src = src_type == 0;
  const bool pageable_dst = dst_type == 0;
  const bool device_dst = dst_type == kMemoryTypeDevice;
  NoteCopy(dst_type, src_type, bytes);
  if (pageable_src) {
    // CUDA copies pageable memory to a staging buffer before returning: the caller may
    // reuse the source at once.
    auto copy = std::make_shared<std::vector<uint8_t>>(from, from + bytes);
    stream->Enqueue([to, copy, device_dst] {
      GpuAccess gpu(false, device_dst);
      memcpy(to, copy->data(), copy->size());
      return kSuccess;
    });
  } else {
    const bool device_src = src_type == kMemoryTypeDevice;
    stream->Enqueue([to, from, bytes, device_src, device_dst] {
      GpuAccess gpu(device_src, device_dst);
      memmove(to, from, bytes);
      return kSuccess;
    });
  }
  // And into pageable memory it returns only once the copy is done.
  return pageable_dst && !pageable_src ? stream->Synchronize() : kSuccess;
}

CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t n, CUstream handle) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  Stream* stream = nullptr;
  CUresult r = StreamFor(handle, &stream);
  if (r != kSuccess) return r;
  uint8_t* to = HostView(dst, n);
  if (to == nullptr || Describe(dst).memory_type == 0) return kErrorInvalidValue;
  stream->Enqueue([to, value, n] {
    GpuAccess gpu(false, true);  // device memory (checked above)
    memset(to, value, n);
    return kSuccess;
  });
  return kSuccess;
}

CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr addr, unsigned long long flags) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  if (addr != 0 || flags != 0) return kErrorInvalidValue;  // no address hints here
  return ReserveAddresses(size, alignment, ptr);
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  return FreeAddresses(ptr, size);
}

CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size, const MemAllocationProp* prop,
                     unsigned long long flags) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  if (prop == nullptr || flags != 0 || prop->type != kMemAllocationTypePinned ||
      prop->location.type != kMemLocationTypeDevice || prop->location.id < 0 || prop->location.id >= DeviceCount()) {
    return kErrorInvalidValue;
  }
  return CreateAllocation(size, prop->location.id, prop->requested_handle_types, handle);
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  return ReleaseAllocation(handle);
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  if (offset != 0 || flags != 0) return kErrorInvalidValue;  // as CUDA: offset must be zero
  const int device = DeviceOf(Current());
  return MapAllocation(ptr, size, handle, device < 0 ? 0 : device, device < 0 ? ContextOf(0) : Current());
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  return UnmapAllocation(ptr, size);
}

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const MemAccessDesc* desc, size_t count) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  if (desc == nullptr || count == 0) return kErrorInvalidValue;
  for (size_t i = 0; i < count; ++i) {
    if (desc[i].location.type != kMemLocationTypeDevice || desc[i].location.id < 0 ||
        desc[i].location.id >= DeviceCount()) {
      return kErrorInvalidDevice;
    }
  }
  for (size_t i = 0; i < count; ++i) {
    if (CUresult r = SetAccess(ptr, size, desc[i].location.id, desc[i].flags); r != kSuccess) return r;
  }
  return kSuccess;
}

CUresult cuMemGetAccess(unsigned long long* flags, const MemLocation* location, CUdeviceptr ptr) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  if (location == nullptr || location->type != kMemLocationTypeDevice || location->id < 0 ||
      location->id >= DeviceCount()) {
    return kErrorInvalidDevice;
  }
  return GetAccess(ptr, location->id, flags);
}

CUresult cuMemExportToShareableHandle(void* shareable, CUmemGenericAllocationHandle handle, int handle_type,
                                      unsigned long long flags) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  if (shareable == nullptr || flags != 0 || handle_type != kMemHandleTypePosixFileDescriptor) return kErrorInvalidValue;
  return ExportAllocation(handle, static_cast<int*>(shareable));
}

CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle, void* os_handle, int handle_type) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  if (handle_type != kMemHandleTypePosixFileDescriptor) return kErrorInvalidValue;
  // A POSIX descriptor travels in the pointer's bits, as cuda.h documents.
  return ImportAllocation(static_cast<int>(reinterpret_cast<intptr_t>(os_handle)), handle);
}

CUresult cuMemGetAllocationGranularity(size_t* granularity, const MemAllocationProp* prop, int option) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  if (granularity == nullptr || prop == nullptr || option < 0 || option > 1) return kErrorInvalidValue;
  *granularity = kVmmGranularity;
  return kSuccess;
}

CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* addr) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  return RetainAllocation(reinterpret_cast<uint64_t>(addr), handle);
}

CUresult cuIpcGetMemHandle(IpcMemHandle* handle, CUdeviceptr ptr) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  return ExportMemory(ptr, handle);
}

CUresult cuIpcOpenMemHandle_v2(CUdeviceptr* ptr, IpcMemHandle handle, unsigned flags) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  const int device = DeviceOf(Current());
  if (device < 0) return kErrorInvalidContext;
  if ((flags & ~kIpcMemLazyEnablePeerAccess) != 0) return kErrorInvalidValue;
  return OpenMemory(handle, device, Current(), ptr);
}

CUresult cuIpcCloseMemHandle(CUdeviceptr ptr) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  return CloseMemory(ptr);
}

CUresult cuIpcGetEventHandle(IpcEventHandle* handle, CUevent event) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  if (handle == nullptr || event == nullptr) return kErrorInvalidValue;
  if (Injected("cuIpcGetEventHandle")) return kErrorNotSupported;
  return AsEvent(event)->Export(handle);
}

CUresult cuIpcOpenEventHandle(CUevent* event, IpcEventHandle handle) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  if (event == nullptr) return kErrorInvalidValue;
  Event* e = nullptr;
  CUresult r = Event::Open(handle, Current(), &e);
  if (r == kSuccess) *event = reinterpret_cast<CUevent>(e);
  return r;
}

CUresult cuEventCreate(CUevent* event, unsigned flags) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  if (event == nullptr || (flags & ~(kEventDisableTiming | kEventInterprocess | 0x1u)) != 0) return kErrorInvalidValue;
  const bool interprocess = (flags & kEventInterprocess) != 0;
  // As in CUDA: an interprocess event must have timing disabled.
  if (interprocess && (flags & kEventDisableTiming) == 0) return kErrorInvalidValue;
  Event* e = nullptr;
  CUresult r = Event::Create(Current(), interprocess, &e);
  if (r == kSuccess) *event = reinterpret_cast<CUevent>(e);
  return r;
}

CUresult cuEventDestroy_v2(CUevent event) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  if (event == nullptr) return kErrorInvalidHandle;
  delete AsEvent(event);  // queued work holds the counters, not the event
  return kSuccess;
}

CUresult cuEventRecord(CUevent event, CUstream handle) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  if (event == nullptr) return kErrorInvalidHandle;
  Stream* stream = nullptr;
  CUresult r = StreamFor(handle, &stream);
  if (r != kSuccess) return r;
  AsEvent(event)->Record(*stream);
  return kSuccess;
}

CUresult cuEventQuery(CUevent event) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  if (event == nullptr) return kErrorInvalidHandle;
  return AsEvent(event)->Query();
}

CUresult cuStreamCreate(CUstream* stream, unsigned flags) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  if (stream == nullptr || (flags & ~kStreamNonBlocking) != 0) return kErrorInvalidValue;
  if (Current() == nullptr) return kErrorInvalidContext;
  *stream = RegisterStream(new Stream(Current()));
  return kSuccess;
}

CUresult cuStreamDestroy_v2(CUstream stream) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  return DestroyStream(stream);
}

CUresult cuStreamWaitEvent(CUstream handle, CUevent event, unsigned flags) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  if (event == nullptr) return kErrorInvalidHandle;
  if (flags != 0) return kErrorInvalidValue;
  Stream* stream = nullptr;
  CUresult r = StreamFor(handle, &stream);
  if (r != kSuccess) return r;
  AsEvent(event)->WaitOn(*stream);
  return kSuccess;
}

CUresult cuStreamSynchronize(CUstream handle) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  Stream* stream = nullptr;
  CUresult r = StreamFor(handle, &stream);
  return r != kSuccess ? r : stream->Synchronize();
}

CUresult cuStreamQuery(CUstream handle) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  Stream* stream = nullptr;
  CUresult r = StreamFor(handle, &stream);
  return r != kSuccess ? r : stream->Query();
}

// Stream memory operations on a 32-bit word of device (or pinned) memory, which another
// process may share through IPC: the wait polls it, as the GPU's front end does.

// The double's view of the aligned word at `addr` in memory it knows, else nullptr.
static uint32_t* MemOpWord(CUdeviceptr addr) {
  if (addr % sizeof(uint32_t) != 0 || Describe(addr).memory_type == 0) return nullptr;
  return reinterpret_cast<uint32_t*>(HostView(addr, sizeof(uint32_t)));
}

CUresult cuStreamWaitValue32_v2(CUstream handle, CUdeviceptr addr, unsigned value, unsigned flags) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  if (Injected("cuStreamWaitValue32")) return kErrorNotSupported;
  Stream* stream = nullptr;
  CUresult r = StreamFor(handle, &stream);
  if (r != kSuccess) return r;
  uint32_t* word = MemOpWord(addr);
  if (word == nullptr || flags > 3) return kErrorInvalidValue;
  stream->Enqueue([word, value, flags] {
    std::atomic_ref<uint32_t> w(*word);
    auto met = [&] {
      const uint32_t v = w.load();
      switch (flags) {
        case 0: return static_cast<int32_t>(v - value) >= 0;  // GEQ
        case 1: return v == value;                             // EQ
        case 2: return (v & value) != 0;                       // AND
        default: return ~(v | value) != 0;                    // NOR
      }
    };
    for (long pause_us = 5; !met(); pause_us = std::min(pause_us * 2, 500L)) usleep(static_cast<useconds_t>(pause_us));
    return kSuccess;
  });
  return kSuccess;
}

CUresult cuStreamWriteValue32_v2(CUstream handle, CUdeviceptr addr, unsigned value, unsigned flags) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  if (Injected("cuStreamWriteValue32")) return kErrorNotSupported;
  Stream* stream = nullptr;
  CUresult r = StreamFor(handle, &stream);
  if (r != kSuccess) return r;
  uint32_t* word = MemOpWord(addr);
  if (word == nullptr || flags > 1) return kErrorInvalidValue;
  stream->Enqueue([word, value] {
    std::atomic_ref<uint32_t>(*word).store(value);
    return kSuccess;
  });
  return kSuccess;
}

CUresult cuStreamIsCapturing(CUstream handle, int* status) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  if (status == nullptr) return kErrorInvalidValue;
  Stream* stream = nullptr;
  CUresult r = StreamFor(handle, &stream);
  if (r != kSuccess) return r;
  *status = kStreamCaptureStatusNone;  // the double has no graphs
  return kSuccess;
}

CUresult cuStreamGetCtx(CUstream handle, CUcontext* ctx) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  if (ctx == nullptr) return kErrorInvalidValue;
  Stream* stream = nullptr;
  CUresult r = StreamFor(handle, &stream);
  if (r != kSuccess) return r;
  *ctx = stream->context();
  return kSuccess;
}

CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  if (module == nullptr) return kErrorInvalidValue;
  if (Current() == nullptr) return kErrorInvalidContext;
  if (!IsModuleImage(image)) return kErrorInvalidImage;
  static char the_module;  // every image holds every function
  *module = reinterpret_cast<CUmodule>(&the_module);
  return kSuccess;
}

CUresult cuModuleUnload(CUmodule module) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  return module != nullptr ? kSuccess : kErrorInvalidHandle;
}

CUresult cuModuleGetFunction(CUfunction* fn, CUmodule module, const char* name) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  if (fn == nullptr || module == nullptr || name == nullptr) return kErrorInvalidValue;
  Function* f = FindFunction(name);
  if (f == nullptr) return kErrorNotFound;
  *fn = reinterpret_cast<CUfunction>(f);
  return kSuccess;
}

CUresult cuLaunchKernel(CUfunction fn, unsigned grid_x, unsigned grid_y, unsigned grid_z, unsigned block_x,
                        unsigned block_y, unsigned block_z, unsigned shared_bytes, CUstream handle, void** params,
                        void** extra) {
  CONDUIT_DOUBLE_REQUIRE_INIT();
  if (fn == nullptr) return kErrorInvalidHandle;
  if (grid_x * grid_y * grid_z == 0 || block_x * block_y * block_z == 0 || block_x * block_y * block_z > 1024 ||
      shared_bytes > 48 * 1024 || extra != nullptr) {
    return kErrorInvalidValue;
  }
  Stream* stream = nullptr;
  CUresult r = StreamFor(handle, &stream);
  if (r != kSuccess) return r;
  return Launch(*reinterpret_cast<Function*>(fn), *stream, params);
}
