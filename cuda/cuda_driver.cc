#include "cuda/cuda_driver.h"

#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstdlib>
#include <mutex>

namespace conduit::cuda {
namespace {

constexpr char kDriverSoname[] = "libcuda.so.1";

// $CONDUIT_CUDA_DRIVER names another driver library (tests, unusual installs).
std::string DriverName() {
  const char* env = std::getenv("CONDUIT_CUDA_DRIVER");
  return env != nullptr && *env != '\0' ? env : kDriverSoname;
}

std::mutex g_mu;

// How many shared objects this process has loaded so far (glibc's dlpi_adds: it only
// grows), read from the first object dl_iterate_phdr visits.
unsigned long long LibrariesLoaded() {
  unsigned long long adds = 0;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        *static_cast<unsigned long long*>(out) = info->dlpi_adds;
        return 1;  // stop after the first
      },
      &adds);
  return adds;
}

}  // namespace

bool CudaDriver::Resolve(void* handle, std::string* why) {
#define CONDUIT_CUDA_RESOLVE_(member, symbol, params)                                  \
  member = reinterpret_cast<decltype(member)>(dlsym(handle, #symbol));                  \
  if (member == nullptr) {                                                             \
    *why = path_ + " lacks " #symbol " (a driver older than CUDA 11.7?)"; \
    return false;                                                                      \
  }
  CONDUIT_CUDA_DRIVER_API(CONDUIT_CUDA_RESOLVE_)
#undef CONDUIT_CUDA_RESOLVE_
  return true;
}

const CudaDriver* CudaDriver::LoadFrom(const std::string& path, std::string* why) {
  auto* d = new CudaDriver;
  d->path_ = path;
  std::string reason;
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    reason = "CUDA driver absent: cannot load " + path + (err != nullptr ? std::string(" (") + err + ")" : "");
  } else if (d->Resolve(handle, &reason)) {
    // Never unloaded: its entry points stay valid for the process's life.
    CUresult r = d->Init(0);
    if (r == kSuccess) {
      d->DriverGetVersion(&d->version_);
      return d;
    }
    reason = d->Error("cuInit", r).message();
  }
  if (why != nullptr) *why = reason;
  delete d;
  return nullptr;
}

const CudaDriver* CudaDriver::Load(std::string* why) {
  static std::string reason;
  static const CudaDriver* loaded = LoadFrom(DriverName(), &reason);
  if (loaded == nullptr && why != nullptr) *why = reason;
  return loaded;
}

const CudaDriver* CudaDriver::IfLoaded() {
  static std::atomic<const CudaDriver*> found{nullptr};
  // dlopen(RTLD_NOLOAD) of a library that is not loaded still searches for its file (the
  // ld.so cache mapped and unmapped, directories walked): tens of microseconds, twice per
  // collective on a CPU-only program, doubled its small-message latency. Ask again only
  // after the process has loaded some library since the last miss.
  static std::atomic<unsigned long long> missed_at{~0ull};
  const CudaDriver* d = found.load(std::memory_order_acquire);
  if (d != nullptr) return d;
  const unsigned long long loads = LibrariesLoaded();
  if (loads == missed_at.load(std::memory_order_relaxed)) return nullptr;
  const std::string name = DriverName();
  void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (handle == nullptr) {  // not in this process: no device memory either
    missed_at.store(loads, std::memory_order_relaxed);
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(g_mu);
  if ((d = found.load(std::memory_order_acquire)) != nullptr) {
    dlclose(handle);  // drop the reference this call added
    return d;
  }
  auto* fresh = new CudaDriver;
  fresh->path_ = name;
  std::string why;
  // The program's runtime has initialized the driver; cuInit again is a cheap no-op, and
  // a failure means no device memory can exist either.
  if (!fresh->Resolve(handle, &why) || fresh->Init(0) != kSuccess) {
    delete fresh;
    dlclose(handle);
    return nullptr;
  }
  fresh->DriverGetVersion(&fresh->version_);
  found.store(fresh, std::memory_order_release);
  return fresh;
}

Status CudaDriver::Error(const char* what, CUresult r) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (GetErrorName == nullptr || GetErrorName(r, &name) != kSuccess) name = nullptr;
  if (GetErrorString == nullptr || GetErrorString(r, &text) != kSuccess) text = nullptr;
  std::string msg = std::string(what) + ": " + (name != nullptr ? name : "CUDA error " + std::to_string(r));
  if (text != nullptr) msg += std::string(" (") + text + ")";
  return Status(ncclUnhandledCudaError, std::move(msg));
}

ScopedContext::ScopedContext(const CudaDriver& driver, CUcontext ctx) : driver_(driver) {
  CUcontext current = nullptr;
  if (ctx == nullptr || (driver_.CtxGetCurrent(&current) == kSuccess && current == ctx)) return;
  pushed_ = driver_.CtxPushCurrent(ctx) == kSuccess;
  ok_ = pushed_;
}

ScopedContext::~ScopedContext() {
  if (!pushed_) return;
  CUcontext popped = nullptr;
  driver_.CtxPopCurrent(&popped);
}

}  // namespace conduit::cuda
