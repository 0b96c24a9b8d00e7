// The object-store protocol, version 3 with programs and 5 between daemons (documented in
// docs/object-protocol.md).
//
// Message types 0x0200..0x02ff (service 2 in server/service.h), in both of Conduit's
// framings: 0x0201..0x027f between a program (libhoplite) and its host's conduitd on the
// program socket (shimproto magic), 0x0281..0x02ff between daemons on the peer port
// (peerproto magic). Every struct is little-endian, fixed-size and trivially copyable;
// variable parts (object ids, inline bytes) follow the struct, as each comment says.
#ifndef CONDUIT_PROTOCOL_OBJECT_PROTOCOL_H_
#define CONDUIT_PROTOCOL_OBJECT_PROTOCOL_H_

#include <cstdint>

#include "protocol/frame_format.h"

namespace conduit::objproto {

// Version 2: DirEvent carries a small object's bytes; Publish may reserve an id (kPubReserve).
// Version 3: objects have an owner (uid, gid, read access) that travels with them (Put,
// Reduce, Publish, AcquireReply, DirEvent); DirDelete carries who asks; codes 11 and 12.
// Version 4 (between daemons only; programs still speak 3): DirStoreCopy, a shard hands a
// small object's bytes to the daemons that will be asked for it.
// Version 5 (between daemons): a shard asks holders to acknowledge a Delete's DropCopy
// (kDropAck, DropCopyDone) and answers the Delete once they have dropped their copies.
inline constexpr uint32_t kVersion = 3;
// Between daemons the versions are negotiated (PeerHello): the ones this release speaks.
inline constexpr uint32_t kOldestPeerVersion = 3;
inline constexpr uint32_t kNewestPeerVersion = 5;
// The first peer version whose daemons take DirStoreCopy.
inline constexpr uint32_t kStoreCopyPeerVersion = 4;
// The first peer version whose daemons acknowledge a DropCopy that asks for it (kDropAck).
inline constexpr uint32_t kDropAckPeerVersion = 5;
// Objects smaller than this travel inline with directory messages (Hoplite's small-object
// fast path) and never use shared memory.
inline constexpr uint64_t kInlineLimit = 64 * 1024;
inline constexpr uint32_t kMaxIdBytes = 63;
inline constexpr uint32_t kMaxSources = 4096;
// Frames carry at most an inline object plus headers.
inline constexpr uint32_t kMaxPayload = 1u << 20;

// Result codes of the object service (libhoplite's hoplite::Code has the same values).
enum Code : int32_t {
  kOk = 0,
  kTimeout = 1,       // a bounded wait ran out (object not created in time, reduce incomplete)
  kNotFound = 2,      // no such object where one was required
  kExists = 3,        // Put of an id that already exists (objects are immutable)
  kOutOfMemory = 4,   // the store is full and nothing can be evicted
  kInvalid = 5,       // malformed request or bad arguments
  kLost = 6,          // every complete copy died (or the creator died mid-Put)
  kUnavailable = 7,   // lost contact with a daemon
  kRetry = 8,         // internal: the directory shard moved, ask the new owner
  kInternal = 9,
  kRefused = 10,      // the daemon's policy refuses this program
  kPermissionDenied = 11,  // the caller's uid may not read or delete this object
  kOverQuota = 12,    // the caller's uid has used its share of this daemon's store
};
inline constexpr int32_t kLastCode = kOverQuota;

struct Status {
  int32_t code;
  char message[252];
};
static_assert(sizeof(Status) == 256);

struct Id {
  uint8_t len;
  char bytes[kMaxIdBytes];
};
static_assert(sizeof(Id) == 64);

// Who may read an object besides its owner and the operators (root, each daemon's euid and
// its --admin-uid). kAccessDefault (in a Put or Reduce only) asks for the daemon's
// --object-default-access; a stored object always has one of the others.
enum Access : uint32_t {
  kAccessDefault = 0,
  kAccessOwner = 1,  // the owner only
  kAccessGroup = 2,  // also programs whose primary or supplementary groups include `gid`
  kAccessWorld = 3,  // every local user of every daemon
};

// The owner of an object: the uid and primary gid of the program that created it (Put, or
// the Reduce whose target it is) as the kernel reported its connection (SO_PEERCRED).
struct Owner {
  uint32_t uid;
  uint32_t gid;
  uint32_t access;  // Access; 0 only while nobody has published the object
  uint32_t reserved;
};
static_assert(sizeof(Owner) == 16);

// -------------------------------------------------------------- program <-> daemon

enum ShimType : uint16_t {
  kHello = 0x0201,
  kHelloReply = 0x0202,
  kPut = 0x0203,          // PutRequest + `size` inline bytes when size < kInlineLimit
  kPutReply = 0x0204,     // Status; for a large object a read-write memfd rides along
  kPutProgress = 0x0205,  // Progress, one-way: bytes copied into the memfd so far
  kPutDone = 0x0206,      // Status: answers the Progress that reached `size`
  kGet = 0x0207,          // GetRequest
  kGetReply = 0x0208,     // GetReply + inline bytes, or a read-only memfd
  kGetProgress = 0x0209,  // GetProgress, daemon -> program (copying Get of a large object)
  kRelease = 0x020a,      // Id, one-way: the program unmapped a read-only view
  kDelete = 0x020b,       // Id
  kDeleteReply = 0x020c,  // Status
  kReduce = 0x020d,       // ReduceRequest + nsources Id
  kReduceReply = 0x020e,  // ReduceReply + nused u32 source indices (in arrival order)
  kWait = 0x020f,         // WaitRequest + n Id
  kWaitReply = 0x0210,    // WaitReply + nready u32 indices (in the order they became ready)
  kState = 0x0211,        // none
  kStateReply = 0x0212,   // Status + JSON text (the daemon's object state, for tools/tests)
};

using HelloRequest = ProgramHello;  // version = kVersion

struct HelloReply {
  Status status;
  uint32_t timeout_ms;  // the daemon's bound on its own waits
  uint32_t block_bytes; // pipelining granularity: programs copy in blocks of this size
};

struct PutRequest {
  Id id;
  uint64_t size;
  uint32_t access;  // Access
  uint32_t reserved;
};

struct Progress {
  uint64_t bytes;
};

enum GetFlags : uint32_t { kGetReadOnly = 1 };

struct GetRequest {
  Id id;
  uint32_t timeout_ms;
  uint32_t flags;
};

// Copying Get of a large object: the memfd arrives at once (ready = bytes already there),
// then GetProgress frames follow until ready == size or status is an error.
// Read-only Get: only once the object is complete.
struct GetReply {
  Status status;
  uint64_t size;
  uint64_t ready;
  uint32_t inline_bytes;  // this many bytes follow (small objects)
  uint32_t reserved;
};

struct GetProgress {
  Status status;
  uint64_t ready;
};

enum ReduceOp : uint32_t { kSum = 0, kProd = 1, kMax = 2, kMin = 3 };

struct ReduceRequest {
  Id target;
  uint32_t op;         // ReduceOp (same values as ncclRedOp_t)
  uint32_t dtype;      // ncclDataType_t
  uint32_t num_objects;
  uint32_t nsources;
  uint32_t timeout_ms;
  uint32_t access;  // Access of the target
};

struct ReduceReply {
  Status status;
  uint64_t size;
  uint32_t degree;  // the tree degree the daemon chose
  uint32_t nused;
};

struct WaitRequest {
  uint32_t timeout_ms;
  uint32_t num_ready;
  uint32_t n;
  uint32_t reserved;
};

struct WaitReply {
  Status status;
  uint32_t nready;
  uint32_t reserved;
};

// -------------------------------------------------------------- daemon <-> daemon
//
// Control connection: opened by each daemon to each other daemon in --object-peers,
// starting with PeerHello. Requests carry a tag, answered by a reply with the same tag;
// pushes (DirEvent) travel back on the subscriber's own connection.
// Data connection: starts with Fetch; the reply is followed by the raw object bytes.

enum PeerType : uint16_t {
  kPeerHello = 0x0281,      // PeerHello
  kPeerHelloReply = 0x0282, // Status
  kPing = 0x0283,           // none
  kPong = 0x0284,           // none
  kDirPublish = 0x0285,     // Publish + inline bytes
  kDirPublishReply = 0x0286,// Status
  kDirUnpublish = 0x0287,   // Location, one-way
  kDirAcquire = 0x0289,     // Acquire
  kDirAcquireReply = 0x028a,// AcquireReply + inline bytes
  kDirRelease = 0x028b,     // Release, one-way
  kDirSubscribe = 0x028d,   // Subscribe, one-way; events follow
  kDirEvent = 0x028e,       // DirEvent + inline bytes, pushed
  kDirUnsubscribe = 0x028f, // Subscribe, one-way
  kDirDelete = 0x0291,      // DeleteRequest
  kDirDeleteReply = 0x0292, // Status
  kDirCount = 0x0293,       // Id
  kDirCountReply = 0x0294,  // CountReply
  kDropCopy = 0x0295,       // DropCopy (owner -> holder); one-way unless flags has kDropAck
  kDropCopyDone = 0x0296,   // Status (holder -> owner; version 5, answers a kDropAck DropCopy)
  kGoingAway = 0x0297,      // GoingAway: this daemon's process is being replaced (live upgrade)
  kGoingAwayReply = 0x0298, // Status
  kDirStoreCopy = 0x0299,   // StoreCopy + size bytes, one-way (shard -> daemon; version 4)
  kFetch = 0x02a1,          // Fetch (data connection)
  kFetchReply = 0x02a2,     // FetchReply, then size - offset raw bytes
  kNodeStart = 0x02b1,      // NodeStart + nchildren ChildInfo (coordinator -> node host)
  kNodeChild = 0x02b3,      // NodeChild (coordinator -> node host)
  kNodeCancel = 0x02b5,     // NodeCancel (coordinator -> node host)
  kNodeReport = 0x02b7,     // NodeReport (node host -> coordinator)
};

struct Addr {
  char text[64];  // "ip:port" of a daemon's peer port
};

// The dialer's versions: `version` the oldest it speaks, `newest` the newest (0 from a
// daemon that predates negotiation, which speaks `version` only and accepts a hello only
// of its own version).
struct PeerHello {
  uint32_t version;
  uint32_t newest;
  Addr from;
};

// PeerHelloReply: a Status, then (from daemons that negotiate) the version both use. A
// dialer that finds no PeerHelloAccept after the status uses its oldest version.
struct PeerHelloAccept {
  uint32_t version;
  uint32_t reserved;
};

enum PublishFlags : uint32_t {
  kPubComplete = 1,   // the copy is complete (else partial, still being written)
  kPubOrigin = 2,     // the copy was created here by Put or Reduce (pinned until Delete)
  kPubCreate = 4,     // a new object: fail with kExists if the id is known
  kPubRepublish = 8,  // soft state re-sent to a new shard owner
  kPubReserve = 16,   // with kPubCreate: claim the id (a Reduce target) before its size is
                      // known; no location yet. Fails with kExists like a create.
};

struct Publish {
  Id id;
  Addr where;
  uint64_t size;
  uint32_t flags;
  uint32_t inline_bytes;  // follow the struct (small objects only)
  Owner owner;
};

struct Location {
  Id id;
  Addr where;
};

struct Acquire {
  Id id;
  Addr requester;
  Addr prev_sender;  // empty, or the sender whose transfer to requester just ended/failed
  Addr avoid;        // empty, or a sender to avoid if any other exists
  uint32_t timeout_ms;
  uint32_t reserved;
};

struct AcquireReply {
  Status status;
  uint64_t size;
  Addr sender;
  uint32_t inline_bytes;
  uint32_t reserved;
  Owner owner;
};

struct Release {
  Id id;
  Addr sender;
  Addr receiver;
  uint32_t receiver_complete;  // 1: receiver now holds a complete copy; 0: it gave up
  uint32_t reserved;
};

struct Subscribe {
  Id id;
  uint64_t sub;  // subscriber's handle, echoed in events
};

enum EventKind : uint32_t {
  kEvLocation = 1,  // `where` holds a (partial or complete) copy
  kEvMoved = 2,     // the shard moved: subscribe again at the new owner
};

struct DirEvent {
  uint64_t sub;
  Id id;
  Addr where;
  uint64_t size;
  uint32_t kind;
  uint32_t complete;
  uint32_t inline_bytes;  // a small complete object's bytes follow (a Reduce needs no fetch)
  uint32_t reserved;
  Owner owner;            // with kEvLocation
};

// Delete on behalf of a program of uid `uid`; the shard refuses unless that uid owns the
// object or the asking daemon vouches that it is one of its operators.
enum DeleteFlags : uint32_t { kDeleteAsOperator = 1 };

struct DeleteRequest {
  Id id;
  uint32_t uid;
  uint32_t flags;  // DeleteFlags
};

struct CountReply {
  Status status;
  uint32_t complete;
  uint32_t partial;
};

enum DropReason : uint32_t { kDropDeleted = 1, kDropLost = 2 };

struct DropCopy {
  Id id;
  uint32_t reason;
  uint32_t flags;  // kDropAck; 0 from daemons before version 5
};
// The sender waits for DropCopyDone (version 5): the copy is gone from the holder's store
// when it is sent.
inline constexpr uint32_t kDropAck = 1;

// A shard lists the receiving daemon as a complete location of a small object and hands it
// the bytes, so that its programs' Gets are answered there without asking the shard; the
// receiver keeps them as a cached copy (evictable, charged to nobody) or withdraws the
// location (DirUnpublish) when it cannot.
struct StoreCopy {
  Id id;
  uint64_t size;  // the bytes following the struct: exactly this many, < kInlineLimit
  Owner owner;
};

// A daemon whose process a live upgrade replaces tells the others before it exits: for
// grace_ms they keep its copies' locations (the new process holds the same copies behind
// the same address) instead of dropping them, and declaring objects lost, when its
// connections end.
struct GoingAway {
  uint32_t grace_ms;
  uint32_t reserved;
};

struct Fetch {
  Id id;
  uint64_t offset;
  uint32_t timeout_ms;
  uint32_t reserved;
};

struct FetchReply {
  Status status;
  uint64_t size;
};

struct ReduceKey {
  uint64_t value;  // coordinator-unique reduce id
  Addr coordinator;
};

struct ChildInfo {
  int32_t slot;  // -1: not assigned yet
  uint32_t reserved;
  Addr where;
  Id stream;     // the object (or internal partial result) to fetch from `where`
};

// Starts the task of tree slot `slot`, generation `gen`: reduce the local object `own`
// (none for the coordinator's sink) with the children's streams into `output`.
struct NodeStart {
  ReduceKey key;
  int32_t slot;
  uint32_t gen;
  Id own;
  Id output;
  uint64_t size;
  uint32_t op;
  uint32_t dtype;
  uint32_t nchildren;
  uint32_t timeout_ms;
};

struct NodeChild {
  ReduceKey key;
  int32_t slot;
  uint32_t gen;
  uint32_t index;  // which child of the node
  uint32_t reserved;
  ChildInfo child;
};

struct NodeCancel {
  ReduceKey key;
  int32_t slot;  // -1: every task of this reduce
  uint32_t gen;
};

enum NodeOutcome : uint32_t { kNodeDone = 1, kNodeOwnFailed = 2, kNodeChildFailed = 3 };

struct NodeReport {
  ReduceKey key;
  int32_t slot;
  uint32_t gen;
  uint32_t outcome;
  uint32_t child;  // for kNodeChildFailed
  Status status;
};

// Every struct's size is part of the protocol, and each is copied as bytes.
static_assert(sizeof(HelloReply) == 264 && kWireStruct<HelloReply>);
static_assert(sizeof(PutRequest) == 80 && kWireStruct<PutRequest>);
static_assert(sizeof(Progress) == 8 && kWireStruct<Progress>);
static_assert(sizeof(GetRequest) == 72 && kWireStruct<GetRequest>);
static_assert(sizeof(GetReply) == 280 && kWireStruct<GetReply>);
static_assert(sizeof(GetProgress) == 264 && kWireStruct<GetProgress>);
static_assert(sizeof(ReduceRequest) == 88 && kWireStruct<ReduceRequest>);
static_assert(sizeof(ReduceReply) == 272 && kWireStruct<ReduceReply>);
static_assert(sizeof(WaitRequest) == 16 && kWireStruct<WaitRequest>);
static_assert(sizeof(WaitReply) == 264 && kWireStruct<WaitReply>);
static_assert(sizeof(Addr) == 64 && kWireStruct<Addr>);
static_assert(sizeof(PeerHello) == 72 && kWireStruct<PeerHello>);
static_assert(sizeof(PeerHelloAccept) == 8 && kWireStruct<PeerHelloAccept>);
static_assert(sizeof(Publish) == 160 && kWireStruct<Publish>);
static_assert(sizeof(Location) == 128 && kWireStruct<Location>);
static_assert(sizeof(Acquire) == 264 && kWireStruct<Acquire>);
static_assert(sizeof(AcquireReply) == 352 && kWireStruct<AcquireReply>);
static_assert(sizeof(Release) == 200 && kWireStruct<Release>);
static_assert(sizeof(Subscribe) == 72 && kWireStruct<Subscribe>);
static_assert(sizeof(DirEvent) == 176 && kWireStruct<DirEvent>);
static_assert(sizeof(DeleteRequest) == 72 && kWireStruct<DeleteRequest>);
static_assert(sizeof(CountReply) == 264 && kWireStruct<CountReply>);
static_assert(sizeof(DropCopy) == 72 && kWireStruct<DropCopy>);
static_assert(sizeof(StoreCopy) == 88 && kWireStruct<StoreCopy>);
static_assert(sizeof(Fetch) == 80 && kWireStruct<Fetch>);
static_assert(sizeof(FetchReply) == 264 && kWireStruct<FetchReply>);
static_assert(sizeof(ReduceKey) == 72 && kWireStruct<ReduceKey>);
static_assert(sizeof(ChildInfo) == 136 && kWireStruct<ChildInfo>);
static_assert(sizeof(NodeStart) == 232 && kWireStruct<NodeStart>);
static_assert(sizeof(NodeChild) == 224 && kWireStruct<NodeChild>);
static_assert(sizeof(NodeCancel) == 80 && kWireStruct<NodeCancel>);
static_assert(sizeof(NodeReport) == 344 && kWireStruct<NodeReport>);

}  // namespace conduit::objproto

#endif  // CONDUIT_PROTOCOL_OBJECT_PROTOCOL_H_
