#include "cuda/vmm_map.h"

namespace conduit::cuda {

Status MapReadWrite(const CudaDriver& d, CUmemGenericAllocationHandle handle, size_t size, size_t alignment,
                    const MemLocation& device, const char* map_step, CUdeviceptr* out) {
  return MapPiecesReadWrite(d, {handle}, {size}, alignment, device, map_step, out);
}

Status MapPiecesReadWrite(const CudaDriver& d, const std::vector<CUmemGenericAllocationHandle>& handles,
                          const std::vector<size_t>& sizes, size_t alignment, const MemLocation& device,
                          const char* map_step, CUdeviceptr* out) {
  if (handles.empty() || handles.size() != sizes.size()) return InternalError("MapPiecesReadWrite: %zu handles, %zu sizes", handles.size(), sizes.size());
  size_t total = 0;
  for (size_t s : sizes) {
    if (s == 0 || __builtin_add_overflow(total, s, &total)) return InvalidArgument("a mapping of %zu bytes after %zu", s, total);
  }
  CUdeviceptr base = 0;
  CUresult r = d.MemAddressReserve(&base, total, alignment, 0, 0);
  if (r != kSuccess) return d.Error("cuMemAddressReserve", r);
  const char* step = map_step;
  size_t mapped = 0;  // pieces
  size_t at = 0;      // bytes
  for (; mapped < handles.size(); ++mapped) {
    r = d.MemMap(base + at, sizes[mapped], 0, handles[mapped], 0);
    if (r != kSuccess) break;
    at += sizes[mapped];
  }
  if (r == kSuccess) {
    MemAccessDesc access{};
    access.location = device;
    access.flags = kMemAccessFlagsProtReadWrite;
    step = "cuMemSetAccess";
    r = d.MemSetAccess(base, total, &access, 1);
  }
  if (r != kSuccess) {
    for (size_t i = 0, off = 0; i < mapped; off += sizes[i], ++i) d.MemUnmap(base + off, sizes[i]);
    d.MemAddressFree(base, total);
    return d.Error(step, r);
  }
  *out = base;
  return Status::Ok();
}

CUresult Unmap(const CudaDriver& d, CUdeviceptr base, size_t size) { return UnmapPieces(d, base, {size}); }

CUresult UnmapPieces(const CudaDriver& d, CUdeviceptr base, const std::vector<size_t>& sizes) {
  CUresult first = kSuccess;
  size_t total = 0;
  for (size_t s : sizes) {
    CUresult r = d.MemUnmap(base + total, s);
    if (first == kSuccess) first = r;
    total += s;
  }
  // A range still partly mapped cannot be freed; leaving it reserved loses addresses only.
  if (first != kSuccess) return first;
  return d.MemAddressFree(base, total);
}

}  // namespace conduit::cuda
