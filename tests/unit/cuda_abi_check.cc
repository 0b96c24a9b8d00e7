// Conduit declares the CUDA driver ABI it uses itself (cuda/cuda_abi.h and the
// entry point list in cuda_driver.h) so nothing needs CUDA headers to build. This test
// compares those declarations with the toolkit's cuda.h: constants, handle layouts, and
// every entry point's signature (parameter count and sizes, return size).
#include <cuda.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

#include "cuda/cuda_abi.h"
#include "cuda/cuda_driver.h"

namespace {

template <typename R, typename... A>
std::vector<size_t> Shape(R (*)(A...)) {
  return {sizeof(R), sizeof(A)...};
}

namespace ours = conduit::cuda;
namespace {

TEST(CudaAbiTest, Constants) {
  EXPECT_EQ(ours::kSuccess, CUDA_SUCCESS);
  EXPECT_EQ(ours::kErrorInvalidValue, CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(ours::kErrorNotInitialized, CUDA_ERROR_NOT_INITIALIZED);
  EXPECT_EQ(ours::kErrorNoDevice, CUDA_ERROR_NO_DEVICE);
  EXPECT_EQ(ours::kErrorAlreadyMapped, CUDA_ERROR_ALREADY_MAPPED);
  EXPECT_EQ(ours::kErrorNotReady, CUDA_ERROR_NOT_READY);
  EXPECT_EQ(ours::kErrorPeerAccessAlreadyEnabled, CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
  EXPECT_EQ(ours::kPointerAttributeContext, CU_POINTER_ATTRIBUTE_CONTEXT);
  EXPECT_EQ(ours::kPointerAttributeMemoryType, CU_POINTER_ATTRIBUTE_MEMORY_TYPE);
  EXPECT_EQ(ours::kPointerAttributeBufferId, CU_POINTER_ATTRIBUTE_BUFFER_ID);
  EXPECT_EQ(ours::kPointerAttributeIsManaged, CU_POINTER_ATTRIBUTE_IS_MANAGED);
  EXPECT_EQ(ours::kPointerAttributeDeviceOrdinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL);
  EXPECT_EQ(ours::kPointerAttributeIsLegacyIpcCapable, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE);
  EXPECT_EQ(ours::kPointerAttributeRangeStartAddr, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR);
  EXPECT_EQ(ours::kPointerAttributeRangeSize, CU_POINTER_ATTRIBUTE_RANGE_SIZE);
  EXPECT_EQ(ours::kMemoryTypeHost, static_cast<unsigned>(CU_MEMORYTYPE_HOST));
  EXPECT_EQ(ours::kMemoryTypeDevice, static_cast<unsigned>(CU_MEMORYTYPE_DEVICE));
  EXPECT_EQ(ours::kMemoryTypeArray, static_cast<unsigned>(CU_MEMORYTYPE_ARRAY));
  EXPECT_EQ(ours::kMemoryTypeUnified, static_cast<unsigned>(CU_MEMORYTYPE_UNIFIED));
  EXPECT_EQ(ours::kEventDisableTiming, static_cast<unsigned>(CU_EVENT_DISABLE_TIMING));
  EXPECT_EQ(ours::kEventInterprocess, static_cast<unsigned>(CU_EVENT_INTERPROCESS));
  EXPECT_EQ(ours::kStreamNonBlocking, static_cast<unsigned>(CU_STREAM_NON_BLOCKING));
  EXPECT_EQ(ours::kIpcMemLazyEnablePeerAccess, static_cast<unsigned>(CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
  EXPECT_EQ(ours::kMemHostAllocPortable, static_cast<unsigned>(CU_MEMHOSTALLOC_PORTABLE));
  EXPECT_EQ(ours::kMemHostAllocDeviceMap, static_cast<unsigned>(CU_MEMHOSTALLOC_DEVICEMAP));
  EXPECT_EQ(ours::kStreamCaptureStatusNone, CU_STREAM_CAPTURE_STATUS_NONE);
  EXPECT_EQ(ours::kMemAllocationTypePinned, CU_MEM_ALLOCATION_TYPE_PINNED);
  EXPECT_EQ(ours::kMemHandleTypePosixFileDescriptor, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  EXPECT_EQ(ours::kMemLocationTypeDevice, CU_MEM_LOCATION_TYPE_DEVICE);
  EXPECT_EQ(ours::kMemAccessFlagsProtReadWrite, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  EXPECT_EQ(ours::kMemAllocGranularityMinimum, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  EXPECT_EQ(ours::kDeviceAttributeMultiprocessorCount, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  EXPECT_EQ(ours::kDeviceAttributeUnifiedAddressing, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING);
  EXPECT_EQ(ours::kDeviceAttributeComputeCapabilityMajor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  EXPECT_EQ(ours::kDeviceAttributeComputeCapabilityMinor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  EXPECT_EQ(ours::kDeviceAttributeMpsEnabled, CU_DEVICE_ATTRIBUTE_MPS_ENABLED);
  EXPECT_EQ(ours::kIpcHandleBytes, CU_IPC_HANDLE_SIZE);
  EXPECT_EQ(reinterpret_cast<void*>(ours::LegacyStream()), reinterpret_cast<void*>(CU_STREAM_LEGACY));
  EXPECT_EQ(reinterpret_cast<void*>(ours::PerThreadStream()), reinterpret_cast<void*>(CU_STREAM_PER_THREAD));
}

TEST(CudaAbiTest, Layouts) {
  EXPECT_EQ(sizeof(ours::IpcMemHandle), sizeof(CUipcMemHandle));
  EXPECT_EQ(sizeof(ours::IpcEventHandle), sizeof(CUipcEventHandle));
  EXPECT_EQ(sizeof(ours::Uuid), sizeof(CUuuid));
  EXPECT_EQ(sizeof(ours::CUdeviceptr), sizeof(::CUdeviceptr));
  EXPECT_EQ(sizeof(ours::CUresult), sizeof(::CUresult));
  EXPECT_EQ(sizeof(ours::CUdevice), sizeof(::CUdevice));
  EXPECT_EQ(sizeof(ours::CUmemGenericAllocationHandle), sizeof(::CUmemGenericAllocationHandle));
  EXPECT_EQ(sizeof(ours::MemLocation), sizeof(CUmemLocation));
  EXPECT_EQ(offsetof(ours::MemLocation, id), offsetof(CUmemLocation, id));
  EXPECT_EQ(sizeof(ours::MemAllocationProp), sizeof(CUmemAllocationProp));
  EXPECT_EQ(offsetof(ours::MemAllocationProp, requested_handle_types), offsetof(CUmemAllocationProp, requestedHandleTypes));
  EXPECT_EQ(offsetof(ours::MemAllocationProp, location), offsetof(CUmemAllocationProp, location));
  EXPECT_EQ(offsetof(ours::MemAllocationProp, win32_handle_meta_data), offsetof(CUmemAllocationProp, win32HandleMetaData));
  EXPECT_EQ(offsetof(ours::MemAllocationProp, alloc_flags), offsetof(CUmemAllocationProp, allocFlags));
  EXPECT_EQ(sizeof(ours::MemAccessDesc), sizeof(CUmemAccessDesc));
  EXPECT_EQ(offsetof(ours::MemAccessDesc, flags), offsetof(CUmemAccessDesc, flags));
}

}  // namespace
}  // namespace

// Inside conduit::cuda the parameter lists of CONDUIT_CUDA_DRIVER_API name our types
// (they hide cuda.h's global ones of the same names).
namespace conduit::cuda {
namespace {

// Every entry point: cuda.h's declaration of the exported symbol has our shape.
TEST(CudaAbiTest, EntryPoints) {
  int checked = 0;
#define CONDUIT_CHECK_ENTRY_(member, symbol, params)                             \
  {                                                                            \
    using Ours = CUresult(*) params;                                           \
    EXPECT_EQ(Shape(static_cast<decltype(&::symbol)>(nullptr)),                \
              Shape(static_cast<Ours>(nullptr)))                            \
        << #symbol;                                                            \
    ++checked;                                                                 \
  }
  CONDUIT_CUDA_DRIVER_API(CONDUIT_CHECK_ENTRY_)
#undef CONDUIT_CHECK_ENTRY_
  EXPECT_GT(checked, 40);
}

}  // namespace
}  // namespace conduit::cuda
