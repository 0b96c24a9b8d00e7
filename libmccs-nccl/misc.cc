// Version, error text, memory helpers, buffer registration and custom reduction ops on
// the managed path.
#include <cstring>
#include <mutex>

#include "comm.h"
#include "comm_watch.h"
#include "device_alloc.h"
#include "device_path.h"
#include "host_regions.h"
#include "managed.h"
#include "reduce/reduce.h"
#include "shim_log.h"

// The window handle NCCL declares opaque (nccl.h): ours is a registration.
struct ncclWindow_vidmem {
  uint32_t magic;
  ncclComm* comm;
  void* buff;
  size_t size;
  bool mapped;  // registered with the daemon at once
};

namespace conduit::managed {
namespace {

constexpr uint32_t kWindowMagic = 0x574e4457;  // "WDNW"

// A registration handle (ncclCommRegister). A device allocation the daemon can map is
// registered with it at once (DevicePath::RegisterAhead), so the first collective on it
// pays no mapping; buffers from ncclMemAlloc on hosts without CUDA are shared with the
// daemon without it (host_regions.h); other host memory is staged whether registered or not.
struct Registration {
  uint32_t magic = 0x52454753;  // "REGS"
  void* buff;
  size_t size;
  bool mapped;  // registered with the daemon by RegisterAhead
};

// Registers `buff` with the daemon ahead of the collectives that will use it, when the
// communicator is ready and the memory is device memory it can map; otherwise nothing to
// do (the buffer is looked up or staged at each call, as without registration).
Status RegisterAhead(ncclComm_t comm, void* buff, size_t size, bool* mapped) {
  *mapped = false;
  std::lock_guard<std::mutex> lock(comm->op_mu);
  if (!comm->conn) return Status::Ok();  // a non-blocking init still under way
  CONDUIT_RETURN_IF_ERROR(comm->device_path.RegisterAhead(*comm->conn, buff, size, mapped));
  if (*mapped) WatchComm(comm);  // its mapping is dropped once the program frees it
  return Status::Ok();
}

// The reverse, for a registration RegisterAhead mapped (`mapped`); nothing otherwise.
Status ReleaseAhead(ncclComm_t comm, void* buff, size_t size, bool mapped) {
  if (!mapped) return Status::Ok();
  std::lock_guard<std::mutex> lock(comm->op_mu);
  if (!comm->conn) return Status::Ok();
  return comm->device_path.ReleaseAhead(*comm->conn, buff, size);
}

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
  bool mapped = false;
  if (buff != nullptr && size > 0) {
    if (Status st = RegisterAhead(comm, buff, size, &mapped); !st.ok()) return Fail("ncclCommRegister", st);
  }
  *handle = new Registration{0x52454753, buff, size, mapped};
  return ncclSuccess;
}

ncclResult_t CommDeregister(const ncclComm_t comm, void* handle) {
  auto* reg = static_cast<Registration*>(handle);
  if (!ValidComm(comm) || reg == nullptr || reg->magic != 0x52454753) {
    return Fail("ncclCommDeregister", ncclInvalidArgument, "invalid registration handle");
  }
  reg->magic = 0;
  const Status released = ReleaseAhead(comm, reg->buff, reg->size, reg->mapped);
  delete reg;
  return released.ok() ? ncclSuccess : Fail("ncclCommDeregister", released);
}

// A window (ncclCommWindowRegister) is a registration here: conduitd runs the collectives,
// so NCCL's symmetric kernels (NCCL_WIN_COLL_SYMMETRIC) have no counterpart, and collectives
// on a window's buffers run as on any registered buffer.
ncclResult_t CommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int flags) {
  const char* call = "ncclCommWindowRegister";
  if (win != nullptr) *win = nullptr;
  if (!ValidComm(comm) || win == nullptr || buff == nullptr || size == 0) return Fail(call, ncclInvalidArgument, "bad arguments");
  if ((flags & ~NCCL_WIN_COLL_SYMMETRIC) != 0) return Fail(call, ncclInvalidArgument, "unknown window flags 0x%x", flags);
  bool mapped = false;
  if (Status st = RegisterAhead(comm, buff, size, &mapped); !st.ok()) return Fail(call, st);
  *win = new ncclWindow_vidmem{kWindowMagic, comm, buff, size, mapped};
  return ncclSuccess;
}

ncclResult_t CommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  if (!ValidComm(comm)) return Fail("ncclCommWindowDeregister", ncclInvalidArgument, "invalid communicator");
  if (win == nullptr || win->magic != kWindowMagic || win->comm != comm) {
    return Fail("ncclCommWindowDeregister", ncclInvalidArgument, "not a window of this communicator");
  }
  win->magic = 0;
  const Status released = ReleaseAhead(comm, win->buff, win->size, win->mapped);
  delete win;
  return released.ok() ? ncclSuccess : Fail("ncclCommWindowDeregister", released);
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
