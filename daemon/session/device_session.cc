#include "session/device_session.h"

#include <algorithm>
#include <cstring>

#include "common/device_info_reply.h"
#include "common/frame.h"
#include "common/log.h"
#include "gpu/runtime.h"
#include "reduce/reduce.h"
#include "session/group_request.h"

namespace conduit {

DeviceSession::~DeviceSession() {
  if (ready_ == nullptr) return;
  gpu::Runtime& rt = gpu::Runtime::Get();
  cuda::ScopedContext ctx(rt.driver(), rt.context(ready_device_));
  rt.driver().EventDestroy(ready_);
}

std::vector<uint8_t> DeviceSession::InfoReply() {
  gpu::Runtime& rt = gpu::Runtime::Get();
  shimproto::DeviceInfoReply head{};
  head.status = ToWire(Status::Ok());
  head.supported = rt.available() ? 1 : 0;
  head.driver_version = rt.available() ? rt.driver().version() : 0;
  head.features = rt.available() ? shimproto::kDeviceFeatureP2p | shimproto::kDeviceFeatureSpans : 0;
  CopyCString(head.reason, rt.available() ? "" : rt.unavailable_reason().c_str());
  std::vector<shimproto::DeviceUuid> devices(rt.available() ? rt.device_count() : 0);
  for (size_t d = 0; d < devices.size(); ++d) memcpy(devices[d].bytes, rt.uuid(static_cast<int>(d)).bytes, sizeof(devices[d].bytes));
  return EncodeDeviceInfoReply(head, devices);
}

Status DeviceSession::Register(const shimproto::RegisterBufferRequest& request, int fd) {
  gpu::Runtime& rt = gpu::Runtime::Get();
  if (!rt.available()) return InvalidUsage("this daemon has no GPU support: %s", rt.unavailable_reason().c_str());
  if (request.buffer_id == 0 || request.size == 0) return InvalidArgument("RegisterBuffer needs a buffer id and a size");
  if (request.buffer_id & shimproto::kSpanIdBit) {
    return InvalidArgument("RegisterBuffer of id %llu: ids with the top bit set name spans (RegisterSpan)",
                           static_cast<unsigned long long>(request.buffer_id));
  }
  const int device = rt.DeviceOfUuid(request.device.bytes);
  if (device < 0) return InvalidArgument("RegisterBuffer names a GPU this daemon does not see");
  auto it = buffers_.find(request.buffer_id);
  if (it != buffers_.end()) {
    if (it->second->size == request.size && (it->second->fd >= 0) == (fd >= 0) &&
        memcmp(it->second->handle, request.ipc_handle, sizeof(request.ipc_handle)) == 0) {
      return Status::Ok();  // the same registration again
    }
    return InvalidArgument("buffer id %llu is already registered differently on this connection (release it first)",
                           static_cast<unsigned long long>(request.buffer_id));
  }
  if (buffers_.size() >= kMaxBuffers) {
    return InvalidUsage("this connection has %zu device allocations registered, the most one may hold; release some "
                        "(ncclCommDeregister) or they are staged",
                        buffers_.size());
  }
  std::shared_ptr<const gpu::DeviceMapping> mapping;
  CONDUIT_RETURN_IF_ERROR(rt.memory().Acquire(pid_, request, fd, device, &mapping));
  buffers_[request.buffer_id] = std::move(mapping);
  return Status::Ok();
}

Status DeviceSession::RegisterSpan(uint64_t span_id, const shimproto::DeviceUuid& uuid, const std::vector<uint64_t>& pages) {
  gpu::Runtime& rt = gpu::Runtime::Get();
  if (!rt.available()) return InvalidUsage("this daemon has no GPU support: %s", rt.unavailable_reason().c_str());
  if ((span_id & shimproto::kSpanIdBit) == 0 || pages.size() < 2 || pages.size() > shimproto::kMaxSpanPages) {
    return InvalidArgument("RegisterSpan needs a span id with its top bit set and 2 to %u pages", shimproto::kMaxSpanPages);
  }
  const int device = rt.DeviceOfUuid(uuid.bytes);
  if (device < 0) return InvalidArgument("RegisterSpan names a GPU this daemon does not see");
  if (auto it = spans_.find(span_id); it != spans_.end()) {
    if (it->second == pages) return Status::Ok();  // the same span again
    return InvalidArgument("span id %llu is already registered with other pages on this connection (release it first)",
                           static_cast<unsigned long long>(span_id));
  }
  if (buffers_.size() >= kMaxBuffers) {
    return InvalidUsage("this connection has %zu device allocations and spans registered, the most one may hold; "
                        "release some (ncclCommDeregister) or they are staged",
                        buffers_.size());
  }
  if (span_pages_ + pages.size() > kMaxSpannedPages) {
    return InvalidUsage("this connection's spans map %zu pages, and %zu more would pass the most one may map (%zu); "
                        "release some (ncclCommDeregister) or they are staged",
                        span_pages_, pages.size(), kMaxSpannedPages);
  }
  std::vector<std::shared_ptr<const gpu::DeviceMapping>> mappings;
  for (uint64_t id : pages) {
    auto it = buffers_.find(id);
    if (it == buffers_.end() || spans_.count(id) != 0) {
      return InvalidArgument("RegisterSpan names page %llu, which is not a registered buffer of this connection",
                             static_cast<unsigned long long>(id));
    }
    if (it->second->fd < 0 || it->second->device != device) {
      return InvalidArgument("RegisterSpan names page %llu, which is not a virtual-memory registration on that GPU",
                             static_cast<unsigned long long>(id));
    }
    mappings.push_back(it->second);
  }
  std::shared_ptr<const gpu::DeviceMapping> span;
  CONDUIT_RETURN_IF_ERROR(rt.MapSpan(device, mappings, &span));
  buffers_[span_id] = std::move(span);
  spans_[span_id] = pages;
  span_pages_ += pages.size();
  return Status::Ok();
}

std::vector<DeviceSession::Registration> DeviceSession::Registrations() const {
  gpu::Runtime& rt = gpu::Runtime::Get();
  std::vector<Registration> out;
  for (const auto& [id, mapping] : buffers_) {
    if (spans_.count(id) != 0) continue;  // Spans()
    Registration r{};
    r.request.buffer_id = id;
    r.request.size = mapping->size;
    memcpy(r.request.device.bytes, rt.uuid(mapping->device).bytes, sizeof(r.request.device.bytes));
    memcpy(r.request.ipc_handle, mapping->handle, sizeof(r.request.ipc_handle));
    r.fd = mapping->fd;
    out.push_back(r);
  }
  return out;
}

std::vector<DeviceSession::SpanRegistration> DeviceSession::Spans() const {
  gpu::Runtime& rt = gpu::Runtime::Get();
  std::vector<SpanRegistration> out;
  for (const auto& [id, pages] : spans_) {
    auto mapping = buffers_.find(id);  // always there: the two maps change together
    if (mapping == buffers_.end()) continue;
    SpanRegistration r;
    r.id = id;
    memcpy(r.device.bytes, rt.uuid(mapping->second->device).bytes, sizeof(r.device.bytes));
    r.pages = pages;
    out.push_back(std::move(r));
  }
  return out;
}

Status DeviceSession::Release(uint64_t buffer_id) {
  // A group running on another connection may still hold the mapping; it closes when the
  // last holder lets go.
  if (buffers_.erase(buffer_id) == 0) {
    return InvalidArgument("buffer id %llu is not registered on this connection", static_cast<unsigned long long>(buffer_id));
  }
  if (auto span = spans_.find(buffer_id); span != spans_.end()) {
    span_pages_ -= span->second.size();
    spans_.erase(span);
    return Status::Ok();
  }
  // A page's spans go with it: they map memory the program let go of.
  for (auto it = spans_.begin(); it != spans_.end();) {
    if (std::find(it->second.begin(), it->second.end(), buffer_id) == it->second.end()) {
      ++it;
      continue;
    }
    buffers_.erase(it->first);
    span_pages_ -= it->second.size();
    it = spans_.erase(it);
  }
  return Status::Ok();
}

Status DeviceSession::Find(uint64_t id, uint64_t offset, uint64_t bytes, const char* what,
                           std::shared_ptr<const gpu::DeviceMapping>* out) const {
  auto it = buffers_.find(id);
  if (it == buffers_.end()) {
    return InvalidArgument("the %s buffer id %llu is not registered", what, static_cast<unsigned long long>(id));
  }
  uint64_t end;
  if (__builtin_add_overflow(offset, bytes, &end) || end > it->second->size) {
    return InvalidArgument("the %s needs bytes [%llu, +%llu) of a registered buffer of %llu bytes", what,
                           static_cast<unsigned long long>(offset), static_cast<unsigned long long>(bytes),
                           static_cast<unsigned long long>(it->second->size));
  }
  *out = it->second;
  return Status::Ok();
}

namespace {

// This daemon's ordinal of the GPU a device group's stream is on, if it serves device buffers.
Status StreamDevice(const shimproto::DeviceUuid& uuid, int* device) {
  gpu::Runtime& rt = gpu::Runtime::Get();
  if (!rt.available()) return InvalidUsage("this daemon has no GPU support: %s", rt.unavailable_reason().c_str());
  *device = rt.DeviceOfUuid(uuid.bytes);
  if (*device < 0) return InvalidArgument("the device group names a GPU this daemon does not see");
  return Status::Ok();
}

}  // namespace

Status DeviceSession::ResolveBuffers(int stream_device, const std::vector<shimproto::OpDesc>& ops,
                                     const std::vector<shimproto::DeviceOpRef>& refs, int rank, int nranks,
                                     std::vector<DeviceOpBuffers>* out) const {
  out->assign(ops.size(), DeviceOpBuffers{});
  for (size_t i = 0; i < ops.size(); ++i) {
    const shimproto::DeviceOpRef& ref = refs[i];
    if (!(ops[i].flags & shimproto::kOpDevice)) {
      if (ref.send_id != 0 || ref.recv_id != 0) return InvalidArgument("op %zu is not a device op but names buffers", i);
      continue;
    }
    uint64_t send_bytes = 0, recv_bytes = 0;
    CONDUIT_RETURN_IF_ERROR(OpBufferBytes(ops[i], nranks, &send_bytes, &recv_bytes));
    DeviceOpBuffers& b = (*out)[i];
    b.stream_device = stream_device;
    std::shared_ptr<const gpu::DeviceMapping> m;
    if (ref.send_id != 0) {
      CONDUIT_RETURN_IF_ERROR(Find(ref.send_id, ref.send_offset, send_bytes, "input", &m));
      b.send = m->base + ref.send_offset;
      b.send_device = m->device;
      b.keep.push_back(m);
    }
    if (ref.recv_id != 0) {
      CONDUIT_RETURN_IF_ERROR(Find(ref.recv_id, ref.recv_offset, recv_bytes, "output", &m));
      b.recv = m->base + ref.recv_offset;
      b.recv_device = m->device;
      b.keep.push_back(m);
    }
    // A buffer the collective needs from this rank must be there, so no kernel or copy
    // ever sees address 0: only a broadcast's non-root input and a reduce's non-root output
    // may be missing.
    const bool needs_send = shimproto::OpNeedsSend(ops[i], rank);
    const bool needs_recv = shimproto::OpNeedsRecv(ops[i], rank);
    if ((needs_send && b.send == 0) || (needs_recv && b.recv == 0)) {
      return InvalidArgument("device op %zu (%s) lacks its %s buffer", i, OpKindName(ops[i].kind),
                             needs_send && b.send == 0 ? "input" : "output");
    }
  }
  return Status::Ok();
}

Status DeviceSession::ResolveAsync(const shimproto::DeviceAsyncHeader& header, const std::vector<shimproto::OpDesc>& ops,
                                   const std::vector<shimproto::DeviceOpRef>& refs, int rank, int nranks,
                                   std::vector<DeviceOpBuffers>* out, AsyncWords* words) {
  int stream_device = -1;
  CONDUIT_RETURN_IF_ERROR(StreamDevice(header.device, &stream_device));
  for (size_t i = 0; i < ops.size(); ++i) {
    if (!(ops[i].flags & shimproto::kOpDevice)) return InvalidArgument("op %zu of an asynchronous group is not a device op", i);
  }
  if (header.reserved != 0 || header.sync_offset % shimproto::kSyncWordBytes != 0) {
    return InvalidArgument("malformed DeviceAsyncHeader (offset %llu, reserved %u)",
                           static_cast<unsigned long long>(header.sync_offset), header.reserved);
  }
  // The words, and the factor slots behind them when an op keeps its factor there.
  bool slots = false;
  for (const shimproto::OpDesc& op : ops) slots |= (op.flags & shimproto::kOpScalarWord) != 0;
  const uint64_t words_bytes = shimproto::ScalarSlotOffset(slots ? ops.size() : 0);
  CONDUIT_RETURN_IF_ERROR(Find(header.sync_id, header.sync_offset, words_bytes, "sync words", &words->keep));
  CONDUIT_RETURN_IF_ERROR(ResolveBuffers(stream_device, ops, refs, rank, nranks, out));
  for (size_t i = 0; i < ops.size(); ++i) {
    // The stream reads the ready word (and a factor slot) there: held with the buffers.
    (*out)[i].keep.push_back(words->keep);
    if (ops[i].flags & shimproto::kOpScalarWord) {
      (*out)[i].scalar = words->keep->base + header.sync_offset + shimproto::ScalarSlotOffset(i);
    }
  }
  words->ready = words->keep->base + header.sync_offset;
  words->done = words->ready + shimproto::kSyncWordBytes;
  words->seq = header.seq;
  words->device = words->keep->device;
  return Status::Ok();
}

Status DeviceSession::Resolve(const shimproto::DeviceGroupHeader& header, const std::vector<shimproto::OpDesc>& ops,
                              const std::vector<shimproto::DeviceOpRef>& refs, int rank, int nranks,
                              std::vector<DeviceOpBuffers>* out, cuda::CUevent* ready, bool* event_unusable) {
  *event_unusable = false;
  gpu::Runtime& rt = gpu::Runtime::Get();
  int stream_device = -1;
  CONDUIT_RETURN_IF_ERROR(StreamDevice(header.device, &stream_device));
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].flags & shimproto::kOpScalarWord) return InvalidArgument("op %zu: kOpScalarWord outside an asynchronous group", i);
    if ((ops[i].flags & shimproto::kOpDevice) && (ops[i].kind == shimproto::kSend || ops[i].kind == shimproto::kRecv)) {
      return InvalidArgument("op %zu: point-to-point ops on device buffers need an asynchronous group (the shim stages "
                             "them on the event-ordered path)",
                             i);
    }
  }
  CONDUIT_RETURN_IF_ERROR(ResolveBuffers(stream_device, ops, refs, rank, nranks, out));
  if (memcmp(ready_handle_, header.ready_event, sizeof(ready_handle_)) != 0 || ready_ == nullptr) {
    cuda::ScopedContext ctx(rt.driver(), rt.context(stream_device));
    if (ready_ != nullptr) rt.driver().EventDestroy(ready_);
    ready_ = nullptr;
    cuda::IpcEventHandle handle;
    memcpy(handle.reserved, header.ready_event, sizeof(handle.reserved));
    cuda::CUresult r = rt.driver().IpcOpenEventHandle(&ready_, handle);
    if (r != cuda::kSuccess) {
      ready_ = nullptr;
      *event_unusable = true;
      Status error = rt.driver().Error("cuIpcOpenEventHandle of the program's ready event", r);
      if (!event_refusal_logged_) {
        event_refusal_logged_ = true;
        CLOG_WARN("%s: the program's device buffers cannot be ordered with its stream here; it stages them through "
                  "host memory instead", error.message().c_str());
      }
      return error;
    }
    memcpy(ready_handle_, header.ready_event, sizeof(ready_handle_));
    ready_device_ = stream_device;
  }
  *ready = ready_;
  return Status::Ok();
}

}  // namespace conduit
