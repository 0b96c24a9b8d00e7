// The reference side: NVIDIA's headers, found through the CUDA include
// directory that CMakeLists.txt gives this file alone.

#include <nccl.h>
#include <nccl_device/core.h>
#include <nccl_device/gin_barrier.h>
#include <nccl_device/ll_a2a.h>
#include <nccl_device/lsa_barrier.h>

#ifdef CONDUIT_INCLUDE_NCCL_H_
#error "nvidia_abi_table.cc picked up Conduit's nccl.h; fix include paths"
#endif

// NVIDIA declares no pncclX for the device-API host functions, although the
// library exports them as aliases of ncclX; the ncclX type stands in.
#define ABI_P_TWIN(pfn, fn_ptr) (fn_ptr)
#define ABI_PICK_OVERLOAD(fn, ptr_type) static_cast<ptr_type>(&fn)
#include "abi_table_builder.h"

namespace conduit_abi {

AbiTable NvidiaAbiTable() { return BuildAbiTable(); }

}  // namespace conduit_abi
