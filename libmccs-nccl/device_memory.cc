#include "device_memory.h"

namespace conduit {

Status ClassifyBuffer(const void* p, BufferInfo* out) {
  *out = BufferInfo{};
  const cuda::CudaDriver* cuda = ProcessCuda();
  if (cuda == nullptr || p == nullptr) return Status::Ok();
  // One query for everything. Pointers CUDA does not know come back as memory type 0
  // (cuPointerGetAttributes does not fail for them, unlike cuPointerGetAttribute).
  unsigned memory_type = 0;
  unsigned is_managed = 0;
  unsigned long long buffer_id = 0;
  int ordinal = -1;
  unsigned ipc_capable = 0;
  cuda::CUcontext context = nullptr;
  int attributes[] = {cuda::kPointerAttributeMemoryType, cuda::kPointerAttributeIsManaged,
                      cuda::kPointerAttributeBufferId, cuda::kPointerAttributeDeviceOrdinal,
                      cuda::kPointerAttributeIsLegacyIpcCapable, cuda::kPointerAttributeContext};
  void* values[] = {&memory_type, &is_managed, &buffer_id, &ordinal, &ipc_capable, &context};
  cuda::CUresult r = cuda->PointerGetAttributes(6, attributes, values, reinterpret_cast<cuda::CUdeviceptr>(p));
  if (r != cuda::kSuccess) return cuda->Error("cuPointerGetAttributes", r);
  if (memory_type == 0) return Status::Ok();  // plain host memory
  out->device = ordinal;
  out->context = context;
  out->kind = MemoryKind::kStaged;
  if (memory_type == cuda::kMemoryTypeDevice && !is_managed && buffer_id != 0) {
    // Memory CUDA IPC cannot export may still be a virtual-memory-managed allocation that
    // exports as a file descriptor; registration finds out, and stages it if not.
    out->kind = MemoryKind::kDevice;
    out->buffer_id = buffer_id;
    out->vmm = !ipc_capable;
  }
  // Virtual-memory mappings need not name a context; the caller's is the one to use.
  if (out->context == nullptr) cuda->CtxGetCurrent(&out->context);
  return Status::Ok();
}

}  // namespace conduit
