// CudaDriver: the CUDA driver API (libcuda.so.1), loaded at run time.
//
// Neither the shim nor the daemon links CUDA: one set of binaries serves CPU-only hosts
// (where the driver is absent, which is reported, not fatal) and GPU hosts.
//  * The daemon calls Load(): it dlopens the driver and initializes it.
//  * The shim calls IfLoaded(): it only looks for a driver the program has already
//    loaded (through the CUDA runtime). A program without one cannot hold device memory,
//    so every buffer is host memory, and a CPU-only program never initializes CUDA
//    because of us (which would, for one, break CUDA in its forked children).
#ifndef CONDUIT_DAEMON_CUDA_CUDA_DRIVER_H_
#define CONDUIT_DAEMON_CUDA_CUDA_DRIVER_H_

#include <cstddef>
#include <string>

#include "common/status.h"
#include "cuda/cuda_abi.h"

namespace conduit::cuda {

// Every driver entry point Conduit uses: X(member, exported symbol, (parameters)). All
// return CUresult. Versioned symbols are the ones cuda.h maps the plain names to
// (tests/unit/cuda_abi_check.cc compares each signature with cuda.h's).
#define CONDUIT_CUDA_DRIVER_API(X)                                                              \
  X(Init, cuInit, (unsigned flags))                                                           \
  X(DriverGetVersion, cuDriverGetVersion, (int* version))                                     \
  X(GetErrorName, cuGetErrorName, (CUresult error, const char** name))                        \
  X(GetErrorString, cuGetErrorString, (CUresult error, const char** text))                    \
  X(DeviceGetCount, cuDeviceGetCount, (int* count))                                           \
  X(DeviceGet, cuDeviceGet, (CUdevice * device, int ordinal))                                 \
  X(DeviceGetAttribute, cuDeviceGetAttribute, (int* value, int attribute, CUdevice device))   \
  X(DeviceGetUuid, cuDeviceGetUuid_v2, (Uuid * uuid, CUdevice device))                        \
  X(DeviceCanAccessPeer, cuDeviceCanAccessPeer, (int* can, CUdevice device, CUdevice peer))   \
  X(DevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, (CUcontext * ctx, CUdevice device))     \
  X(DevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2, (CUdevice device))                 \
  X(CtxGetCurrent, cuCtxGetCurrent, (CUcontext * ctx))                                        \
  X(CtxSetCurrent, cuCtxSetCurrent, (CUcontext ctx))                                          \
  X(CtxPushCurrent, cuCtxPushCurrent_v2, (CUcontext ctx))                                     \
  X(CtxPopCurrent, cuCtxPopCurrent_v2, (CUcontext * ctx))                                     \
  X(CtxGetDevice, cuCtxGetDevice, (CUdevice * device))                                        \
  X(CtxEnablePeerAccess, cuCtxEnablePeerAccess, (CUcontext peer, unsigned flags))             \
  X(PointerGetAttribute, cuPointerGetAttribute, (void* data, int attribute, CUdeviceptr ptr)) \
  X(PointerGetAttributes, cuPointerGetAttributes,                                             \
    (unsigned count, int* attributes, void** data, CUdeviceptr ptr))                            \
  X(MemGetAddressRange, cuMemGetAddressRange_v2, (CUdeviceptr * base, size_t* size, CUdeviceptr ptr)) \
  X(MemAlloc, cuMemAlloc_v2, (CUdeviceptr * ptr, size_t bytes))                               \
  X(MemFree, cuMemFree_v2, (CUdeviceptr ptr))                                                 \
  X(MemHostAlloc, cuMemHostAlloc, (void** ptr, size_t bytes, unsigned flags))                 \
  X(MemFreeHost, cuMemFreeHost, (void* ptr))                                                  \
  X(MemHostGetDevicePointer, cuMemHostGetDevicePointer_v2, (CUdeviceptr * dptr, void* host, unsigned flags)) \
  X(MemcpyAsync, cuMemcpyAsync, (CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream)) \
  X(MemsetD8Async, cuMemsetD8Async, (CUdeviceptr dst, unsigned char value, size_t n, CUstream stream)) \
  X(MemAddressReserve, cuMemAddressReserve,                                                   \
    (CUdeviceptr * ptr, size_t size, size_t alignment, CUdeviceptr addr, unsigned long long flags)) \
  X(MemAddressFree, cuMemAddressFree, (CUdeviceptr ptr, size_t size))                         \
  X(MemCreate, cuMemCreate,                                                                   \
    (CUmemGenericAllocationHandle * handle, size_t size, const MemAllocationProp* prop, unsigned long long flags)) \
  X(MemRelease, cuMemRelease, (CUmemGenericAllocationHandle handle))                         \
  X(MemMap, cuMemMap,                                                                         \
    (CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle, unsigned long long flags)) \
  X(MemUnmap, cuMemUnmap, (CUdeviceptr ptr, size_t size))                                     \
  X(MemSetAccess, cuMemSetAccess, (CUdeviceptr ptr, size_t size, const MemAccessDesc* desc, size_t count)) \
  X(MemGetAccess, cuMemGetAccess, (unsigned long long* flags, const MemLocation* location, CUdeviceptr ptr)) \
  X(MemExportToShareableHandle, cuMemExportToShareableHandle,                                 \
    (void* shareable, CUmemGenericAllocationHandle handle, int handle_type, unsigned long long flags)) \
  X(MemImportFromShareableHandle, cuMemImportFromShareableHandle,                             \
    (CUmemGenericAllocationHandle * handle, void* os_handle, int handle_type))                 \
  X(MemGetAllocationGranularity, cuMemGetAllocationGranularity,                               \
    (size_t * granularity, const MemAllocationProp* prop, int option))                        \
  X(MemRetainAllocationHandle, cuMemRetainAllocationHandle,                                   \
    (CUmemGenericAllocationHandle * handle, void* addr))                                      \
  X(IpcGetMemHandle, cuIpcGetMemHandle, (IpcMemHandle * handle, CUdeviceptr ptr))             \
  X(IpcOpenMemHandle, cuIpcOpenMemHandle_v2, (CUdeviceptr * ptr, IpcMemHandle handle, unsigned flags)) \
  X(IpcCloseMemHandle, cuIpcCloseMemHandle, (CUdeviceptr ptr))                                \
  X(IpcGetEventHandle, cuIpcGetEventHandle, (IpcEventHandle * handle, CUevent event))         \
  X(IpcOpenEventHandle, cuIpcOpenEventHandle, (CUevent * event, IpcEventHandle handle))       \
  X(EventCreate, cuEventCreate, (CUevent * event, unsigned flags))                            \
  X(EventDestroy, cuEventDestroy_v2, (CUevent event))                                         \
  X(EventRecord, cuEventRecord, (CUevent event, CUstream stream))                             \
  X(EventQuery, cuEventQuery, (CUevent event))                                                \
  X(StreamCreate, cuStreamCreate, (CUstream * stream, unsigned flags))                        \
  X(StreamDestroy, cuStreamDestroy_v2, (CUstream stream))                                     \
  X(StreamWaitEvent, cuStreamWaitEvent, (CUstream stream, CUevent event, unsigned flags))     \
  X(StreamSynchronize, cuStreamSynchronize, (CUstream stream))                                \
  X(StreamQuery, cuStreamQuery, (CUstream stream))                                            \
  X(StreamWaitValue32, cuStreamWaitValue32_v2, (CUstream stream, CUdeviceptr addr, unsigned value, unsigned flags)) \
  X(StreamWriteValue32, cuStreamWriteValue32_v2, (CUstream stream, CUdeviceptr addr, unsigned value, unsigned flags)) \
  X(StreamIsCapturing, cuStreamIsCapturing, (CUstream stream, int* status))                   \
  X(StreamGetCtx, cuStreamGetCtx, (CUstream stream, CUcontext * ctx))                         \
  X(ModuleLoadData, cuModuleLoadData, (CUmodule * module, const void* image))                 \
  X(ModuleUnload, cuModuleUnload, (CUmodule module))                                          \
  X(ModuleGetFunction, cuModuleGetFunction, (CUfunction * fn, CUmodule module, const char* name)) \
  X(LaunchKernel, cuLaunchKernel,                                                             \
    (CUfunction fn, unsigned grid_x, unsigned grid_y, unsigned grid_z, unsigned block_x,        \
     unsigned block_y, unsigned block_z, unsigned shared_bytes, CUstream stream, void** params, void** extra))

class CudaDriver {
 public:
#define CONDUIT_CUDA_DECLARE_(member, symbol, params) CUresult(*member) params = nullptr;
  CONDUIT_CUDA_DRIVER_API(CONDUIT_CUDA_DECLARE_)
#undef CONDUIT_CUDA_DECLARE_

