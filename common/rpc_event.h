// Encoding of the Call message (rpcproto::kCall): one frame carries any combination of the
// events of one RPC, in this fixed order (docs/rpc-protocol.md):
//
//   Start     (client -> server) method, authority, timeout, initial metadata
//   Headers   (server -> client) initial metadata
//   Message   one message, or a fragment of one (daemon links cut large ones)
//   HalfClose (client -> server) no more messages from the client
//   Status    (server -> client) final status, details, trailing metadata
//   Cancel    (either way) the call is abandoned, with a status code and details
//   Window    (either way) flow-control credit: bytes of messages the receiver consumed
//
// Payload layout: CallHead, then each present section's fixed part and variable bytes, then
// `inline_bytes` of message data (a small message, or any message between daemons). The
// decoder checks every length against the frame and never trusts a count.
#ifndef CONDUIT_DAEMON_COMMON_RPC_EVENT_H_
#define CONDUIT_DAEMON_COMMON_RPC_EVENT_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace conduit::rpc {

enum Section : uint32_t {
  kStart = 1u << 0,
  kHeaders = 1u << 1,
  kMessage = 1u << 2,
  kHalfClose = 1u << 3,
  kStatus = 1u << 4,
  kCancel = 1u << 5,
  kWindow = 1u << 6,
};
inline constexpr uint32_t kAllSections = 0x7f;
// MessageSection::segment value for bytes carried in the frame itself.
inline constexpr uint32_t kInlineSegment = 0xffffffffu;
// MessageWire::flags: the bytes are compressed with the algorithm the sender named in its
// initial metadata (grpc-encoding); the receiving program's shim decompresses them.
inline constexpr uint32_t kMessageCompressed = 1u << 0;
inline constexpr uint32_t kKnownMessageFlags = kMessageCompressed;
inline constexpr int64_t kNoTimeout = -1;

struct CallHead {
  uint64_t call;
  uint32_t sections;
  uint32_t inline_bytes;
};
static_assert(sizeof(CallHead) == 16);

struct StartWire {
  uint64_t target;      // shim: channel id (client) or server id (server side); link: port
  int64_t timeout_us;   // kNoTimeout or the time left when the client sent it
  uint32_t method_len;
  uint32_t authority_len;
  uint32_t peer_len;    // set by the server's daemon: who called, for the server program
  uint32_t md_count;
  uint32_t md_bytes;
  // Set by the server's daemon (0 from anyone else, and from daemons before it): bytes of
  // the caller's authentication properties after the initial metadata, a u32 count then
  // entries as in metadata (TLS: the client's certificate as gRPC's auth_context shows it).
  uint32_t auth_bytes;
};

struct MetadataWire {
  uint32_t count;
  uint32_t bytes;
};

struct MessageWire {
  uint64_t total_length;     // the whole message
  uint64_t fragment_offset;  // where this fragment starts in it
  uint64_t fragment_length;
  uint32_t segment;          // kInlineSegment, or the sender's shared segment holding it
  uint32_t flags;            // kMessageCompressed; other bits are refused
  uint64_t segment_offset;
};

struct StatusWire {
  int32_t code;  // grpc_status_code
  uint32_t details_len;
  uint32_t md_count;
  uint32_t md_bytes;
};

struct CancelWire {
  int32_t code;
  uint32_t details_len;
};

// Encoded metadata: `count` entries {u32 key_len, u32 value_len, key, value}.
struct MetadataView {
  uint32_t count = 0;
  std::string_view block;

  // Calls fn(key, value) for each entry; the block was validated by the decoder.
  template <typename Fn>
  void ForEach(Fn fn) const;
};
void AppendMetadata(std::string* block, std::string_view key, std::string_view value);
// Whether `block` holds exactly `count` well-formed entries.
Status CheckMetadata(std::string_view block, uint32_t count);

// One decoded (or to-be-encoded) Call frame. Views point into the frame buffer (decode) or
// the caller's data (encode).
struct CallEvent {
  uint64_t call = 0;
  uint32_t sections = 0;
  // Start
  uint64_t target = 0;
  int64_t timeout_us = kNoTimeout;
  std::string_view method;
  std::string_view authority;
  std::string_view peer;
  MetadataView initial_md;
  MetadataView auth;  // name/value properties; empty: not authenticated by TLS
  // Headers
  MetadataView headers;
  // Message: the wire fields; `data` holds inline bytes when present
  MessageWire message{};
  std::string_view data;
  // Status
  int32_t status_code = 0;
  std::string_view status_details;
  MetadataView trailers;
  // Cancel
  int32_t cancel_code = 0;
  std::string_view cancel_details;
  // Window
  uint64_t window = 0;

  bool has(Section s) const { return (sections & s) != 0; }
};

// Appends the head and sections (not the inline message bytes) to *out. The head announces
// ev.data.size() inline bytes when the message is inline; the caller sends them after.
void EncodeCallEvent(const CallEvent& ev, std::string* out);

// Reads the head of a Call payload (at least sizeof(CallHead) bytes).
Status PeekCallHead(std::string_view payload, CallHead* head);
// Decodes `sections`: a Call payload without its trailing inline bytes. ev->data is left
// empty; the caller fills it with the inline bytes it read.
Status DecodeCallEvent(std::string_view sections, CallEvent* ev);

template <typename Fn>
void MetadataView::ForEach(Fn fn) const {
  size_t at = 0;
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t klen, vlen;
    __builtin_memcpy(&klen, block.data() + at, 4);
    __builtin_memcpy(&vlen, block.data() + at + 4, 4);
    at += 8;
    fn(block.substr(at, klen), block.substr(at + klen, vlen));
    at += klen + vlen;
  }
}

}  // namespace conduit::rpc

#endif  // CONDUIT_DAEMON_COMMON_RPC_EVENT_H_
