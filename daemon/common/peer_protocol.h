// The daemon <-> daemon protocol, version 1 (documented in docs/daemon-protocol.md).
//
// Three kinds of TCP connection, all opened by the side that needs them:
//  * rendezvous: a daemon sends Register for one local rank to the communicator's root
//    daemon (named in the unique id) and waits for Membership: every rank's daemon.
//  * collective link: one per (communicator, pair of daemons); after LinkHello it carries
//    raw collective payload in the order the algorithms agree on.
//  * p2p link: one per (communicator, pair of daemons); after LinkHello it carries
//    P2pData frames, each followed by its payload bytes.
#ifndef CONDUIT_DAEMON_COMMON_PEER_PROTOCOL_H_
#define CONDUIT_DAEMON_COMMON_PEER_PROTOCOL_H_

#include <cstdint>

#include "common/frame.h"
#include "common/shim_protocol.h"

namespace conduit::peerproto {

inline constexpr uint32_t kMagic = 0x50544443;  // "CDTP"
inline constexpr uint16_t kVersion = 1;
inline constexpr uint32_t kMaxPayload = 1u << 22;  // Membership of up to ~65K ranks
inline constexpr int kDefaultPort = 7650;

enum MsgType : uint16_t {
  kRegister = 1,
  kMembership = 2,
  kLinkHello = 3,
  kLinkHelloReply = 4,
  kP2pData = 5,
};

struct RegisterRequest {
  uint64_t comm_key;
  int32_t nranks;
  int32_t rank;
  char daemon_addr[64];  // the registering daemon, as others reach it
};

// Followed by nranks shimproto::DaemonAddr.
struct MembershipReply {
  WireStatus status;
  int32_t nranks;
  int32_t reserved;
};

enum Channel : uint32_t { kCollective = 0, kP2p = 1 };

struct LinkHello {
  uint64_t comm_key;
  int32_t from_host;  // index of the connecting daemon in the communicator's host list
  uint32_t channel;
};

struct LinkHelloReply {
  WireStatus status;
};

// Header of a P2pData frame; `bytes` raw payload bytes follow the frame.
struct P2pData {
  int32_t src_rank;
  int32_t dst_rank;
  uint64_t bytes;
};

}  // namespace conduit::peerproto

#endif  // CONDUIT_DAEMON_COMMON_PEER_PROTOCOL_H_
