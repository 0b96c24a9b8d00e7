// The daemon <-> daemon protocol, version 3 (documented in docs/daemon-protocol.md).
//
// Every connection is authenticated first (protocol/auth_protocol.h); the identity a daemon
// acts on is the one the handshake proved, never an address a message names.
//
// Three kinds of TCP connection, all opened by the side that needs them:
//  * rendezvous: a daemon sends Register for one local rank to the communicator's root
//    daemon (named in the unique id) and waits for Membership: every rank's daemon and
//    the ring order the root chose.
//  * collective link: one per (communicator, pair of daemons, configuration epoch); after
//    LinkHello it carries raw collective payload in the order the algorithms agree on. It
//    may be bound to one of the topology's paths.
//  * p2p link: one per (communicator, pair of daemons); after LinkHello it carries
//    P2pData frames, each followed by its payload bytes, and the reconfiguration
//    messages (ReconfigForward, ReconfigPropose, ReconfigSeq).
#ifndef CONDUIT_PROTOCOL_PEER_PROTOCOL_H_
#define CONDUIT_PROTOCOL_PEER_PROTOCOL_H_

#include <cstdint>

#include "protocol/frame_format.h"
#include "protocol/shim_protocol.h"

namespace conduit::peerproto {

inline constexpr uint32_t kMagic = 0x50544443;  // "CDTP"
// The framing's version on daemon connections (frame header): fixed, whatever the services'
// own versions are, since every reader refuses another one (docs/upgrade.md).
inline constexpr uint16_t kVersion = 3;
// The collectives' message version (LinkHello, P2pData, CollectiveHeader, Reconfig*, Abort)
// is negotiated per communicator at its rendezvous: each member's daemon says in its
// Register the oldest and newest version it speaks, the root chooses the newest all of them
// (and itself) speak and answers it in the Membership. Version 3 is the one daemons from
// before negotiation speak: they send no range and answer 0.
inline constexpr uint32_t kCollectiveVersionBeforeNegotiation = 3;
// Version 4 has version 3's messages; what changed is a choice every daemon of a
// communicator must make alike: an all-reduce on 4 hosts and more that `auto` would run by
// the ring runs by recursive halving and doubling up to 1 MiB unless the operator set
// --rh-max-bytes (daemons of 3 never chose it by default).
inline constexpr uint32_t kCollectiveVersionHalvingDoublingByDefault = 4;
// Version 5 has version 4's messages; halving-doubling's default range grows to 2 MiB
// (above 1 MiB, daemons of 4 run the ring), measured faster there once its exchanges
// reduced their bytes as they arrive (docs/benchmarks.md, "Halving-doubling up to 2 MiB").
inline constexpr uint32_t kCollectiveVersionHalvingDoublingTo2MiB = 5;
// Version 6 has version 5's messages; on 2 hosts an all-reduce that `auto` would run by the
// ring runs by recursive doubling up to 1 MiB unless the operator set --rd-max-bytes
// (daemons of 5 stop at 64 KiB): one exchange of the whole buffer moves the ring's bytes in
// one step instead of two (docs/benchmarks.md, "Recursive doubling up to 1 MiB on 2 hosts").
inline constexpr uint32_t kCollectiveVersionTwoHostRecursiveDoublingTo1MiB = 6;
inline constexpr uint32_t kMaxPayload = 1u << 22;  // Membership of up to ~65K ranks
// The largest communicator a rendezvous accepts (its Membership fits in kMaxPayload).
inline constexpr int32_t kMaxRanks = 1 << 15;
// Rendezvous a root serves at once; more are refused until some complete or time out.
inline constexpr size_t kMaxPendingRendezvous = 1024;
inline constexpr int kDefaultPort = 7650;

enum MsgType : uint16_t {
  kRegister = 1,
  kMembership = 2,
  kLinkHello = 3,
  kLinkHelloReply = 4,
  kP2pData = 5,
  kReconfigForward = 6,  // a daemon -> host 0 of the communicator: please sequence this
  kReconfigPropose = 7,  // host 0 -> every daemon: configuration epoch E is this
  kReconfigSeq = 8,      // every daemon -> every daemon: I launched N collectives before E
  kAbort = 9,            // a daemon -> every daemon: the communicator is aborted, and why
};

// The payload of a Register: a RegisterRequest, then a RegisterVersions unless the daemon
// speaks version 3 only (what daemons from before negotiation send, and all their roots
// accept: a daemon that speaks only 3 sends the same 112 bytes as they do).
struct RegisterRequest {
  uint64_t comm_key;
  int32_t nranks;
  int32_t rank;
  char daemon_addr[64];  // the registering daemon, as others reach it (must be who it proved to be)
  uint8_t secret[32];    // the communicator's secret: comm_key must be its key (security/comm_secret.h)
};

struct RegisterVersions {
  uint32_t oldest;  // the collective message versions the registering daemon speaks
  uint32_t newest;
};

// Followed by nranks shimproto::DaemonAddr, then (on success) a RingOrder.
struct MembershipReply {
  WireStatus status;
  int32_t nranks;
  uint32_t version;  // the communicator's collective message version; 0 from a root from
                     // before negotiation (then 3)
};

// Followed by nhosts int32: ring position -> host index, hosts ordered by lowest rank.
struct RingOrder {
  int32_t nhosts;
  int32_t reserved;
};

enum Channel : uint32_t { kCollective = 0, kP2p = 1 };

struct LinkHello {
  uint64_t comm_key;
  int32_t from_host;  // index of the connecting daemon in the communicator's host list
  uint32_t channel;
  uint32_t epoch;     // 0: set up with the communicator; E: replaces the link at epoch E
  int32_t path;       // the topology path it is bound to (-1: the primary address)
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

// ReconfigForward / ReconfigPropose, followed by nhosts int32 (the new ring, position ->
// host) and npins PathPin.
struct ReconfigHeader {
  uint64_t epoch;        // 0 in a Forward; the sequenced epoch in a Propose
  int32_t origin_host;   // the daemon the operator asked
  uint32_t request_id;   // the origin's id for the request, echoed in the Propose
  uint32_t flags;        // ReconfigFlags
  uint32_t nhosts;       // ring entries that follow: the communicator's host count, or 0
  uint32_t npins;
  char algorithm[20];    // with kSetAlgorithm: "auto", "ring" or "rd"
};

enum ReconfigFlags : uint32_t {
  kSetRing = 1,
  kSetAlgorithm = 2,
  kRepath = 4,  // every connecting daemon re-chooses all its collective paths by its policy
};

// Collective link between hosts a and b (either order) moves to `path` (-1: primary).
struct PathPin {
  int32_t a;
  int32_t b;
  int32_t path;
};

// Every collective's inter-host transfers begin, in each direction of each link the
// algorithm uses, with the sender's description of the collective; the receiver checks it
// against its own before it uses a byte of the data (docs/daemon-protocol.md, "Agreement").
inline constexpr uint32_t kCollectiveMagic = 0x4b544443;  // "CDTK"
struct CollectiveHeader {
  uint32_t magic;
  uint8_t kind;      // shimproto::OpKind
  uint8_t dtype;     // ncclDataType_t
  uint8_t redop;     // the reduction (0 for collectives that do not reduce)
  uint8_t algorithm; // an all-reduce's CollectiveAlgorithm on this host; 0: not said
  uint64_t seq;      // the communicator's collective sequence number
  uint64_t count;    // elements per rank, as the ranks passed it
  int32_t root;      // the root rank of Broadcast/Reduce, else -1
  uint32_t epoch;    // the configuration epoch it runs under
};
static_assert(sizeof(CollectiveHeader) == 32);

// How the hosts run an all-reduce. Each daemon chooses from its own settings
// (--allreduce-algo, --rd-max-bytes, --rh-max-bytes): hosts whose settings differ would run
// different exchanges, so the choice travels in the header and must agree. 0 (what daemons
// before this field sent in its place) agrees with anything.
enum CollectiveAlgorithm : uint8_t {
  kAlgorithmNotSaid = 0,
  kAlgorithmRing = 1,
  kAlgorithmRecursiveDoubling = 2,
  kAlgorithmHalvingDoubling = 3,
};

// kAbort: a daemon that aborts a communicator tells the others why, on the p2p channel,
// before it drops its links, so their ranks fail with the same code and reason instead of
// a lost connection. Payload: a WireStatus.

struct ReconfigSeq {
  uint64_t epoch;
  uint64_t launched;  // collectives this daemon launched when it learned of the epoch
};

inline constexpr uint32_t kMaxControlPayload = 1u << 20;

// Every struct's size is part of the protocol, and each is copied as bytes.
static_assert(sizeof(RegisterRequest) == 112 && kWireStruct<RegisterRequest>);
static_assert(sizeof(RegisterVersions) == 8 && kWireStruct<RegisterVersions>);
static_assert(sizeof(MembershipReply) == 264 && kWireStruct<MembershipReply>);
static_assert(sizeof(RingOrder) == 8 && kWireStruct<RingOrder>);
static_assert(sizeof(LinkHello) == 24 && kWireStruct<LinkHello>);
static_assert(sizeof(LinkHelloReply) == 256 && kWireStruct<LinkHelloReply>);
static_assert(sizeof(P2pData) == 16 && kWireStruct<P2pData>);
static_assert(sizeof(ReconfigHeader) == 48 && kWireStruct<ReconfigHeader>);
static_assert(sizeof(PathPin) == 12 && kWireStruct<PathPin>);
static_assert(sizeof(ReconfigSeq) == 16 && kWireStruct<ReconfigSeq>);

}  // namespace conduit::peerproto

#endif  // CONDUIT_PROTOCOL_PEER_PROTOCOL_H_
