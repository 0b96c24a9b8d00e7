#include "session/group_request.h"

#include <cstring>

#include "reduce/reduce.h"

namespace conduit {

Status ParseGroupRequest(const std::vector<uint8_t>& payload, ParsedGroup* out) {
  constexpr uint32_t kKnownFlags =
      shimproto::kGroupStreamed | shimproto::kGroupDevice | shimproto::kGroupRegions | shimproto::kGroupAsync |
      shimproto::kGroupReplyInPage;
  shimproto::GroupRequest head;
  if (payload.size() < sizeof(head)) return InvalidArgument("malformed Group request (%zu bytes)", payload.size());
  memcpy(&head, payload.data(), sizeof(head));
  const bool device = (head.flags & shimproto::kGroupDevice) != 0;
  const bool regions = (head.flags & shimproto::kGroupRegions) != 0;
  const bool async = (head.flags & shimproto::kGroupAsync) != 0;
  if (head.nops > shimproto::kMaxOpsPerGroup) {
    return InvalidArgument("malformed Group request: %u ops (at most %u)", head.nops, shimproto::kMaxOpsPerGroup);
  }
  const size_t ops_bytes = static_cast<size_t>(head.nops) * sizeof(shimproto::OpDesc);
  const size_t device_header = async ? sizeof(shimproto::DeviceAsyncHeader) : sizeof(shimproto::DeviceGroupHeader);
  const size_t device_bytes =
      device ? device_header + static_cast<size_t>(head.nops) * sizeof(shimproto::DeviceOpRef) : 0;
  const size_t region_bytes = regions ? static_cast<size_t>(head.nops) * sizeof(shimproto::RegionOpRef) : 0;
  if (payload.size() != sizeof(head) + ops_bytes + device_bytes + region_bytes) {
    return InvalidArgument("malformed Group request: %u ops in %zu bytes", head.nops, payload.size());
  }
  if ((head.flags & ~kKnownFlags) != 0) return InvalidArgument("unknown Group flags 0x%x", head.flags);
  if (device && (head.flags & shimproto::kGroupStreamed)) return InvalidArgument("a device group cannot be streamed");
  if (async && !device) return InvalidArgument("kGroupAsync needs kGroupDevice");
  if (regions && (head.flags & (shimproto::kGroupStreamed | shimproto::kGroupDevice))) {
    return InvalidArgument("a group with host regions cannot be streamed or hold device ops");
  }
  if ((head.flags & shimproto::kGroupReplyInPage) && (head.flags & (shimproto::kGroupStreamed | shimproto::kGroupDevice))) {
    return InvalidArgument("the reply to a streamed or device group comes on the socket (kGroupReplyInPage)");
  }
  out->head = head;
  out->device = device;
  out->async = async;
  out->regions = regions;
  out->ops.resize(head.nops);
  const uint8_t* p = payload.data() + sizeof(head);
  if (ops_bytes > 0) memcpy(out->ops.data(), p, ops_bytes);
  out->refs.clear();
  out->region_refs.clear();
  if (regions) {
    out->region_refs.resize(head.nops);
    if (head.nops > 0) memcpy(out->region_refs.data(), p + ops_bytes, region_bytes);
  }
  if (device) {
    if (async) {
      memcpy(&out->async_header, p + ops_bytes, sizeof(out->async_header));
    } else {
      memcpy(&out->dev, p + ops_bytes, sizeof(out->dev));
    }
    out->refs.resize(head.nops);
    if (head.nops > 0) {
      memcpy(out->refs.data(), p + ops_bytes + device_header, out->refs.size() * sizeof(shimproto::DeviceOpRef));
    }
  }
  return Status::Ok();
}

Status ParseRegisterBuffer(uint16_t type, const std::vector<uint8_t>& payload, bool has_fd,
                           shimproto::RegisterBufferRequest* out) {
  const bool vmm = type == shimproto::kRegisterVmmBuffer;
  const char* name = vmm ? "RegisterVmmBuffer" : "RegisterBuffer";
  if (!vmm && type != shimproto::kRegisterBuffer) return InvalidArgument("not a buffer registration (type %u)", type);
  if (payload.size() != sizeof(*out)) return InvalidArgument("malformed %s (%zu bytes)", name, payload.size());
  memcpy(out, payload.data(), sizeof(*out));
  if (!vmm) return Status::Ok();
  if (!has_fd) return InvalidArgument("RegisterVmmBuffer arrived without the allocation's file descriptor");
  for (uint8_t b : out->ipc_handle) {
    if (b != 0) return InvalidArgument("RegisterVmmBuffer carries an IPC handle (it must be all zero)");
  }
  return Status::Ok();
}

Status ParseRegisterSpan(const std::vector<uint8_t>& payload, shimproto::RegisterSpanRequest* out,
                         std::vector<uint64_t>* pages) {
  if (payload.size() < sizeof(*out)) return InvalidArgument("malformed RegisterSpan (%zu bytes)", payload.size());
  memcpy(out, payload.data(), sizeof(*out));
  if ((out->span_id & shimproto::kSpanIdBit) == 0) return InvalidArgument("RegisterSpan: a span id must have its top bit set");
  if (out->pages < 2 || out->pages > shimproto::kMaxSpanPages) {
    return InvalidArgument("RegisterSpan of %u pages (2 to %u)", out->pages, shimproto::kMaxSpanPages);
  }
  if (out->reserved != 0) return InvalidArgument("RegisterSpan: reserved must be 0");
  // pages <= kMaxSpanPages: no overflow.
  if (payload.size() != sizeof(*out) + size_t{out->pages} * sizeof(uint64_t)) {
    return InvalidArgument("RegisterSpan of %u pages carries %zu bytes", out->pages, payload.size());
  }
  pages->resize(out->pages);
  memcpy(pages->data(), payload.data() + sizeof(*out), pages->size() * sizeof(uint64_t));
  for (uint64_t id : *pages) {
    if (id == 0 || (id & shimproto::kSpanIdBit) != 0) return InvalidArgument("RegisterSpan names page id %llu", static_cast<unsigned long long>(id));
  }
  return Status::Ok();
}

Status OpBufferBytes(const shimproto::OpDesc& op, int nranks, uint64_t* send, uint64_t* recv) {
  uint64_t block, all;
  if (__builtin_mul_overflow(op.count, static_cast<uint64_t>(DataTypeSize(static_cast<ncclDataType_t>(op.dtype))), &block) ||
      __builtin_mul_overflow(block, static_cast<uint64_t>(nranks), &all)) {
    return InvalidArgument("op size overflows (count %llu)", static_cast<unsigned long long>(op.count));
  }
  *send = op.kind == shimproto::kReduceScatter ? all : block;
  *recv = op.kind == shimproto::kAllGather ? all : block;
  return Status::Ok();
}

}  // namespace conduit
