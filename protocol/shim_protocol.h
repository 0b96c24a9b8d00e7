// The shim <-> daemon protocol, version 3 (documented in docs/shim-protocol.md).
//
// Each communicator rank in a program owns one Unix-socket connection to its host's
// conduitd and issues one request at a time on it; the daemon answers every request
// exactly once. Bulk data never crosses the socket: the shim attaches a memfd shared
// memory segment (AttachShm, descriptor passed with SCM_RIGHTS) and ops name offsets in it.
// All structs are little-endian, fixed-size and trivially copyable.
#ifndef CONDUIT_PROTOCOL_SHIM_PROTOCOL_H_
#define CONDUIT_PROTOCOL_SHIM_PROTOCOL_H_

#include <cstddef>
#include <cstdint>

#include "protocol/frame_format.h"

namespace conduit::shimproto {

inline constexpr uint32_t kMagic = 0x53544443;  // "CDTS"
inline constexpr uint16_t kVersion = 3;
inline constexpr uint32_t kMaxPayload = 1u << 20;
inline constexpr uint32_t kMaxOpsPerGroup = 16384;
// A request's bytes must all arrive within this long of its first byte (a program may idle
// between requests as long as it likes).
inline constexpr int kFrameTimeoutMs = 10000;
inline constexpr char kDefaultSocketPath[] = "/run/conduit/conduitd.sock";
inline constexpr char kSocketEnv[] = "CONDUIT_SOCKET";

enum MsgType : uint16_t {
  kHello = 1,
  kHelloReply = 2,
  kGetUniqueId = 3,
  kGetUniqueIdReply = 4,
  kCommInit = 5,
  kCommInitReply = 6,
  kAttachShm = 7,
  kAttachShmReply = 8,
  kGroup = 9,
  kGroupReply = 10,
  kCommDestroy = 11,
  kCommDestroyReply = 12,
  // Device buffers (docs/shim-protocol.md, "Device buffers"). A daemon that predates them
  // answers "unknown request type"; one without GPU support answers DeviceInfo with
  // supported = 0 and refuses the others.
  kDeviceInfo = 13,
  kDeviceInfoReply = 14,
  kRegisterBuffer = 15,
  kRegisterBufferReply = 16,
  kReleaseBuffer = 17,
  kReleaseBufferReply = 18,
  // Split/shrink: the unique id of a child communicator. Only the daemon derives it (from
  // the secret of the connection's communicator), so the shim needs no cryptography.
  kDeriveId = 19,
  kDeriveIdReply = 20,  // a UniqueIdReply
  // Host regions (docs/shim-protocol.md, "Host regions"): memory the program allocated
  // with ncclMemAlloc, shared with the daemon so that collectives on it need no staging
  // copies. A daemon that predates them answers "unknown request type"; the shim then
  // stages as before.
  kAttachRegion = 21,  // an AttachRegionRequest with the region's memfd
  kAttachRegionReply = 22,
  kReleaseRegion = 23,
  kReleaseRegionReply = 24,
  // Asynchronous device groups (kGroupAsync, docs/gpu.md): the first error of a group the
  // daemon accepted on this connection, or success. Empty request; the reply is a WireStatus.
  kAsyncError = 25,
  kAsyncErrorReply = 26,
  // ncclCommRevoke: fail the communicator's operations in flight on every host (its peers
  // see them fail), let this connection's accepted groups go, reply once nothing of this
  // rank runs any more. The connection stays for split, shrink and destroy. Empty request;
  // the reply is a WireStatus.
  kRevoke = 27,
  kRevokeReply = 28,
  // ncclGetUniqueId with NCCL_COMM_ID set: the id every rank of the job computes alike from
  // that address (UniqueIdFromAddressRequest). A daemon that predates it answers "unknown
  // request type". The reply is a UniqueIdReply.
  kUniqueIdFromAddress = 29,
  kUniqueIdFromAddressReply = 30,
  // Split/shrink of a communicator whose connection is gone (ncclCommRevoke shut it down to
  // end a call another thread waited in): the child's id from the parent's id, which the
  // shim kept, on any connection (DeriveIdFromParentRequest). The reply is a UniqueIdReply.
  kDeriveIdFromParent = 31,
  kDeriveIdFromParentReply = 32,
  // The shim cannot open the done event of an event-ordered device group that conduitd ran
  // (cuIpcOpenEventHandle failed): reply once the GPU work conduitd queued for this
  // connection's communicator has run, so the call can return with its results in place
  // (later groups stage). Empty request; the reply is a WireStatus.
  kDeviceDrain = 33,
  kDeviceDrainReply = 34,
  // A virtual-memory-managed allocation (cuMemCreate: PyTorch's expandable segments,
  // ncclMemAlloc) shared as the POSIX file descriptor cuMemExportToShareableHandle made,
  // attached to the frame: a RegisterBufferRequest whose ipc_handle is all zero. A daemon
  // that predates it answers "unknown request type"; the shim then stages such buffers.
  // The reply is a WireStatus.
  kRegisterVmmBuffer = 35,
  kRegisterVmmBufferReply = 36,
  // The communicator's result area on this host (AttachResultRequest; the reply is an
  // AttachResultReply with the area's memfd attached): memory conduitd writes the result of
  // a streamed collective into once (those ResultAreaServes names), from which every local
  // rank of the communicator copies its output, instead of one copy per rank in each segment.
  // A daemon that predates it answers "unknown request type"; the shim then never asks
  // again on that connection, and results come through its segment as before.
  kAttachResult = 37,
  kAttachResultReply = 38,
  // Pages of a virtual-memory segment mapped back to back as one buffer (a
  // RegisterSpanRequest followed by its page ids): a buffer that runs from one page of
  // PyTorch's expandable segment into the next. Only to a daemon whose DeviceInfoReply has
  // kDeviceFeatureSpans; the shim stages such buffers for any other. The reply is a
  // WireStatus.
  kRegisterSpan = 39,
  kRegisterSpanReply = 40,
  // The connection's reply page (protocol/call_page.h): an empty request with a memfd of
  // kCallPageBytes attached, sealed against shrinking. The reply is a WireStatus. A daemon
  // that predates it answers "unknown request type"; the shim then reads every reply from
  // the socket, as before.
  kAttachReplyPage = 41,
  kAttachReplyPageReply = 42,
  // From the daemon, empty: the reply to the Group request in flight is in the reply page
  // (sent only to a program that set CallPage::waiting: see protocol/call_page.h).
  kReplyInPage = 44,
  // The connection's request page (protocol/call_page.h), as kAttachReplyPage: from then on
  // the shim may put a Group request that asks for its reply in the reply page
  // (kGroupReplyInPage) in the request page instead of on the socket. A daemon that
  // predates it answers "unknown request type"; the shim then sends every request on the
  // socket, as before.
  kAttachRequestPage = 45,
  kAttachRequestPageReply = 46,
  // From the program, empty, no reply: a request is in the request page (sent only to a
  // daemon that set CallPage::waiting). conduitd looks at the page whenever one comes and
  // ignores one that finds nothing new there (it may come after the request was taken).
  kRequestInPage = 47,
};

// Hello: version = kVersion.
using HelloRequest = ProgramHello;

struct HelloReply {
  WireStatus status;
  uint32_t accepted;    // 0: the daemon refuses this program (status says why)
  uint32_t timeout_ms;  // the daemon's bound on any wait; the shim waits a bit longer
  char daemon_version[32];
};

struct UniqueIdReply {
  WireStatus status;
  char id[128];
};

struct UniqueIdFromAddressRequest {
  char comm_id[128];  // NCCL_COMM_ID as the program has it, NUL-terminated: the secret's input
  char root_ip[64];   // its host part as a numeric IPv4 address (the shim resolves names)
};

struct DeriveIdRequest {
  uint64_t generation;  // the parent's split (or shrink) counter, identical on every member
  int64_t color;        // the split color (0 for shrink)
  char root[64];        // the child's root: the daemon of its lowest member
};

struct DeriveIdFromParentRequest {
  char parent_id[128];  // the parent communicator's ncclUniqueId
  uint64_t generation;  // as DeriveIdRequest
  int64_t color;
  char root[64];
};

struct CommInitRequest {
  char id[128];
  int32_t nranks;
  int32_t rank;
  uint32_t flags;
  uint32_t reserved;
};

// Followed by nhosts DaemonAddr, then nranks int32 host indices (host of each rank).
struct CommInitReply {
  WireStatus status;
  int32_t nranks;
  int32_t nhosts;
  int32_t host_index;    // this daemon's index among the communicator's hosts
  int32_t local_nranks;  // ranks of this communicator served by this daemon
  uint64_t comm_key;
};

struct DaemonAddr {
  char text[64];  // "ip:port" as other daemons reach it
};

// A memfd segment descriptor rides along with this message.
struct AttachShmRequest {
  uint64_t size;
};

struct AttachShmReply {
  WireStatus status;
};

// A region's memfd (sealed against shrinking) rides along. `region_id` is the program's
// name for it on this connection (nonzero, not attached already); replies are WireStatus.
struct AttachRegionRequest {
  uint64_t region_id;
  uint64_t size;
};

struct ReleaseRegionRequest {
  uint64_t region_id;
};

// min_bytes: the bytes of the segment region of the op the shim is about to send (at least
// its output, counted from the region's start). conduitd answers with
// an area of at least that size (a new one, with a new `area` number, when the current one
// is smaller), sealed so that no mapping of it but conduitd's can write; the shim maps it
// read-only. Refused on a connection without a communicator, for a communicator with one
// rank on this host, and above the daemon's segment limit.
struct AttachResultRequest {
  uint64_t min_bytes;
};

struct AttachResultReply {
  WireStatus status;
  uint64_t size;  // bytes of the area (mapped from offset 0)
  uint64_t area;  // its number: what StagingControl::result_area names; never 0
};

enum OpKind : uint8_t {
  kAllReduce = 1,
  kBroadcast = 2,
  kReduce = 3,
  kAllGather = 4,
  kReduceScatter = 5,
  kSend = 6,
  kRecv = 7,
};

// Whether conduitd leaves a streamed collective's result in the communicator's result area
// (kAttachResult) when `local_ranks` ranks of the communicator are on its host: for the
// collectives whose one result every local rank reads whole (AllGather and Broadcast from
// two local ranks, AllReduce from three). An AllReduce of two would write the area where it
// now folds the second rank's input into the first's segment, just written and still in
// cache, and the one copy it spares does not pay for that (docs/benchmarks.md, "One result
// for a host's ranks"). The shim asks for the area only where this holds.
inline bool ResultAreaServes(uint8_t kind, int local_ranks) {
  if (kind == kAllGather || kind == kBroadcast) return local_ranks >= 2;
  return kind == kAllReduce && local_ranks >= 3;
}

// Collectives (every rank of the communicator takes part), as opposed to point-to-point ops.
inline constexpr bool IsCollectiveKind(uint8_t kind) { return kind >= kAllReduce && kind <= kReduceScatter; }

// ncclRedOp_t values 0..4 pass through; PreMulSum ops travel as this value with the
// caller's scalar (one element of the op's type) in OpDesc::scalar.
inline constexpr uint8_t kRedOpPreMulSum = 5;

// Where each op's data lives in the rank's segment, starting at `offset`:
//   AllReduce/Broadcast/Reduce/Send/Recv: `count` elements, result in place.
//   AllGather: nranks*count elements; this rank's input at block `rank`, result: all.
//   ReduceScatter: nranks*count input elements; result at block `rank`.
struct OpDesc {
  uint8_t kind;
  uint8_t dtype;
  uint8_t redop;
  uint8_t flags;  // kOpDevice or kOpRegion, else 0
  int32_t peer;  // root for Broadcast/Reduce, peer for Send/Recv, else 0
  uint64_t count;
  uint64_t offset;
  uint8_t scalar[8];
};
static_assert(sizeof(OpDesc) == 32);

// OpDesc::flags.
inline constexpr uint8_t kOpDevice = 1;  // data in registered device buffers (DeviceOpRef), not the segment
// With kOpDevice, PreMulSum, in an asynchronous group only: the factor is not in `scalar`
// but in device memory, in the connection's sync-words buffer 8 bytes per op after the two
// words (op i at DeviceAsyncHeader::sync_offset + 8 + 8 * i), copied there on the program's
// stream before the ready word (ncclScalarDevice, read when the daemon's kernel runs).
inline constexpr uint8_t kOpScalarWord = 4;
// A broadcast's root in place, staged (neither kOpDevice nor kOpRegion): its output buffer
// is its input, so its shim copies nothing out of the segment afterwards. It changes only
// what the daemon counts as the program's copies (docs/design.md); sent only to a daemon
// whose group replies carry kReplyCountsInPlaceRoot.
inline constexpr uint8_t kOpOutputIsInput = 8;
// Where op i's factor slot is, in bytes from the ready word: after the ready and done words.
inline constexpr uint64_t kSyncWordBytes = 4;
inline constexpr uint64_t kScalarSlotBytes = 8;
inline constexpr uint64_t ScalarSlotOffset(uint64_t op_index) { return 2 * kSyncWordBytes + kScalarSlotBytes * op_index; }
// Data in the program's own buffers, in attached host regions (RegionOpRef), not the
// segment: every collective but PreMulSum, Send and Recv.
inline constexpr uint8_t kOpRegion = 2;
// The ops kOpRegion may carry: the daemon never writes an input, so not PreMulSum (which
// scales inputs in place); a Send is read where it is and a Recv written there. The
// daemon's check; the shim sends Send and Recv in regions only to a daemon whose group
// replies carry kReplyP2pInRegions, and Reduce and ReduceScatter only to one whose replies
// carry kReplyReduceInRegions.
inline bool ServedInRegions(uint8_t kind, uint8_t redop) {
  if (kind == kAllReduce || kind == kReduce || kind == kReduceScatter) return redop != kRedOpPreMulSum;
  return kind == kAllGather || kind == kBroadcast || kind == kSend || kind == kRecv;
}
// The largest Reduce or ReduceScatter input (bytes per rank) served in regions: the daemon
// works on such ops in memory of its own (daemon/collectives/work_pool.h), so the shim
// stages larger ones and the daemon refuses them in regions.
inline constexpr uint64_t kMaxReduceInRegionsBytes = uint64_t{1} << 30;
// Whether an op of `kind` with `input_bytes` per rank is small enough for regions: the shim's
// test before it places an op there and the daemon's before it accepts one.
inline bool InputFitsRegions(uint8_t kind, uint64_t input_bytes) {
  return (kind != kReduce && kind != kReduceScatter) || input_bytes <= kMaxReduceInRegionsBytes;
}
// Whether `rank` names an input for `op` (all but a broadcast's non-roots and a receive)
// and an output (all but a reduce's non-roots and a send), where buffers are the
// program's own (device buffers, host regions).
inline bool OpNeedsSend(const OpDesc& op, int rank) {
  return op.kind != kRecv && (op.kind != kBroadcast || op.peer == rank);
}
inline bool OpNeedsRecv(const OpDesc& op, int rank) {
  return op.kind != kSend && (op.kind != kReduce || op.peer == rank);
}

// GroupRequest::flags.
inline constexpr uint32_t kGroupStreamed = 1;  // see protocol/staging_control.h
inline constexpr uint32_t kGroupDevice = 2;    // DeviceGroupHeader and DeviceOpRefs follow the ops
inline constexpr uint32_t kGroupRegions = 4;   // one RegionOpRef per op follows the ops
// With kGroupDevice, every op a device op: DeviceAsyncHeader instead of DeviceGroupHeader,
// and the reply comes once the daemon accepted the group, before it runs (docs/gpu.md).
inline constexpr uint32_t kGroupAsync = 8;
// The reply into the connection's reply page (protocol/call_page.h) where the daemon holds
// one, else on the socket. Not with kGroupStreamed or kGroupDevice, whose replies the shim
// waits for on the socket alongside other work. Only such a Group may come through the
// request page.
inline constexpr uint32_t kGroupReplyInPage = 16;

// Followed by nops OpDesc. Collectives run in order; sends and receives of the group
// progress together, so any grouped point-to-point pattern completes.
struct GroupRequest {
  uint32_t nops;
  uint32_t flags;  // kGroupStreamed, kGroupDevice (+ kGroupAsync) or kGroupRegions, kGroupReplyInPage; other bits 0
};

// After the OpDescs of a group with kGroupRegions: one per op. For a kOpRegion op, where
// its input (send) and output (recv) are: attached region id and byte offset in it; a
// buffer the op does not use (a broadcast's non-root input) has id 0. All zero for other
// ops. Input and output may be the same bytes (in place).
struct RegionOpRef {
  uint64_t send_id;
  uint64_t send_offset;
  uint64_t recv_id;
  uint64_t recv_offset;
};

struct GroupReply {
  WireStatus status;
  int32_t failed_op;  // index of the first failed op, -1 if none
  uint32_t flags;     // GroupReplyFlags; 0 from daemons before them
};

// GroupReply::flags.
// kReplyEventUnusable: with an error, to a device group ordered by events (kGroupDevice
// without kGroupAsync): conduitd could not open the group's ready event
// (cuIpcOpenEventHandle), so nothing of the group ran. The shim sends the group again with
// its device buffers staged, and stages from then on (docs/gpu.md).
inline constexpr uint32_t kReplyEventUnusable = 1;
// kReplyP2pInRegions: on every group reply of a daemon that serves Send and Recv in host
// regions (kOpRegion); the shim puts them there while the latest reply on the connection
// carried it.
inline constexpr uint32_t kReplyP2pInRegions = 2;
// kReplyReduceInRegions: likewise for Reduce and ReduceScatter (daemons from 2026-12-05).
inline constexpr uint32_t kReplyReduceInRegions = 4;
// kReplyCountsInPlaceRoot: on every group reply of a daemon that takes kOpOutputIsInput
// (daemons from 2026-12-05, evening).
inline constexpr uint32_t kReplyCountsInPlaceRoot = 8;
// kReplyResultAttach: on the reply to a streamed collective that ResultAreaServes, whose
// result came through the segment because this connection has not attached the
// communicator's current result area (none yet, another rank grew it, or the daemon was
// replaced since): the shim attaches it (kAttachResult) before its next such op.
inline constexpr uint32_t kReplyResultAttach = 16;

struct CommDestroyReply {
  WireStatus status;
};

// ---- Device buffers ----

inline constexpr size_t kIpcHandleBytes = 64;  // a CUDA IPC memory or event handle

struct DeviceUuid {
  uint8_t bytes[16];
};

// Followed by ndevices DeviceUuid: the GPUs this daemon can reach.
struct DeviceInfoReply {
  WireStatus status;
  uint32_t supported;  // 1: RegisterBuffer and device groups are served
  int32_t ndevices;
  int32_t driver_version;  // cuDriverGetVersion, 0 without a driver
  uint32_t features;       // kDeviceFeature* bits; 0 from daemons that predate them
  char reason[128];  // why not, when supported == 0
};

// DeviceInfoReply::features: Send and Recv may be device ops in a kGroupAsync group.
inline constexpr uint32_t kDeviceFeatureP2p = 1;
// DeviceInfoReply::features: RegisterSpan is served.
inline constexpr uint32_t kDeviceFeatureSpans = 2;

// Shares one device allocation (the whole of it, as cuMemGetAddressRange finds it; for a
// virtual-memory mapping, the one mapping, which starts at offset 0 of its allocation).
struct RegisterBufferRequest {
  uint64_t buffer_id;  // the driver's process-unique id of the allocation (or mapping)
  uint64_t size;       // bytes of the allocation (or mapping)
  DeviceUuid device;   // the GPU it lives on
  uint8_t ipc_handle[kIpcHandleBytes];  // cuIpcGetMemHandle of its base; zero for kRegisterVmmBuffer
};

// Followed by `pages` u64 buffer ids, in address order: virtual-memory registrations
// (kRegisterVmmBuffer) of this connection, on `device`, which the program maps back to
// back. The daemon maps the same allocations back to back too, and ops name the whole as
// one registered buffer: `span_id`, chosen by the shim with kSpanIdBit set (the driver's
// buffer ids are counters that never reach it), offsets from the first page's first byte.
// A span goes when it is released (ReleaseBuffer with its id) or when any of its pages is.
struct RegisterSpanRequest {
  uint64_t span_id;
  DeviceUuid device;
  uint32_t pages;     // 2..kMaxSpanPages
  uint32_t reserved;  // 0
};
inline constexpr uint64_t kSpanIdBit = uint64_t{1} << 63;
// 4096 pages of PyTorch's 20 MiB are 80 GiB: any one buffer a GPU holds.
inline constexpr uint32_t kMaxSpanPages = 4096;

// The program no longer uses the allocation (it was freed; its id will not come back).
struct ReleaseBufferRequest {
  uint64_t buffer_id;
};

// After the OpDescs of a group with kGroupDevice.
struct DeviceGroupHeader {
  uint8_t ready_event[kIpcHandleBytes];  // IPC event the program recorded on its stream
  DeviceUuid device;                     // the GPU of that stream
};

// After the OpDescs of a group with kGroupDevice | kGroupAsync. Ordering with the program's
// stream by 32-bit words in a registered device buffer, with stream memory operations: the
// program's stream writes `seq` to the ready word after its earlier work and then waits
// until the done word reaches `seq`; the daemon's stream waits until the ready word reaches
// `seq`, runs the group and writes `seq` to the done word. A group that fails after it was
// accepted still gets its done word (and ready word) written, so no stream waits forever;
// its error is the connection's asynchronous error (kAsyncError). Comparisons are modulo
// 2^32 ((int32_t)(word - seq) >= 0).
struct DeviceAsyncHeader {
  uint64_t sync_id;      // registered buffer holding the words
  uint64_t sync_offset;  // of the ready word, 4-byte aligned; the done word is the next 4 bytes
  uint32_t seq;          // this group's number on the connection
  uint32_t reserved;     // 0
  DeviceUuid device;     // the GPU of the program's stream
};

// After DeviceGroupHeader (or DeviceAsyncHeader): one per op. For a kOpDevice op, where its data is (registered
// buffer id and byte offset in it; the op reads `send` and writes `recv`, in place when
// they are the same); all zero for other ops.
struct DeviceOpRef {
  uint64_t send_id;
  uint64_t send_offset;
  uint64_t recv_id;
  uint64_t recv_offset;
};
static_assert(sizeof(DeviceOpRef) == 32);

// Appended to the GroupReply of a successful device group: the program's stream waits on
// this IPC event, which the daemon recorded after the group's last device op.
struct DeviceGroupReplyTail {
  uint8_t done_event[kIpcHandleBytes];
};

// Every struct's size is part of the protocol, and each is copied as bytes.
static_assert(sizeof(HelloReply) == 296 && kWireStruct<HelloReply>);
static_assert(sizeof(UniqueIdReply) == 384 && kWireStruct<UniqueIdReply>);
static_assert(sizeof(UniqueIdFromAddressRequest) == 192 && kWireStruct<UniqueIdFromAddressRequest>);
static_assert(sizeof(DeriveIdFromParentRequest) == 208 && kWireStruct<DeriveIdFromParentRequest>);
static_assert(sizeof(DeriveIdRequest) == 80 && kWireStruct<DeriveIdRequest>);
static_assert(sizeof(CommInitRequest) == 144 && kWireStruct<CommInitRequest>);
static_assert(sizeof(CommInitReply) == 280 && kWireStruct<CommInitReply>);
static_assert(sizeof(DaemonAddr) == 64 && kWireStruct<DaemonAddr>);
static_assert(sizeof(AttachShmRequest) == 8 && kWireStruct<AttachShmRequest>);
static_assert(sizeof(AttachShmReply) == 256 && kWireStruct<AttachShmReply>);
static_assert(sizeof(AttachRegionRequest) == 16 && kWireStruct<AttachRegionRequest>);
static_assert(sizeof(ReleaseRegionRequest) == 8 && kWireStruct<ReleaseRegionRequest>);
static_assert(sizeof(AttachResultRequest) == 8 && kWireStruct<AttachResultRequest>);
static_assert(sizeof(AttachResultReply) == 272 && kWireStruct<AttachResultReply>);
static_assert(sizeof(RegionOpRef) == 32 && kWireStruct<RegionOpRef>);
static_assert(sizeof(GroupRequest) == 8 && kWireStruct<GroupRequest>);
static_assert(sizeof(GroupReply) == 264 && kWireStruct<GroupReply>);
static_assert(sizeof(CommDestroyReply) == 256 && kWireStruct<CommDestroyReply>);
static_assert(sizeof(DeviceUuid) == 16 && kWireStruct<DeviceUuid>);
static_assert(sizeof(DeviceInfoReply) == 400 && kWireStruct<DeviceInfoReply>);
static_assert(sizeof(RegisterBufferRequest) == 96 && kWireStruct<RegisterBufferRequest>);
static_assert(sizeof(ReleaseBufferRequest) == 8 && kWireStruct<ReleaseBufferRequest>);
static_assert(sizeof(RegisterSpanRequest) == 32 && kWireStruct<RegisterSpanRequest>);
static_assert(sizeof(DeviceGroupHeader) == 80 && kWireStruct<DeviceGroupHeader>);
static_assert(sizeof(DeviceGroupReplyTail) == 64 && kWireStruct<DeviceGroupReplyTail>);
static_assert(sizeof(DeviceAsyncHeader) == 40 && kWireStruct<DeviceAsyncHeader>);

}  // namespace conduit::shimproto

#endif  // CONDUIT_PROTOCOL_SHIM_PROTOCOL_H_
