// The RPC service's messages (types 0x0100..0x01ff), documented in docs/rpc-protocol.md.
//
// They ride the common framing (common/frame.h) in both protocols: with the shim magic on a
// program's Unix socket (libmrpc-grpc <-> conduitd) and with the peer magic on TCP between
// daemons. One message, Call (0x0110), carries every event of an RPC in both protocols; it
// is encoded by common/rpc_event.h. The others set things up.
//
// Shared memory between a program and its daemon:
//   * send segments: memfds the program creates and attaches (AttachSegment); it writes
//     request/response bytes there and names them in Call frames; the daemon maps them
//     read-only.
//   * receive segments: memfds the daemon creates and passes along (AddSegment); it writes
//     incoming message bytes there; the program maps them read-only.
//   * one control region (passed with Hello) holding two rings of released blocks, so
//     blocks go back to their owner without a message per block.
// All structs are little-endian, fixed-size and trivially copyable.
#ifndef CONDUIT_PROTOCOL_RPC_PROTOCOL_H_
#define CONDUIT_PROTOCOL_RPC_PROTOCOL_H_

#include <atomic>
#include <cstdint>

#include "protocol/frame_format.h"

namespace conduit::rpcproto {

// Version 2: Serve carries the host the server listens on (its bind address, enforced by
// the daemon), and CloseChannel exists. docs/rpc-protocol.md says what changed.
inline constexpr uint32_t kRpcVersion = 2;
// RPC links between daemons (PeerHello.rpc_version). Version 2 is the links of kRpcVersion
// 2; version 3 adds GoAway. A connecting daemon offers its newest version and, refused,
// dials again with its oldest, so daemons of both versions interoperate during a rolling
// upgrade (docs/rpc-protocol.md, "Link versions").
inline constexpr uint32_t kPeerLinkVersion = 3;
inline constexpr uint32_t kMinPeerLinkVersion = 2;
// Largest frame either side accepts: a 64 MiB message sent inline plus its sections.
inline constexpr uint32_t kMaxFrame = (64u << 20) + (1u << 20);
// Largest variable part of one section of a Call frame (a metadata block, details).
inline constexpr uint32_t kMaxSectionBytes = 1u << 20;
// Largest part of a Call frame before its inline message bytes: every section at its
// largest (Start: method, authority and peer up to 8 KiB + metadata; Headers; Status:
// details + trailers; Cancel) is under 5 section limits plus 16 KiB.
inline constexpr uint32_t kMaxCallSectionsBytes = 5 * kMaxSectionBytes + (16u << 10);
// Largest message: gRPC frames a message with a 32-bit length, so none is larger.
inline constexpr uint64_t kMaxMessageBytes = 0xffffffffull;

enum MsgType : uint16_t {
  // shim <-> daemon, requests and replies (the reply echoes the request's frame tag)
  kHello = 0x0101,
  kHelloReply = 0x0102,
  kAttachSegment = 0x0103,
  kAttachSegmentReply = 0x0104,
  kOpenChannel = 0x0105,
  kOpenChannelReply = 0x0106,
  kServe = 0x0107,
  kServeReply = 0x0108,
  kUnserve = 0x0109,
  kUnserveReply = 0x010a,
  // shim <-> daemon, one-way
  kAddSegment = 0x010b,  // daemon -> shim: a receive segment, memfd attached
  kFree = 0x010c,        // either way: released blocks, when the ring was full
  kCloseChannel = 0x010d,  // shim -> daemon (version 2): the program destroyed a channel
  // shim -> daemon, requests (daemons that set kHelloTls): OpenChannel and Serve with the
  // program's TLS credentials; the replies are OpenChannelReply and ServeReply
  kOpenTlsChannel = 0x010e,
  kServeTls = 0x010f,
  // both protocols
  kCall = 0x0110,
  // daemon <-> daemon
  kPeerHello = 0x0180,
  kPeerHelloReply = 0x0181,
  kProbe = 0x0182,
  kProbeReply = 0x0183,
  // daemon <-> daemon on a TLS link (PeerHello.tls_port != 0), after PeerHelloReply: the
  // TLS 1.3 handshake's bytes, one flight per frame, then the accepting daemon's verdict
  // (a StatusReply; either side may send a failed one instead of its next flight)
  kTlsHandshake = 0x0184,
  kTlsDone = 0x0185,
  // accepting daemon -> connecting daemon, link version 3, no payload: start no more calls
  // on this link (the accepting daemon is being replaced); the calls open on it go on, and
  // the connecting daemon closes it after the last one.
  kGoAway = 0x0186,
};

// Hello: the first message on a program connection; the control region's memfd rides along.
// version = kRpcVersion.
using HelloRequest = ProgramHello;

struct HelloReply {
  WireStatus status;
  uint32_t accepted;      // 0: the daemon refuses this program (status says why)
  uint32_t timeout_ms;    // the daemon's bound on any wait
  uint32_t inline_max;    // messages up to this size travel inside Call frames
  uint32_t flags;         // kHello* bits; a daemon that sets none (before they existed) means 0
};
// A managed server also listens natively on its ports, for clients without the preload
// (absent: its ports take calls only through conduitd, conduitd --rpc-managed-only).
inline constexpr uint32_t kHelloNativeListeners = 1u << 0;
// The daemon carries TLS channels and ports (kOpenTlsChannel, kServeTls); without it the
// shim leaves them native.
inline constexpr uint32_t kHelloTls = 1u << 1;

// AttachSegment (shim -> daemon, memfd attached) / AddSegment (daemon -> shim, memfd attached).
struct SegmentInfo {
  uint32_t segment;  // id chosen by the creator, < kMaxSegments
  uint32_t reserved;
  uint64_t size;
};
inline constexpr uint32_t kMaxSegments = 32;

struct StatusReply {
  WireStatus status;
};

struct OpenChannelRequest {
  uint64_t channel;   // id chosen by the shim; Call frames name it in their Start section
  char target[256];   // the gRPC target as the program passed it
};

// OpenTlsChannel: an OpenChannelRequest, then this, then the bytes it counts in its order:
// the roots the server's certificate must lead to (PEM, not empty), the client's private
// key and certificate chain (PEM, both or neither), the name the server's certificate
// must match (the target's host, or the channel's grpc.ssl_target_name_override).
struct TlsChannelCredentials {
  uint32_t root_bytes;
  uint32_t key_bytes;
  uint32_t chain_bytes;
  uint32_t name_bytes;
};
// ServeTls: a ServeRequest, then this, then the server's private key and certificate chain
// (PEM, not empty) and the roots client certificates are checked against (PEM, may be
// empty).
struct TlsServerCredentials {
  uint32_t client_cert_mode;  // gRPC's grpc_ssl_client_certificate_request_type (0..4)
  uint32_t key_bytes;
  uint32_t chain_bytes;
  uint32_t root_bytes;
};
// Largest PEM text of either (a full public root bundle is about 250 KiB), and of a name.
inline constexpr uint32_t kMaxTlsPemBytes = 1u << 20;
inline constexpr uint32_t kMaxTlsNameBytes = 255;

struct OpenChannelReply {
  WireStatus status;  // not ok: the channel stays native, the message says why
  uint32_t managed;
  uint32_t reserved;
};

struct ServeRequest {
  uint64_t server;  // id chosen by the shim; Start sections of incoming calls name it
  uint32_t port;    // the TCP port the program asked gRPC to listen on
  uint32_t reserved;
  // Version 2: the host part of the address the program asked gRPC to listen on, without
  // brackets: "" (none), "0.0.0.0" or "::" (every address), "127.0.0.1", "::1",
  // "localhost", another address or name of this host. The daemon carries calls to the
  // server only as a socket bound there would receive them (docs/rpc-protocol.md).
  char host[256];
};

struct CloseChannelRequest {
  uint64_t channel;  // an id from OpenChannel; Starts naming it are refused afterwards
};

struct UnserveRequest {
  uint64_t server;
};

// A released block: `offset` in segment `segment` of the receiver's own segments.
struct FreeEntry {
  uint32_t segment;
  uint32_t reserved;
  uint64_t offset;
};

// Single-producer single-consumer ring of FreeEntry in the control region. The producer
// owns `head`, the consumer `tail`; each side keeps its own copy and treats the other's as
// untrusted input (a program can scribble on the region; that may only hurt itself).
struct alignas(64) RingIndex {
  std::atomic<uint64_t> value;
  char pad[56];
};
static_assert(std::atomic<uint64_t>::is_always_lock_free);

inline constexpr uint32_t kRingEntries = 16384;

struct ControlRegion {
  RingIndex to_shim_head;    // daemon produces: the program's send blocks it is done with
  RingIndex to_shim_tail;
  RingIndex to_daemon_head;  // program produces: receive blocks it is done with
  RingIndex to_daemon_tail;
  FreeEntry to_shim[kRingEntries];
  FreeEntry to_daemon[kRingEntries];
};
inline constexpr uint64_t kControlRegionBytes = (sizeof(ControlRegion) + 4095) & ~uint64_t{4095};

// Daemon <-> daemon: the connecting daemon's first message on an RPC link.
struct PeerHello {
  uint32_t rpc_version;
  // 0: a link for insecure channels, pooled per daemon. Else a TLS link for one channel
  // to this port: the TLS handshake follows the reply, and the link carries calls to this
  // port only (docs/rpc-protocol.md, "TLS links"). A daemon from before reads it as 0's
  // reserved field and fails at the first kTlsHandshake: the channel stays native.
  uint32_t tls_port;
  char daemon[64];  // the connecting daemon, for logs
};

// Probe: is `port` served by a managed program on the receiving daemon's host?
struct ProbeRequest {
  uint32_t port;
  uint32_t reserved;
};

struct ProbeReply {
  WireStatus status;
  uint32_t served;
  uint32_t flags;  // kProbeTls when the port is served with TLS (0 from older daemons)
};
inline constexpr uint32_t kProbeTls = 1u << 0;

// Sizes are part of the protocol.
static_assert(sizeof(TlsChannelCredentials) == 16);
static_assert(sizeof(TlsServerCredentials) == 16);
static_assert(sizeof(PeerHello) == 72);
static_assert(sizeof(ProbeReply) == sizeof(WireStatus) + 8);

// Every struct's size is part of the protocol, and each is copied as bytes.
static_assert(sizeof(HelloReply) == 272 && kWireStruct<HelloReply>);
static_assert(sizeof(SegmentInfo) == 16 && kWireStruct<SegmentInfo>);
static_assert(sizeof(StatusReply) == 256 && kWireStruct<StatusReply>);
static_assert(sizeof(OpenChannelRequest) == 264 && kWireStruct<OpenChannelRequest>);
static_assert(sizeof(OpenChannelReply) == 264 && kWireStruct<OpenChannelReply>);
static_assert(sizeof(ServeRequest) == 272 && kWireStruct<ServeRequest>);
static_assert(sizeof(CloseChannelRequest) == 8 && kWireStruct<CloseChannelRequest>);
static_assert(sizeof(UnserveRequest) == 8 && kWireStruct<UnserveRequest>);
static_assert(sizeof(FreeEntry) == 16 && kWireStruct<FreeEntry>);
static_assert(sizeof(ControlRegion) == 524544 && kWireStruct<ControlRegion>);
static_assert(sizeof(ProbeRequest) == 8 && kWireStruct<ProbeRequest>);

}  // namespace conduit::rpcproto

#endif  // CONDUIT_PROTOCOL_RPC_PROTOCOL_H_
