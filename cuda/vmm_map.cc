#include "cuda/vmm_map.h"

namespace conduit::cuda {

Status MapReadWrite(const CudaDriver& d, CUmemGenericAllocationHandle handle, size_t size, size_t alignment,
                    const MemLocation& device, const char* map_step, CUdeviceptr* out) {
  CUdeviceptr base = 0;
  CUresult r = d.MemAddressReserve(&base, size, alignment, 0, 0);
  if (r != kSuccess) return d.Error("cuMemAddressReserve", r);
  const char* step = map_step;
  r = d.MemMap(base, size, 0, handle, 0);
  if (r == kSuccess) {
    MemAccessDesc access{};
    access.location = device;
    access.flags = kMemAccessFlagsProtReadWrite;
    step = "cuMemSetAccess";
    r = d.MemSetAccess(base, size, &access, 1);
    if (r != kSuccess) d.MemUnmap(base, size);
  }
  if (r != kSuccess) {
    d.MemAddressFree(base, size);
    return d.Error(step, r);
  }
  *out = base;
  return Status::Ok();
}

CUresult Unmap(const CudaDriver& d, CUdeviceptr base, size_t size) {
  CUresult r = d.MemUnmap(base, size);
  return r == kSuccess ? d.MemAddressFree(base, size) : r;
}

}  // namespace conduit::cuda
