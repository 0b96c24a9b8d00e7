// The DeviceInfo reply (docs/gpu.md, shim protocol types 13/14): whether conduitd maps
// device buffers, its GPUs' UUIDs and the features it serves. conduitd writes it with
// EncodeDeviceInfoReply and the shim reads it with DecodeDeviceInfoReply, so the fuzzer
// (tests/fuzz, shim_frames) runs this very code on whatever a socket may deliver.
#ifndef CONDUIT_COMMON_DEVICE_INFO_REPLY_H_
#define CONDUIT_COMMON_DEVICE_INFO_REPLY_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "protocol/shim_protocol.h"

namespace conduit {

// `head` followed by its `ndevices` UUIDs (head.ndevices is set from `devices`).
std::vector<uint8_t> EncodeDeviceInfoReply(shimproto::DeviceInfoReply head, const std::vector<shimproto::DeviceUuid>& devices);

// Ok when `payload` is exactly one DeviceInfoReply and the `ndevices` UUIDs it announces
// (0 to 1024); unknown feature bits are kept, for the caller to ignore.
Status DecodeDeviceInfoReply(std::string_view payload, shimproto::DeviceInfoReply* head,
                             std::vector<shimproto::DeviceUuid>* devices);

}  // namespace conduit

#endif  // CONDUIT_COMMON_DEVICE_INFO_REPLY_H_