  // The daemon's entry: loads the driver ($CONDUIT_CUDA_DRIVER or libcuda.so.1) and calls
  // cuInit, once per process. nullptr when there is no usable driver; *why then says
  // what is missing ("absent" hosts simply have no libcuda.so.1).
  static const CudaDriver* Load(std::string* why);
  // The shim's entry: the driver only if this process has already loaded it. Cheap
  // enough to call per operation until it appears.
  static const CudaDriver* IfLoaded();
  // Load() without the once-per-process cache, from `path` (tests). Never unloaded.
  static const CudaDriver* LoadFrom(const std::string& path, std::string* why);

  // "<what>: CUDA_ERROR_X (text)" as ncclUnhandledCudaError.
  Status Error(const char* what, CUresult r) const;
  int version() const { return version_; }  // cuDriverGetVersion, e.g. 13000
  const std::string& path() const { return path_; }

 private:
  // Resolves every entry point of `handle`; false with *why naming the first missing one.
  bool Resolve(void* handle, std::string* why);

  int version_ = 0;
  std::string path_;
};

// Makes `ctx` current on this thread for the scope (push/pop), unless it already is.
class ScopedContext {
 public:
  ScopedContext(const CudaDriver& driver, CUcontext ctx);
  ~ScopedContext();
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;
  bool ok() const { return ok_; }

 private:
  const CudaDriver& driver_;
  bool pushed_ = false;
  bool ok_ = true;
};

}  // namespace conduit::cuda

#endif  // CONDUIT_DAEMON_CUDA_CUDA_DRIVER_H_
