// The small part of the CUDA driver API's binary interface that Conduit uses, declared
// here so that neither the shim nor the daemon needs CUDA headers (or CUDA) to build.
//
// Values and layouts are facts of the driver ABI (stable across releases); they are
// checked against the toolkit's own cuda.h by tests/unit/cuda_abi_check.cc wherever a
// toolkit is installed. Everything is resolved at run time by cuda_driver.h.
#ifndef CONDUIT_DAEMON_CUDA_CUDA_ABI_H_
#define CONDUIT_DAEMON_CUDA_CUDA_ABI_H_

#include <cstdint>

namespace conduit::cuda {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;  // CUdeviceptr_v2 on 64-bit Linux

struct Context_;
struct Stream_;
struct Event_;
struct Module_;
struct Function_;
using CUcontext = Context_*;
using CUstream = Stream_*;
using CUevent = Event_*;
using CUmodule = Module_*;
using CUfunction = Function_*;

inline constexpr int kIpcHandleBytes = 64;
struct IpcMemHandle {
  char reserved[kIpcHandleBytes];
};
struct IpcEventHandle {
  char reserved[kIpcHandleBytes];
};
struct Uuid {
  char bytes[16];
};

// Virtual memory management (cuMemCreate and friends): allocations made apart from the
// addresses they are mapped at, shared between processes as POSIX file descriptors.
using CUmemGenericAllocationHandle = unsigned long long;
struct MemLocation {  // CUmemLocation
  int type;           // CUmemLocationType
  int id;             // the device ordinal for kMemLocationTypeDevice
};
struct MemAllocationProp {  // CUmemAllocationProp
  int type;                 // CUmemAllocationType
  int requested_handle_types;  // CUmemAllocationHandleType bits
  MemLocation location;
  void* win32_handle_meta_data;
  struct {
    unsigned char compression_type;
    unsigned char gpu_direct_rdma_capable;
    unsigned short usage;
    unsigned char reserved[4];
  } alloc_flags;
};
struct MemAccessDesc {  // CUmemAccessDesc
  MemLocation location;
  int flags;  // CUmemAccess_flags
};

// CUresult values Conduit tells apart.
inline constexpr CUresult kSuccess = 0;
inline constexpr CUresult kErrorInvalidValue = 1;
inline constexpr CUresult kErrorNotInitialized = 3;
inline constexpr CUresult kErrorNoDevice = 100;
inline constexpr CUresult kErrorAlreadyMapped = 208;
inline constexpr CUresult kErrorNotReady = 600;
inline constexpr CUresult kErrorPeerAccessAlreadyEnabled = 704;

// CUpointer_attribute.
inline constexpr int kPointerAttributeContext = 1;
inline constexpr int kPointerAttributeMemoryType = 2;
inline constexpr int kPointerAttributeBufferId = 7;
inline constexpr int kPointerAttributeIsManaged = 8;
inline constexpr int kPointerAttributeDeviceOrdinal = 9;
inline constexpr int kPointerAttributeIsLegacyIpcCapable = 10;
inline constexpr int kPointerAttributeRangeStartAddr = 11;
inline constexpr int kPointerAttributeRangeSize = 12;

// CUmemorytype.
inline constexpr unsigned kMemoryTypeHost = 1;
inline constexpr unsigned kMemoryTypeDevice = 2;
inline constexpr unsigned kMemoryTypeArray = 3;
inline constexpr unsigned kMemoryTypeUnified = 4;

// Flags.
inline constexpr unsigned kEventDisableTiming = 0x2;
inline constexpr unsigned kEventInterprocess = 0x4;
inline constexpr unsigned kStreamNonBlocking = 0x1;
inline constexpr unsigned kIpcMemLazyEnablePeerAccess = 0x1;
inline constexpr unsigned kMemHostAllocPortable = 0x1;
inline constexpr unsigned kMemHostAllocDeviceMap = 0x2;

// Virtual memory management: CUmemAllocationType, CUmemAllocationHandleType,
// CUmemLocationType, CUmemAccess_flags, CUmemAllocationGranularity_flags.
inline constexpr int kMemAllocationTypePinned = 0x1;
inline constexpr int kMemHandleTypePosixFileDescriptor = 0x1;
inline constexpr int kMemLocationTypeDevice = 0x1;
inline constexpr int kMemAccessFlagsProtNone = 0x0;
inline constexpr int kMemAccessFlagsProtReadWrite = 0x3;
inline constexpr int kMemAllocGranularityMinimum = 0x0;

// CUstreamWaitValue_flags / CUstreamWriteValue_flags.
inline constexpr unsigned kStreamWaitValueGeq = 0x0;  // until (int32_t)(*addr - value) >= 0
inline constexpr unsigned kStreamWriteValueDefault = 0x0;

// CUstreamCaptureStatus.
inline constexpr int kStreamCaptureStatusNone = 0;

// CUdevice_attribute.
inline constexpr int kDeviceAttributeMultiprocessorCount = 16;
inline constexpr int kDeviceAttributeUnifiedAddressing = 41;
inline constexpr int kDeviceAttributeComputeCapabilityMajor = 75;
inline constexpr int kDeviceAttributeComputeCapabilityMinor = 76;
inline constexpr int kDeviceAttributeMpsEnabled = 133;  // CUDA 12.3+ drivers

// The special stream handles every stream-taking entry point accepts.
inline CUstream LegacyStream() { return reinterpret_cast<CUstream>(0x1); }
inline CUstream PerThreadStream() { return reinterpret_cast<CUstream>(0x2); }

}  // namespace conduit::cuda

#endif  // CONDUIT_DAEMON_CUDA_CUDA_ABI_H_
