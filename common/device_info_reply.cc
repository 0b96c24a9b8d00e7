#include "common/device_info_reply.h"

#include <cstring>

namespace conduit {
namespace {

// More GPUs than any host has; bounds what a reply may make the shim allocate.
constexpr int32_t kMaxDevices = 1024;

}  // namespace

std::vector<uint8_t> EncodeDeviceInfoReply(shimproto::DeviceInfoReply head,
                                           const std::vector<shimproto::DeviceUuid>& devices) {
  head.ndevices = static_cast<int32_t>(devices.size());
  std::vector<uint8_t> out(sizeof(head) + devices.size() * sizeof(shimproto::DeviceUuid));
  memcpy(out.data(), &head, sizeof(head));
  if (!devices.empty()) memcpy(out.data() + sizeof(head), devices.data(), devices.size() * sizeof(shimproto::DeviceUuid));
  return out;
}

Status DecodeDeviceInfoReply(std::string_view payload, shimproto::DeviceInfoReply* head,
                             std::vector<shimproto::DeviceUuid>* devices) {
  if (payload.size() < sizeof(*head)) return SystemError("malformed DeviceInfo reply (%zu bytes)", payload.size());
  memcpy(head, payload.data(), sizeof(*head));
  if (head->ndevices < 0 || head->ndevices > kMaxDevices ||
      payload.size() != sizeof(*head) + static_cast<size_t>(head->ndevices) * sizeof(shimproto::DeviceUuid)) {
    return SystemError("malformed DeviceInfo reply (%zu bytes for %d devices)", payload.size(), head->ndevices);
  }
  devices->resize(static_cast<size_t>(head->ndevices));
  if (head->ndevices > 0) memcpy(devices->data(), payload.data() + sizeof(*head), devices->size() * sizeof(shimproto::DeviceUuid));
  return Status::Ok();
}

}  // namespace conduit
