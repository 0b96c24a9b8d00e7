#include "device_path.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "common/device_info_reply.h"
#include "common/fd_io.h"
#include "common/log.h"
#include "nccl_debug.h"
#include "pending_op.h"
#include "reduce/reduce.h"
#include "shim_log.h"

namespace conduit {
namespace {

cuda::CUstream AsStream(cudaStream_t s) { return reinterpret_cast<cuda::CUstream>(s); }
cuda::CUdeviceptr AsDevicePtr(const void* p) { return reinterpret_cast<cuda::CUdeviceptr>(p); }

// The connection's sync words: the ready word, the done word, then one 8-byte slot per op of
// a group for a PreMulSum factor kept on the device (shimproto::kOpScalarWord).
constexpr size_t kSyncWordsBytes = 256;
constexpr size_t kScalarSlots = (kSyncWordsBytes - shimproto::ScalarSlotOffset(0)) / shimproto::kScalarSlotBytes;

// The context work on `stream` runs in: the stream's own, or for the default streams
// (which belong to whatever context is current) the current one, else `fallback`.
cuda::CUcontext StreamContext(const cuda::CudaDriver& d, cudaStream_t stream, cuda::CUcontext fallback) {
  cuda::CUcontext ctx = nullptr;
  if (d.StreamGetCtx(AsStream(stream), &ctx) == cuda::kSuccess && ctx != nullptr) return ctx;
  return fallback;
}

// The context of the op's CUDA-known buffer.
cuda::CUcontext BufferContext(const PendingOp& op) {
  return op.in_info.kind != MemoryKind::kHost ? op.in_info.context : op.out_info.context;
}

// A PreMulSum factor held in memory (ncclScalarDevice): its value once the program's work
// queued on `stream` before the call is done, as NCCL's kernel would read it. Device memory
// is copied out on the stream, which this waits for; memory CUDA does not know is read.
Status ReadScalar(const cuda::CudaDriver& d, const void* p, size_t bytes, cudaStream_t stream, uint8_t* out) {
  BufferInfo info;
  CONDUIT_RETURN_IF_ERROR(ClassifyBuffer(p, &info));
  if (info.kind == MemoryKind::kHost) {
    memcpy(out, p, bytes);
    return Status::Ok();
  }
  cuda::ScopedContext ctx(d, StreamContext(d, stream, info.context));
  uint8_t value[8] = {};
  cuda::CUresult r = d.MemcpyAsync(AsDevicePtr(value), AsDevicePtr(p), bytes, AsStream(stream));
  if (r == cuda::kSuccess) r = d.StreamSynchronize(AsStream(stream));
  if (r != cuda::kSuccess) return d.Error("reading the PreMulSum factor from device memory", r);
  memcpy(out, value, bytes);
  return Status::Ok();
}

// The PreMulSum factor of `op` (ncclScalarDevice). A factor in memory CUDA knows, of a
// device op, waits for DevicePath::PlaceScalar: an asynchronous group copies it on the
// stream instead of waiting for the stream here.
Status PlaceFactor(const cuda::CudaDriver& cuda, PendingOp* op) {
  BufferInfo where;
  CONDUIT_RETURN_IF_ERROR(ClassifyBuffer(op->scalar_pointer, &where));
  if (op->place == MemoryKind::kDevice && where.kind != MemoryKind::kHost) {
    op->scalar_deferred = true;
    return Status::Ok();
  }
  const size_t elem = DataTypeSize(static_cast<ncclDataType_t>(op->desc.dtype));
  return ReadScalar(cuda, op->scalar_pointer, elem, op->stream, op->desc.scalar);
}

}  // namespace

ncclResult_t PlaceOp(const char* call, PendingOp* op, cudaStream_t stream) {
  op->stream = stream;
  const cuda::CudaDriver* cuda = ProcessCuda();
  if (cuda == nullptr) {
    // No CUDA in this process: host memory only, the factor too.
    if (op->scalar_pointer != nullptr) {
      memcpy(op->desc.scalar, op->scalar_pointer, DataTypeSize(static_cast<ncclDataType_t>(op->desc.dtype)));
    }
    return ncclSuccess;
  }
  int capture = cuda::kStreamCaptureStatusNone;
  if (cuda->StreamIsCapturing(AsStream(stream), &capture) == cuda::kSuccess &&
      capture != cuda::kStreamCaptureStatusNone) {
    return Fail(call, ncclInvalidUsage,
                "the stream is being captured into a CUDA graph; Conduit runs collectives in conduitd, which a "
                "graph cannot contain: capture without NCCL calls, or run with CONDUIT_DISABLE=1");
  }
  Status st;
  if (op->in_bytes > 0) st = ClassifyBuffer(op->in, &op->in_info);
  if (st.ok() && op->out_bytes > 0) st = ClassifyBuffer(op->out, &op->out_info);
  if (!st.ok()) return Fail(call, st);
  const bool in_cuda = op->in_bytes > 0 && op->in_info.kind != MemoryKind::kHost;
  const bool out_cuda = op->out_bytes > 0 && op->out_info.kind != MemoryKind::kHost;
  if (in_cuda || out_cuda) {  // else host memory, the path as it always was
    const bool in_ok = op->in_bytes == 0 || op->in_info.kind == MemoryKind::kDevice;
    const bool out_ok = op->out_bytes == 0 || op->out_info.kind == MemoryKind::kDevice;
    const bool one_gpu = op->in_bytes == 0 || op->out_bytes == 0 || op->in_info.device == op->out_info.device;
    // Point-to-point ops too: an asynchronous group carries them to conduitd (SendGroup
    // stages them on the event-ordered path).
    const bool served = shimproto::IsCollectiveKind(op->desc.kind) || op->desc.kind == shimproto::kSend || op->desc.kind == shimproto::kRecv;
    op->place = served && in_ok && out_ok && one_gpu ? MemoryKind::kDevice : MemoryKind::kStaged;
  }
  if (op->scalar_pointer != nullptr) st = PlaceFactor(*cuda, op);
  return st.ok() ? ncclSuccess : Fail(call, st);
}

Status StageIn(const PendingOp& op, uint8_t* segment) {
  if (op.in_bytes == 0) return Status::Ok();
  const cuda::CudaDriver& d = *ProcessCuda();
  cuda::ScopedContext ctx(d, StreamContext(d, op.stream, BufferContext(op)));
  // Unified addressing: the driver tells device, managed and host memory apart.
  cuda::CUresult r = d.MemcpyAsync(AsDevicePtr(segment + op.desc.offset + op.in_at), AsDevicePtr(op.in), op.in_bytes,
                                   AsStream(op.stream));
  return r == cuda::kSuccess ? Status::Ok() : d.Error("copying a device buffer into the staging segment", r);
}

Status StageOut(const PendingOp& op, const uint8_t* segment) {
  if (op.copy_out_bytes() == 0) return Status::Ok();  // none, or a broadcast's root in place
  const cuda::CudaDriver& d = *ProcessCuda();
  cuda::ScopedContext ctx(d, StreamContext(d, op.stream, BufferContext(op)));
  cuda::CUresult r = d.MemcpyAsync(AsDevicePtr(op.out), AsDevicePtr(segment + op.desc.offset + op.out_at),
                                   op.copy_out_bytes(), AsStream(op.stream));
  return r == cuda::kSuccess ? Status::Ok() : d.Error("copying a result to a device buffer", r);
}

Status SyncStaged(const PendingOp& op) {
  const cuda::CudaDriver& d = *ProcessCuda();
  cuda::ScopedContext ctx(d, StreamContext(d, op.stream, BufferContext(op)));
  cuda::CUresult r = d.StreamSynchronize(AsStream(op.stream));
  return r == cuda::kSuccess ? Status::Ok() : d.Error("cuStreamSynchronize for staged buffers", r);
}

DevicePath::~DevicePath() {
  const cuda::CudaDriver* d = ProcessCuda();
  if (d == nullptr) return;
  if (words_ != 0) {
    // cuMemFree waits for the device's work, which includes the streams waiting on it.
    cuda::ScopedContext ctx(*d, words_context_);
    d->MemFree(words_);
  }
  if (ready_ != nullptr) {
    cuda::ScopedContext ctx(*d, ready_context_);
    d->EventDestroy(ready_);
  }
  for (auto& [handle, event] : done_events_) {
    cuda::ScopedContext ctx(*d, event.second);
    d->EventDestroy(event.first);
  }
}

Status DevicePath::Uuid(int device, shimproto::DeviceUuid* out) {
  auto it = uuids_.find(device);
  if (it == uuids_.end()) {
    const cuda::CudaDriver& d = *ProcessCuda();
    cuda::CUdevice dev = 0;
    cuda::Uuid uuid{};
    cuda::CUresult r = d.DeviceGet(&dev, device);
    if (r == cuda::kSuccess) r = d.DeviceGetUuid(&uuid, dev);
    if (r != cuda::kSuccess) return d.Error("identifying the buffer's GPU", r);
    shimproto::DeviceUuid u;
    memcpy(u.bytes, uuid.bytes, sizeof(u.bytes));
    it = uuids_.emplace(device, u).first;
  }
  *out = it->second;
  return Status::Ok();
}

bool DevicePath::DaemonSees(const shimproto::DeviceUuid& uuid) const {
  for (const auto& d : daemon_devices_) {
    if (memcmp(d.bytes, uuid.bytes, sizeof(uuid.bytes)) == 0) return true;
  }
  return false;
}

Status DevicePath::Probe(DaemonConnection& conn) {
  if (!probed_) {
    Frame reply;
    Status st = conn.Call(shimproto::kDeviceInfo, nullptr, 0, shimproto::kDeviceInfoReply, &reply);
    std::string why;
    if (st.ok()) {
      shimproto::DeviceInfoReply head;
      const std::string_view payload(reinterpret_cast<const char*>(reply.payload.data()), reply.payload.size());
      CONDUIT_RETURN_IF_ERROR(DecodeDeviceInfoReply(payload, &head, &daemon_devices_));
      daemon_serves_ = head.supported != 0;
      daemon_p2p_ = daemon_serves_ && (head.features & shimproto::kDeviceFeatureP2p) != 0;
      daemon_spans_ = daemon_serves_ && (head.features & shimproto::kDeviceFeatureSpans) != 0;
      why = FromCString(head.reason);
    } else if (st.code() == ncclInvalidArgument) {
      why = "it predates device buffers";  // "unknown request type"
    } else {
      return st;
    }
    probed_ = true;
    if (!daemon_serves_) NCCL_SHIM_INFO(kSubsysReg, "conduitd does not map device buffers (%s): staging them through host memory", why.c_str());
  }
  return Status::Ok();
}

Status DevicePath::RegisterAhead(DaemonConnection& conn, const void* p, size_t bytes, bool* mapped) {
  *mapped = false;
  if (ProcessCuda() == nullptr) return Status::Ok();
  BufferInfo info;
  CONDUIT_RETURN_IF_ERROR(ClassifyBuffer(p, &info));
  if (info.kind != MemoryKind::kDevice) return Status::Ok();
  CONDUIT_RETURN_IF_ERROR(Probe(conn));
  shimproto::DeviceUuid uuid;
  CONDUIT_RETURN_IF_ERROR(Uuid(info.device, &uuid));
  if (!daemon_serves_ || !DaemonSees(uuid)) return Status::Ok();
  bool shared = true;
  uint64_t id = 0, offset = 0;
  CONDUIT_RETURN_IF_ERROR(Register(conn, p, info, &shared, &id, &offset));
  *mapped = shared;  // ReleaseAhead lets go of what is registered here
  // A range across pages of a segment: its pages and the span of them, as a collective on
  // it would register them (where that cannot be, the collective stages, as it would).
  if (shared && info.vmm && !Covers(id, offset, bytes)) {
    CONDUIT_RETURN_IF_ERROR(RegisterSpan(conn, p, bytes, info, &shared, &id, &offset));
  }
  return Status::Ok();
}

Status DevicePath::ReleaseAhead(DaemonConnection& conn, const void* p, size_t bytes) {
  if (ProcessCuda() == nullptr) return Status::Ok();
  BufferInfo info;
  // Already freed (or never device memory): nothing registered under it to let go of here;
  // the freed-buffer check releases what is left.
  if (!ClassifyBuffer(p, &info).ok() || info.kind != MemoryKind::kDevice) return Status::Ok();
  auto it = registered_.find(info.buffer_id);
  if (it == registered_.end()) return Status::Ok();
  // Every registered allocation in the range (the pages of a span, with it).
  const uint64_t begin = AsDevicePtr(p);
  const uint64_t end = bytes > UINT64_MAX - begin ? UINT64_MAX : begin + bytes;
  std::vector<uint64_t> ids{it->first};
  for (const auto& [id, r] : registered_) {
    if (id != it->first && r.base < end && begin < r.base + r.size) ids.push_back(id);
  }
  for (uint64_t id : ids) {
    CONDUIT_RETURN_IF_ERROR(ReleaseBuffer(conn, id));
    registered_.erase(id);
  }
  return Status::Ok();
}

Status DevicePath::Prepare(DaemonConnection& conn, const std::vector<PendingOp*>& ops) {
  CONDUIT_RETURN_IF_ERROR(Probe(conn));
  CONDUIT_RETURN_IF_ERROR(ReleaseFreed(conn));
  for (PendingOp* op : ops) {
    if (op->place != MemoryKind::kDevice) continue;
    const BufferInfo& info = op->in_bytes > 0 ? op->in_info : op->out_info;
    shimproto::DeviceUuid uuid;
    CONDUIT_RETURN_IF_ERROR(Uuid(info.device, &uuid));
    bool shared = daemon_serves_ && DaemonSees(uuid);
    if (shared) EnsureReadyEvent(StreamContext(*ProcessCuda(), op->stream, info.context), &shared);
    op->ref = shimproto::DeviceOpRef{};
    // A virtual-memory buffer that runs past its allocation spans several mappings (an
    // expandable segment's pages, each its own allocation): conduitd maps them back to
    // back as a span. (An ordinary allocation that a buffer overruns is the program's
    // error, which conduitd reports.)
    if (shared && op->in_bytes > 0) {
      CONDUIT_RETURN_IF_ERROR(Register(conn, op->in, op->in_info, &shared, &op->ref.send_id, &op->ref.send_offset));
      if (shared && op->in_info.vmm && !Covers(op->ref.send_id, op->ref.send_offset, op->in_bytes)) {
        CONDUIT_RETURN_IF_ERROR(
            RegisterSpan(conn, op->in, op->in_bytes, op->in_info, &shared, &op->ref.send_id, &op->ref.send_offset));
      }
    }
    if (shared && op->out_bytes > 0) {
      CONDUIT_RETURN_IF_ERROR(Register(conn, op->out, op->out_info, &shared, &op->ref.recv_id, &op->ref.recv_offset));
      if (shared && op->out_info.vmm && !Covers(op->ref.recv_id, op->ref.recv_offset, op->out_bytes)) {
        CONDUIT_RETURN_IF_ERROR(
            RegisterSpan(conn, op->out, op->out_bytes, op->out_info, &shared, &op->ref.recv_id, &op->ref.recv_offset));
      }
    }
    if (!shared) {
      op->place = MemoryKind::kStaged;
      op->ref = shimproto::DeviceOpRef{};
    }
  }
  return Status::Ok();
}

void DevicePath::NoteUnexportable(uint64_t buffer_id) {
  // Buffer ids never come back in a process, so an entry never goes stale; the set is only
  // bounded (a program that allocates without end forgets the oldest refusals, at the cost
  // of asking CUDA again).
  if (unexportable_.size() >= kMaxUnexportable) unexportable_.clear();
  unexportable_.insert(buffer_id);
}

bool DevicePath::Covers(uint64_t id, uint64_t offset, uint64_t bytes) const {
  auto it = registered_.find(id);
  return it != registered_.end() && offset <= it->second.size && bytes <= it->second.size - offset;
}

Status DevicePath::RegisterSpan(DaemonConnection& conn, const void* p, uint64_t bytes, const BufferInfo& info,
                                bool* shared, uint64_t* id, uint64_t* offset) {
  *shared = false;
  const char* why = nullptr;
  const uint64_t addr = AsDevicePtr(p);
  uint64_t end = 0;
  auto first = registered_.find(*id);
  if (!daemon_spans_) {
    why = "conduitd predates spans";
  } else if (first == registered_.end() || __builtin_add_overflow(addr, bytes, &end)) {
    return InternalError("a span from a page that is not registered");
  }
  // The pages mapped after the first, as the driver sees them, each registered as any page.
  std::vector<uint64_t> pages{*id};
  const uint64_t base = first == registered_.end() ? 0 : first->second.base;
  uint64_t at = first == registered_.end() ? 0 : base + first->second.size;
  while (why == nullptr && at < end) {
    BufferInfo next;
    bool ok = true;  // Register says false when the page cannot be shared
    uint64_t page = 0, page_offset = 0;
    if (pages.size() >= shimproto::kMaxSpanPages) {
      why = "it spans too many allocations";
    } else if (!ClassifyBuffer(reinterpret_cast<const void*>(at), &next).ok() || next.kind != MemoryKind::kDevice ||
               !next.vmm || next.device != info.device) {
      why = "the memory after an allocation is not another virtual-memory allocation of its GPU";
    } else {
      CONDUIT_RETURN_IF_ERROR(Register(conn, reinterpret_cast<const void*>(at), next, &ok, &page, &page_offset));
      if (!ok || page_offset != 0) why = "an allocation after the first cannot be shared";
    }
    auto registered = registered_.find(page);
    if (why == nullptr && registered == registered_.end()) why = "an allocation after the first was not registered";
    if (why != nullptr) break;
    pages.push_back(page);
    at += registered->second.size;
  }
  auto it = spans_.find(pages);
  if (why == nullptr && it == spans_.end()) {
    shimproto::RegisterSpanRequest head{};
    head.span_id = shimproto::kSpanIdBit | ++spans_made_;
    head.pages = static_cast<uint32_t>(pages.size());
    CONDUIT_RETURN_IF_ERROR(Uuid(info.device, &head.device));
    std::vector<uint8_t> request(sizeof(head) + pages.size() * sizeof(uint64_t));
    memcpy(request.data(), &head, sizeof(head));
    memcpy(request.data() + sizeof(head), pages.data(), pages.size() * sizeof(uint64_t));
    Frame reply;
    Status st = conn.Call(shimproto::kRegisterSpan, request.data(), request.size(), shimproto::kRegisterSpanReply, &reply);
    if (!st.ok() && (st.code() == ncclSystemError || st.code() == ncclRemoteError)) return st;
    if (st.ok()) {
      NCCL_SHIM_INFO(kSubsysReg, "conduitd mapped a span of %zu device allocations (%llu bytes) as one buffer",
                     pages.size(), static_cast<unsigned long long>(at - base));
    } else {
      NCCL_SHIM_INFO(kSubsysReg, "conduitd did not map a span of %zu device allocations (%s): staging ops on it",
                     pages.size(), st.message().c_str());
    }
    it = spans_.emplace(pages, Span{st.ok() ? head.span_id : 0, base}).first;
  }
  if (why == nullptr && it->second.id == 0) why = "conduitd refused its span";
  if (why != nullptr) {
    NCCL_SHIM_INFO(kSubsysReg, "a device buffer spans more than one allocation and %s: staging this op", why);
    return Status::Ok();
  }
  *shared = true;
  *id = it->second.id;
  *offset = addr - it->second.base;
  return Status::Ok();
}

void DevicePath::ForgetSpansOf(uint64_t buffer_id) {
  for (auto it = spans_.begin(); it != spans_.end();) {
    const bool holds = std::find(it->first.begin(), it->first.end(), buffer_id) != it->first.end();
    it = holds ? spans_.erase(it) : std::next(it);
  }
}

Status DevicePath::ReleaseBuffer(DaemonConnection& conn, uint64_t buffer_id) {
  shimproto::ReleaseBufferRequest rel{buffer_id};
  Frame reply;
  Status st = conn.Call(shimproto::kReleaseBuffer, &rel, sizeof(rel), shimproto::kReleaseBufferReply, &reply);
  ForgetSpansOf(buffer_id);  // conduitd drops a page's spans with it
  return st.ok() || st.code() == ncclInvalidArgument ? Status::Ok() : st;  // unknown there: nothing to drop
}

Status DevicePath::ReleaseFreed(DaemonConnection& conn) {
  if (registered_.empty()) return Status::Ok();
  const auto now = std::chrono::steady_clock::now();
  if (now - last_free_check_ < kFreeCheckInterval) return Status::Ok();
  last_free_check_ = now;
  const cuda::CudaDriver& d = *ProcessCuda();
  for (auto it = registered_.begin(); it != registered_.end();) {
    // The driver's buffer ids are never reused in a process: another id (or none) at the
    // base means the program freed the allocation, and conduitd's mapping holds it.
    unsigned long long id = 0;
    const bool same =
        d.PointerGetAttribute(&id, cuda::kPointerAttributeBufferId, it->second.base) == cuda::kSuccess && id == it->first;
    if (same) {
      ++it;
      continue;
    }
    CONDUIT_RETURN_IF_ERROR(ReleaseBuffer(conn, it->first));
    it = registered_.erase(it);
  }
  return Status::Ok();
}

Status DevicePath::ReleaseFreedBuffers(DaemonConnection& conn) {
  if (registered_.empty()) return Status::Ok();
  // The driver's pointer queries want a context on this thread: the registrations' (a
  // process's allocations share its devices' primary contexts).
  cuda::ScopedContext ctx(*ProcessCuda(), registered_.begin()->second.context);
  return ReleaseFreed(conn);
}

namespace {

// The POSIX file descriptor of the virtual-memory-managed allocation mapped at `base`
// (cuMemRetainAllocationHandle, cuMemExportToShareableHandle). Fails for memory that is
// not such an allocation (a memory pool's, say) or was not created exportable as one.
Status ExportVmm(uint64_t base, UniqueFd* out) {
  const cuda::CudaDriver& d = *ProcessCuda();
  cuda::CUmemGenericAllocationHandle handle = 0;
  cuda::CUresult r = d.MemRetainAllocationHandle(&handle, reinterpret_cast<void*>(base));
  if (r != cuda::kSuccess) return d.Error("cuMemRetainAllocationHandle", r);
  int fd = -1;
  r = d.MemExportToShareableHandle(&fd, handle, cuda::kMemHandleTypePosixFileDescriptor, 0);
  d.MemRelease(handle);  // the reference Retain took
  if (r != cuda::kSuccess) return d.Error("cuMemExportToShareableHandle (POSIX file descriptor)", r);
  *out = UniqueFd(fd);
  return Status::Ok();
}

}  // namespace

Status DevicePath::Register(DaemonConnection& conn, const void* p, const BufferInfo& info, bool* shared, uint64_t* id,
                            uint64_t* offset) {
  const uint64_t addr = AsDevicePtr(p);
  auto it = registered_.find(info.buffer_id);
  if (it == registered_.end() && unexportable_.count(info.buffer_id) != 0) {
    *shared = false;  // CUDA refused to export it before: staged without asking again
    return Status::Ok();
  }
  if (it == registered_.end()) {
    const cuda::CudaDriver& d = *ProcessCuda();
    cuda::ScopedContext ctx(d, info.context);
    cuda::CUdeviceptr base = 0;
    size_t size = 0;
    cuda::CUresult r = d.MemGetAddressRange(&base, &size, addr);
    if (r != cuda::kSuccess) return d.Error("cuMemGetAddressRange", r);
    // Allocations registered earlier that overlap this one have been freed: the daemon
    // lets go of them (their ids never come back).
    for (auto old = registered_.begin(); old != registered_.end();) {
      if (old->second.base < base + size && base < old->second.base + old->second.size) {
        CONDUIT_RETURN_IF_ERROR(ReleaseBuffer(conn, old->first));
        old = registered_.erase(old);
      } else {
        ++old;
      }
    }
    shimproto::RegisterBufferRequest req{};
    req.buffer_id = info.buffer_id;
    req.size = size;
    CONDUIT_RETURN_IF_ERROR(Uuid(info.device, &req.device));
    UniqueFd exported;  // a virtual-memory-managed allocation's descriptor
    if (info.vmm) {
      Status why = ExportVmm(base, &exported);
      if (!why.ok()) {
        CLOG_DEBUG("%s: staging this allocation instead", why.message().c_str());
        NoteUnexportable(info.buffer_id);
        *shared = false;
        return Status::Ok();
      }
    } else {
      cuda::IpcMemHandle handle;
      r = d.IpcGetMemHandle(&handle, base);
      if (r != cuda::kSuccess) {
        CLOG_DEBUG("%s: staging this allocation instead", d.Error("cuIpcGetMemHandle", r).message().c_str());
        NoteUnexportable(info.buffer_id);
        *shared = false;
        return Status::Ok();
      }
      memcpy(req.ipc_handle, handle.reserved, sizeof(req.ipc_handle));
    }
    Frame reply;
    Status st = exported.valid() ? conn.Call(shimproto::kRegisterVmmBuffer, &req, sizeof(req),
                                             shimproto::kRegisterVmmBufferReply, &reply, exported.get())
                                 : conn.Call(shimproto::kRegisterBuffer, &req, sizeof(req), shimproto::kRegisterBufferReply, &reply);
    if (!st.ok()) {
      if (st.code() == ncclSystemError || st.code() == ncclRemoteError) return st;
      NCCL_SHIM_INFO(kSubsysReg, "conduitd could not map a %zu-byte device allocation (%s): staging it", size, st.message().c_str());
      *shared = false;
      return Status::Ok();
    }
    NCCL_SHIM_INFO(kSubsysReg, "conduitd mapped a %zu-byte device allocation%s", size,
                   info.vmm ? " (virtual memory, by file descriptor)" : "");
    it = registered_.emplace(info.buffer_id, Registered{base, size, info.context}).first;
  }
  if (addr < it->second.base || addr >= it->second.base + it->second.size) {
    return InternalError("pointer outside the allocation the driver named for it");
  }
  *id = info.buffer_id;
  *offset = addr - it->second.base;
  return Status::Ok();
}

void DevicePath::EnsureReadyEvent(cuda::CUcontext ctx, bool* usable) {
  *usable = events_usable_;
  if (!events_usable_ || (ready_ != nullptr && ready_context_ == ctx)) return;
  const cuda::CudaDriver& d = *ProcessCuda();
  cuda::ScopedContext scope(d, ctx);
  if (ready_ != nullptr) d.EventDestroy(ready_);  // a stream of another context: rare
  ready_ = nullptr;
  cuda::CUevent event = nullptr;
  cuda::IpcEventHandle handle;
  const char* step = "cuEventCreate (interprocess)";
  cuda::CUresult r = d.EventCreate(&event, cuda::kEventDisableTiming | cuda::kEventInterprocess);
  if (r == cuda::kSuccess) {
    step = "cuIpcGetEventHandle";
    r = d.IpcGetEventHandle(&handle, event);
    if (r != cuda::kSuccess) d.EventDestroy(event);
  }
  if (r != cuda::kSuccess) {
    // Without an event conduitd can wait on, its work cannot be ordered with the program's
    // stream; staged copies order themselves on that stream and still work.
    *usable = false;
    StopUsingEvents(d.Error(step, r));
    return;
  }
  ready_ = event;
  ready_context_ = ctx;
  memcpy(ready_header_.ready_event, handle.reserved, sizeof(ready_header_.ready_event));
}

Status DevicePath::RecordReady(cudaStream_t stream, int device, cuda::CUcontext fallback,
                               shimproto::DeviceGroupHeader* header) {
  const cuda::CudaDriver& d = *ProcessCuda();
  cuda::CUcontext ctx = StreamContext(d, stream, fallback);
  cuda::ScopedContext scope(d, ctx);
  bool usable = false;
  EnsureReadyEvent(ctx, &usable);  // made by Prepare; a no-op unless the context changed
  if (!usable) return InternalError("no interprocess event for a device group");
  CONDUIT_RETURN_IF_ERROR(Uuid(device, &ready_header_.device));
  // One event per connection is enough: requests on a connection are sequential and the
  // daemon's stream has queued its wait on this recording before it replies.
  cuda::CUresult r = d.EventRecord(ready_, AsStream(stream));
  if (r != cuda::kSuccess) return d.Error("cuEventRecord on the caller's stream", r);
  *header = ready_header_;
  return Status::Ok();
}

bool DevicePath::SetUpWords(DaemonConnection& conn, const PendingOp& op) {
  const cuda::CudaDriver& d = *ProcessCuda();
  const BufferInfo& info = op.in_bytes > 0 ? op.in_info : op.out_info;
  const cuda::CUcontext ctx = StreamContext(d, op.stream, info.context);
  cuda::ScopedContext scope(d, ctx);
  const char* step = "cuMemAlloc";
  cuda::CUdeviceptr words = 0;
  cuda::CUstream setup = nullptr;
  // Zeroed, and the stream memory operations tried once, so a driver without them turns
  // this path off here rather than failing a collective. On a stream of its own: the
  // program's may still be busy for a long time, and this call must not wait for it.
  cuda::CUresult r = d.MemAlloc(&words, kSyncWordsBytes);
  if (r == cuda::kSuccess) {
    step = "cuStreamCreate";
    r = d.StreamCreate(&setup, cuda::kStreamNonBlocking);
  }
  if (r == cuda::kSuccess) {
    step = "cuMemsetD8Async";
    r = d.MemsetD8Async(words, 0, kSyncWordsBytes, setup);
  }
  if (r == cuda::kSuccess) {
    step = "cuStreamWriteValue32";
    r = d.StreamWriteValue32(setup, words, 0, cuda::kStreamWriteValueDefault);
  }
  if (r == cuda::kSuccess) {
    step = "cuStreamWaitValue32";
    r = d.StreamWaitValue32(setup, words, 0, cuda::kStreamWaitValueGeq);
  }
  if (r == cuda::kSuccess) {
    step = "cuStreamSynchronize";
    r = d.StreamSynchronize(setup);
  }
  if (setup != nullptr) d.StreamDestroy(setup);
  Status st = r == cuda::kSuccess ? Status::Ok() : d.Error(step, r);
  BufferInfo words_info;
  bool shared = true;  // Register clears it when the allocation cannot be shared
  uint64_t id = 0, offset = 0;
  if (st.ok()) st = ClassifyBuffer(reinterpret_cast<const void*>(words), &words_info);
  if (st.ok()) st = Register(conn, reinterpret_cast<const void*>(words), words_info, &shared, &id, &offset);
  if (st.ok() && !shared) st = InvalidUsage("conduitd cannot map it");
  if (!st.ok()) {
    if (words != 0) d.MemFree(words);
    async_usable_ = false;
    static std::atomic<bool> logged{false};
    if (!logged.exchange(true)) {
      CLOG_WARN("device collectives cannot be ordered by stream memory operations here (%s): each call waits until "
                "conduitd has run it (docs/gpu.md)",
                st.message().c_str());
    }
    return false;
  }
  words_ = words;
  words_context_ = ctx;
  words_device_ = info.device;
  async_header_ = shimproto::DeviceAsyncHeader{};
  async_header_.sync_id = id;
  async_header_.sync_offset = offset;
  return Uuid(info.device, &async_header_.device).ok();
}

bool DevicePath::UseAsync(DaemonConnection& conn, const std::vector<PendingOp*>& ops) {
  if (!async_usable_ || ops.empty()) return false;
  for (const PendingOp* op : ops) {
    if (op->place != MemoryKind::kDevice || op->stream != ops[0]->stream) return false;
  }
  const PendingOp& first = *ops[0];
  const int device = first.in_bytes > 0 ? first.in_info.device : first.out_info.device;
  if (words_ == 0) {
    static const bool wanted = [] {
      const char* sync = getenv("CONDUIT_DEVICE_SYNC");  // "events": the waiting path, for comparison
      return sync == nullptr || strcmp(sync, "events") != 0;
    }();
    if (!wanted) {
      async_usable_ = false;
      return false;
    }
    if (!SetUpWords(conn, first)) return false;
  }
  return device == words_device_;
}

Status DevicePath::PlaceScalar(PendingOp* op, size_t index, size_t nops, bool async) {
  if (!op->scalar_deferred) return Status::Ok();
  op->scalar_deferred = false;
  const cuda::CudaDriver& d = *ProcessCuda();
  const size_t elem = DataTypeSize(static_cast<ncclDataType_t>(op->desc.dtype));
  // A slot is rewritten by the next group only after this one's done word (same stream).
  const bool slot = async && op->place == MemoryKind::kDevice && nops <= kScalarSlots &&
                    (seq_ == 0 || op->stream == last_async_stream_);
  if (!slot) return ReadScalar(d, op->scalar_pointer, elem, op->stream, op->desc.scalar);
  cuda::ScopedContext scope(d, StreamContext(d, op->stream, words_context_));
  const cuda::CUdeviceptr at = words_ + shimproto::ScalarSlotOffset(index);
  cuda::CUresult r = d.MemcpyAsync(at, AsDevicePtr(op->scalar_pointer), elem, AsStream(op->stream));
  if (r != cuda::kSuccess) return d.Error("copying the PreMulSum factor on the stream", r);
  op->desc.flags |= shimproto::kOpScalarWord;
  memset(op->desc.scalar, 0, sizeof(op->desc.scalar));
  return Status::Ok();
}

Status DevicePath::SignalReady(cudaStream_t stream, shimproto::DeviceAsyncHeader* header) {
  const cuda::CudaDriver& d = *ProcessCuda();
  cuda::ScopedContext scope(d, StreamContext(d, stream, words_context_));
  const uint32_t seq = seq_ + 1;
  cuda::CUresult r = d.StreamWriteValue32(AsStream(stream), words_, seq, cuda::kStreamWriteValueDefault);
  if (r != cuda::kSuccess) return d.Error("cuStreamWriteValue32 of the ready word", r);
  seq_ = seq;
  last_async_stream_ = stream;
  *header = async_header_;
  header->seq = seq;
  return Status::Ok();
}

Status DevicePath::WaitDoneWord(cudaStream_t stream, uint32_t seq) {
  const cuda::CudaDriver& d = *ProcessCuda();
  cuda::ScopedContext scope(d, StreamContext(d, stream, words_context_));
  cuda::CUresult r =
      d.StreamWaitValue32(AsStream(stream), words_ + shimproto::kSyncWordBytes, seq, cuda::kStreamWaitValueGeq);
  if (r != cuda::kSuccess) return d.Error("cuStreamWaitValue32 on conduitd's done word", r);
  awaited_seq_ = seq;
  return Status::Ok();
}

bool DevicePath::ReleaseStreamsOfLostDaemon(Status* error) {
  if (awaited_seq_ == 0 || awaited_seq_ == released_seq_) return false;
  const cuda::CudaDriver& d = *ProcessCuda();
  cuda::ScopedContext scope(d, words_context_);
  // A non-blocking stream of our own: the program's streams are the ones waiting, and the
  // legacy default stream would wait for them.
  cuda::CUstream own = nullptr;
  const char* step = "cuStreamCreate";
  cuda::CUresult r = d.StreamCreate(&own, cuda::kStreamNonBlocking);
  if (r == cuda::kSuccess) {
    step = "cuStreamWriteValue32";
    r = d.StreamWriteValue32(own, words_ + shimproto::kSyncWordBytes, awaited_seq_, cuda::kStreamWriteValueDefault);
  }
  if (r == cuda::kSuccess) {
    step = "cuStreamSynchronize";
    r = d.StreamSynchronize(own);
  }
  if (own != nullptr) d.StreamDestroy(own);
  if (r != cuda::kSuccess) {
    *error = d.Error(step, r);
    return true;
  }
  released_seq_ = awaited_seq_;
  *error = Status::Ok();
  return true;
}

void DevicePath::StopUsingEvents(const Status& why) {
  events_usable_ = false;
  static std::atomic<bool> logged{false};
  if (!logged.exchange(true)) {
    CLOG_WARN("%s: CUDA will not share an event with conduitd here; device buffers are staged through host memory "
              "instead (slower; docs/gpu.md)",
              why.message().c_str());
  }
}

void DevicePath::EventsRefusedByDaemon(const Status& why) { StopUsingEvents(Status(why.code(), "conduitd: " + why.message())); }

Status DevicePath::WaitDone(DaemonConnection& conn, cudaStream_t stream, const shimproto::DeviceGroupReplyTail& tail) {
  const cuda::CudaDriver& d = *ProcessCuda();
  std::array<uint8_t, shimproto::kIpcHandleBytes> key;
  memcpy(key.data(), tail.done_event, key.size());
  auto it = done_events_.find(key);
  if (it == done_events_.end()) {
    cuda::CUcontext ctx = StreamContext(d, stream, ready_context_);
    cuda::ScopedContext scope(d, ctx);
    cuda::IpcEventHandle handle;
    memcpy(handle.reserved, key.data(), key.size());
    cuda::CUevent event = nullptr;
    cuda::CUresult r = d.IpcOpenEventHandle(&event, handle);
    if (r != cuda::kSuccess) {
      // Nothing here can make the stream wait for the work conduitd queued: this call waits
      // on the host until it has run (the program's later work is queued after the call
      // returns), and later groups stage, needing no event.
      StopUsingEvents(d.Error("cuIpcOpenEventHandle of conduitd's done event", r));
      Frame reply;
      return conn.Call(shimproto::kDeviceDrain, nullptr, 0, shimproto::kDeviceDrainReply, &reply);
    }
    it = done_events_.emplace(key, std::make_pair(event, ctx)).first;
  }
  cuda::ScopedContext scope(d, it->second.second);
  // The daemon recorded this event after the group's work before replying, so the wait
  // covers exactly that work.
  cuda::CUresult r = d.StreamWaitEvent(AsStream(stream), it->second.first, 0);
  return r == cuda::kSuccess ? Status::Ok() : d.Error("cuStreamWaitEvent on conduitd's done event", r);
}

}  // namespace conduit
