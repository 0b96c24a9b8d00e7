// Version, error text, memory helpers, buffer registration and custom reduction ops on
// the managed path.
#include <cstring>
#include <mutex>

#include "comm.h"
#include "device_alloc.h"
#include "host_regions.h"
#include "managed.h"
#include "reduce/reduce.h"
#include "shim_log.h"

namespace conduit::managed {
namespace {

// A registration handle. Buffers from ncclMemAlloc are shared with the daemon without it
// (host_regions.h); other host memory is staged whether registered or not, so registering
// only has to hand back something ncclCommDeregister accepts.
struct Registration {
  uint32_t magic = 0x52454753;  // "REGS"
  void* buff;
  size_t size;
};

}  // namespace

ncclResult_t GetVersion(int* version) {
  if (version == nullptr) return Fail("ncclGetVersion", ncclInvalidArgument, "version is NULL");
  *version = NCCL_VERSION_CODE;  // the NCCL ABI this library implements
  return ncclSuccess;
}

const char* GetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (conduitd unreachable, a daemon died, or a system call failed)";
    case ncclInternalError: return "internal error - please report this issue to the Conduit developers";
    case ncclInvalidArgument: return "invalid argument (see ncclGetLastError)";
    case ncclInvalidUsage: return "invalid usage (see ncclGetLastError)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

const char* GetLastError(ncclComm_t) { return LastErrorText(); }

void ResetDebugInit() {}

ncclResult_t MemAlloc(void** ptr, size_t size) {
  if (ptr == nullptr || size == 0) return Fail("ncclMemAlloc", ncclInvalidArgument, "bad arguments");
  // Device memory where the program uses a GPU, as NCCL's (device_alloc.h).
  bool on_device = false;
  Status st = AllocateDeviceMemory(size, ptr, &on_device);
  if (!st.ok()) return Fail("ncclMemAlloc", ncclUnhandledCudaError, "cannot allocate %zu bytes: %s", size, st.message().c_str());
  if (on_device) return ncclSuccess;
  // Host memory, shared with the daemon when a collective uses it (host_regions.h).
  st = AllocateRegion(size, ptr);
  if (!st.ok()) return Fail("ncclMemAlloc", ncclSystemError, "cannot allocate %zu bytes: %s", size, st.message().c_str());
  return ncclSuccess;
}

ncclResult_t MemFree(void* ptr) {
  if (ptr == nullptr) return ncclSuccess;
  Status st;
  if (FreeDeviceMemory(ptr, &st)) return st.ok() ? ncclSuccess : Fail("ncclMemFree", ncclUnhandledCudaError, "%s", st.message().c_str());
  if (!FreeRegion(ptr)) return Fail("ncclMemFree", ncclInvalidArgument, "%p was not allocated by ncclMemAlloc", ptr);
  return ncclSuccess;
}

ncclResult_t CommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  if (!ValidComm(comm) || handle == nullptr) return Fail("ncclCommRegister", ncclInvalidArgument, "bad arguments");
  *handle = new Registration{0x52454753, buff, size};
  return ncclSuccess;
}

ncclResult_t CommDeregister(const ncclComm_t comm, void* handle) {
  auto* reg = static_cast<Registration*>(handle);
  if (!ValidComm(comm) || reg == nullptr || reg->magic != 0x52454753) {
    return Fail("ncclCommDeregister", ncclInvalidArgument, "invalid registration handle");
  }
  reg->magic = 0;
  delete reg;
  return ncclSuccess;
}

ncclResult_t CommWindowRegister(ncclComm_t comm, void*, size_t, ncclWindow_t* win, int) {
  if (win != nullptr) *win = nullptr;
  if (!ValidComm(comm)) return Fail("ncclCommWindowRegister", ncclInvalidArgument, "invalid communicator");
  return Fail("ncclCommWindowRegister", ncclInvalidUsage,
              "symmetric memory windows need device memory; Conduit's host-memory path does not provide them");
}

ncclResult_t CommWindowDeregister(ncclComm_t comm, ncclWindow_t) {
  if (!ValidComm(comm)) return Fail("ncclCommWindowDeregister", ncclInvalidArgument, "invalid communicator");
  return Fail("ncclCommWindowDeregister", ncclInvalidUsage, "no window was registered (not supported on this path)");
}

ncclResult_t RedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                  ncclScalarResidence_t residence, ncclComm_t comm) {
  const char* call = "ncclRedOpCreatePreMulSum";
  if (!ValidComm(comm) || op == nullptr || scalar == nullptr) return Fail(call, ncclInvalidArgument, "bad arguments");
  if (!IsValidDataType(datatype)) return Fail(call, ncclInvalidArgument, "invalid datatype %d", datatype);
  if (residence != ncclScalarHostImmediate && residence != ncclScalarDevice) {
    return Fail(call, ncclInvalidArgument, "invalid scalar residence %d", residence);
  }
  PreMulSumOp pm;
  pm.live = true;
  pm.type = datatype;
  pm.residence = residence;
  if (residence == ncclScalarHostImmediate) {
    memcpy(pm.scalar, scalar, DataTypeSize(datatype));
  } else {
    pm.pointer = scalar;  // read when the op is used, as NCCL reads device scalars at run time
  }
  std::lock_guard<std::mutex> lock(comm->redop_mu);
  size_t slot = 0;
  while (slot < comm->redops.size() && comm->redops[slot].live) ++slot;
  if (slot == comm->redops.size()) comm->redops.push_back(pm);
  else comm->redops[slot] = pm;
  *op = static_cast<ncclRedOp_t>(ncclNumOps + static_cast<int>(slot));
  return ncclSuccess;
}

ncclResult_t RedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  if (!ValidComm(comm)) return Fail("ncclRedOpDestroy", ncclInvalidArgument, "invalid communicator");
  std::lock_guard<std::mutex> lock(comm->redop_mu);
  size_t index = static_cast<size_t>(static_cast<int>(op) - ncclNumOps);
  if (static_cast<int>(op) < ncclNumOps || index >= comm->redops.size() || !comm->redops[index].live) {
    return Fail("ncclRedOpDestroy", ncclInvalidArgument, "op %d is not a live PreMulSum op", static_cast<int>(op));
  }
  comm->redops[index].live = false;
  return ncclSuccess;
}

}  // namespace conduit::managed
