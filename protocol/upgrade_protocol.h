// The handover between a running conduitd and the new process that replaces it (a live
// upgrade, docs/upgrade.md), over the socketpair the old daemon creates when it starts the
// new one (its end is descriptor kTakeOverFd in the new process, named by --take-over-fd).
//
// The framing is protocol/frame_format.h's, with its own magic; the conversation is
//
//   new -> old   Hello      {state versions the new daemon reads, its release}
//   old -> new   Refuse     WireStatus: why not (versions, sessions open, ...); end
//            or  Listener   {role} with the listening socket attached (SCM_RIGHTS), one per socket
//                Descriptor {index} with a descriptor attached: a large stored object's memfd
//                           or a program's connection; indices 1, 2, ... in order
//                           (DaemonState.objects and .programs name them)
//                State      the serialized conduit.upgrade.v1.DaemonState (upgrade_state.proto)
//   new -> old   Ready      the new daemon is ready to serve
//            or  Failed     WireStatus: the old daemon takes its sockets back and goes on; end
//   old -> new   Go         the old daemon will not accept again: the new one starts serving
//                           and the old one exits
//
// Until Go the old daemon keeps every socket and its state, its accept loops parked:
// connections wait in the kernels' backlogs, none is refused. A new daemon that dies, or
// says nothing within the old one's deadline, counts as Failed; a new daemon that hears no
// Go after its Ready (the old one gave up on it) exits without having served.
#ifndef CONDUIT_PROTOCOL_UPGRADE_PROTOCOL_H_
#define CONDUIT_PROTOCOL_UPGRADE_PROTOCOL_H_

#include <cstdint>

#include "protocol/frame_format.h"

namespace conduit::upgradeproto {

constexpr uint32_t kMagic = 0x55544443;  // "CDTU" little-endian
constexpr uint16_t kVersion = 1;         // of this conversation's framing and messages
constexpr int kTakeOverFd = 3;           // the new daemon's end of the socketpair
constexpr uint32_t kMaxStateBytes = 64u << 20;
constexpr uint32_t kMaxDescriptors = 1u << 20;  // descriptors one handover may pass

enum MsgType : uint16_t {
  kHello = 1,
  kRefuse = 2,
  kListener = 3,
  kState = 4,
  kReady = 5,
  kFailed = 6,
  kGo = 7,
  kDescriptor = 8,
};

struct Hello {
  uint32_t min_state_version;  // the DaemonState versions this (new) daemon can read
  uint32_t max_state_version;
  char release[56];            // its release, for the old daemon's log and refusals
};
static_assert(sizeof(Hello) == 64);

enum class ListenerRole : uint32_t {
  kProgram = 1,  // the program socket (Unix)
  kPeer = 2,     // the peer port (TCP)
  kAdmin = 3,    // the admin socket (Unix)
  kMetrics = 4,  // the Prometheus port (TCP), when the daemon has one
};

struct ListenerMsg {
  uint32_t role;  // ListenerRole
  uint32_t reserved;
};
static_assert(sizeof(ListenerMsg) == 8);

struct DescriptorMsg {
  uint32_t index;  // 1, 2, ...: the n-th Descriptor message
  uint32_t reserved;
};
static_assert(sizeof(DescriptorMsg) == 8);

static_assert(kWireStruct<Hello> && kWireStruct<ListenerMsg> && kWireStruct<DescriptorMsg>);

}  // namespace conduit::upgradeproto

#endif  // CONDUIT_PROTOCOL_UPGRADE_PROTOCOL_H_
