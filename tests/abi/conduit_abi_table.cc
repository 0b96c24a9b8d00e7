// The side under test: Conduit's headers, compiled the way the daemon and the
// shim compile them (CONDUIT_NCCL_NO_CUDA, so cudaStream_t is our own
// declaration and must still mangle like CUDA's).

#include "conduit/nccl_device_host.h"
#include "nccl.h"

#ifndef CONDUIT_INCLUDE_NCCL_H_
#error "conduit_abi_table.cc did not pick up Conduit's nccl.h"
#endif

#define ABI_P_TWIN(pfn, fn_ptr) (&pfn)
#define ABI_PICK_OVERLOAD(fn, ptr_type) (&fn)
#include "abi_table_builder.h"

namespace conduit_abi {

AbiTable ConduitAbiTable() { return BuildAbiTable(); }

}  // namespace conduit_abi
