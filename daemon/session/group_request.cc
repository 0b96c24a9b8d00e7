#include "session/group_request.h"

#include <cstring>

namespace conduit {

Status ParseGroupRequest(const std::vector<uint8_t>& payload, ParsedGroup* out) {
  constexpr uint32_t kKnownFlags = shimproto::kGroupStreamed | shimproto::kGroupDevice;
  shimproto::GroupRequest head;
  if (payload.size() < sizeof(head)) return InvalidArgument("malformed Group request (%zu bytes)", payload.size());
  memcpy(&head, payload.data(), sizeof(head));
  const bool device = (head.flags & shimproto::kGroupDevice) != 0;
  if (head.nops > shimproto::kMaxOpsPerGroup) {
    return InvalidArgument("malformed Group request: %u ops (at most %u)", head.nops, shimproto::kMaxOpsPerGroup);
  }
  const size_t ops_bytes = static_cast<size_t>(head.nops) * sizeof(shimproto::OpDesc);
  const size_t device_bytes =
      device ? sizeof(shimproto::DeviceGroupHeader) + static_cast<size_t>(head.nops) * sizeof(shimproto::DeviceOpRef) : 0;
  if (payload.size() != sizeof(head) + ops_bytes + device_bytes) {
    return InvalidArgument("malformed Group request: %u ops in %zu bytes", head.nops, payload.size());
  }
  if ((head.flags & ~kKnownFlags) != 0) return InvalidArgument("unknown Group flags 0x%x", head.flags);
  if (device && (head.flags & shimproto::kGroupStreamed)) return InvalidArgument("a device group cannot be streamed");
  out->head = head;
  out->device = device;
  out->ops.resize(head.nops);
  const uint8_t* p = payload.data() + sizeof(head);
  if (ops_bytes > 0) memcpy(out->ops.data(), p, ops_bytes);
  out->refs.clear();
  if (device) {
    memcpy(&out->dev, p + ops_bytes, sizeof(out->dev));
    out->refs.resize(head.nops);
    if (head.nops > 0) {
      memcpy(out->refs.data(), p + ops_bytes + sizeof(out->dev), out->refs.size() * sizeof(shimproto::DeviceOpRef));
    }
  }
  return Status::Ok();
}

}  // namespace conduit
