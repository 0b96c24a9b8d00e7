#include "ops.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <thread>

#include "common/busy_poll.h"
#include "common/log.h"
#include "common/stream_copy.h"
#include "nccl_debug.h"
#include "device_path.h"
#include "comm_watch.h"
#include "host_regions.h"
#include "protocol/staging_control.h"
#include "reduce/reduce.h"
#include "shim_log.h"
#include "self_p2p.h"
#include "streaming.h"

namespace conduit {
namespace {

constexpr size_t kAlign = 64;

struct GroupState {
  int depth = 0;
  std::vector<PendingOp> ops;
  std::vector<std::function<ncclResult_t()>> deferred;
};
thread_local GroupState g_group;

size_t AlignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

bool MulOverflows(size_t a, size_t b, size_t* out) { return __builtin_mul_overflow(a, b, out); }

ncclResult_t CheckCommon(const char* call, ncclComm* comm, ncclDataType_t type) {
  if (!ValidComm(comm)) return Fail(call, ncclInvalidArgument, "invalid communicator handle %p", static_cast<void*>(comm));
  if (comm->revoked) {
    return Fail(call, ncclInvalidUsage, "the communicator was revoked (ncclCommRevoke): only split, shrink, destroy and abort remain");
  }
  if (!IsValidDataType(type)) return Fail(call, ncclInvalidArgument, "invalid datatype %d", static_cast<int>(type));
  return ncclSuccess;
}

// Resolves `op` into the wire's redop byte and, for PreMulSum, its scalar (or, for a
// scalar in device memory, where it is).
ncclResult_t ResolveRedOp(const char* call, ncclComm* comm, ncclRedOp_t op, ncclDataType_t type,
                          shimproto::OpDesc* desc, const void** scalar_pointer) {
  int v = static_cast<int>(op);
  if (v >= 0 && v < ncclNumOps) {
    desc->redop = static_cast<uint8_t>(v);
    return ncclSuccess;
  }
  std::lock_guard<std::mutex> lock(comm->redop_mu);
  size_t index = static_cast<size_t>(v - ncclNumOps);
  if (v < ncclNumOps || index >= comm->redops.size() || !comm->redops[index].live) {
    return Fail(call, ncclInvalidArgument, "invalid reduction op %d (not built in, not a live PreMulSum op)", v);
  }
  const PreMulSumOp& pm = comm->redops[index];
  if (pm.type != type) {
    return Fail(call, ncclInvalidArgument, "PreMulSum op %d was created for datatype %d but used with %d", v, pm.type, type);
  }
  desc->redop = shimproto::kRedOpPreMulSum;
  if (pm.residence == ncclScalarHostImmediate) {
    memcpy(desc->scalar, pm.scalar, DataTypeSize(type));
  } else {
    *scalar_pointer = pm.pointer;  // PlaceOp reads it, in stream order
  }
  return ncclSuccess;
}

// What went out on one communicator's connection, for reading its reply.
struct Sent {
  bool streamed = false;
  bool device = false;              // a device group: the reply carries the done event
  bool async = false;               // ... or, asynchronous, the stream waits for the done word
  uint32_t seq = 0;                 // the asynchronous group's number
  cudaStream_t device_stream = nullptr;
  std::vector<PendingOp*> staged;   // ops whose results come back with CUDA copies
};

// Waits for the staged copies of `ops`, once per stream.
Status SyncStagedStreams(const std::vector<PendingOp*>& ops) {
  std::vector<cudaStream_t> done;
  for (const PendingOp* op : ops) {
    if (std::find(done.begin(), done.end(), op->stream) != done.end()) continue;
    done.push_back(op->stream);
    CONDUIT_RETURN_IF_ERROR(SyncStaged(*op));
  }
  return Status::Ok();
}

// Tells the daemon to unmap, on this connection, the regions the program freed since the
// last look (host_regions.h): their memory goes back only then. A release the daemon
// refuses costs the program nothing (the mapping then lasts until the connection closes),
// and a broken connection fails the group's own request right after.
void ReleaseFreedRegions(ncclComm* comm) {
  const uint64_t frees = RegionFrees();
  if (frees == comm->region_frees_seen) return;
  comm->region_frees_seen = frees;
  for (auto it = comm->attached_regions.begin(); it != comm->attached_regions.end();) {
    if (RegionLive(*it)) {
      ++it;
      continue;
    }
    shimproto::ReleaseRegionRequest req{*it};
    Frame reply;
    Status st = comm->conn->Call(shimproto::kReleaseRegion, &req, sizeof(req), shimproto::kReleaseRegionReply, &reply);
    if (!st.ok()) NCCL_SHIM_INFO(kSubsysReg, "rank %d: releasing a freed host region: %s", comm->rank, st.message().c_str());
    it = comm->attached_regions.erase(it);
  }
}

// Whether region `span` is attached on this connection, attaching it now if it can be. A
// refusal (a daemon that predates regions, one at its cap) is remembered, and ops on the
// region are staged.
bool AttachRegion(ncclComm* comm, const RegionSpan& span) {
  if (comm->attached_regions.count(span.id) != 0) return true;
  if (comm->refused_regions.count(span.id) != 0) return false;
  UniqueFd fd = RegionFd(span.id);
  if (!fd.valid()) return false;
  shimproto::AttachRegionRequest req{span.id, span.size};
  Frame reply;
  Status st = comm->conn->Call(shimproto::kAttachRegion, &req, sizeof(req), shimproto::kAttachRegionReply, &reply, fd.get());
  if (!st.ok()) {
    NCCL_SHIM_INFO(kSubsysReg, "rank %d: host region of %llu bytes not attached, its ops are staged: %s", comm->rank,
             static_cast<unsigned long long>(span.size), st.message().c_str());
    comm->refused_regions.insert(span.id);
    return false;
  }
  comm->attached_regions.insert(span.id);
  return true;
}

bool IsP2p(const PendingOp& op) { return op.desc.kind == shimproto::kSend || op.desc.kind == shimproto::kRecv; }

// The region holding [p, p + bytes): ncclMemAlloc's, or one adopted before, or the
// buffer's pages adopted now where the program asked for that (host_regions.h).
bool FindOrAdoptRegion(ncclComm* comm, const void* p, size_t bytes, RegionSpan* span) {
  if (FindRegion(p, bytes, span)) return true;
  Status st = AdoptRegion(p, bytes, span);  // NotFound, quietly, where adoption is off
  if (st.ok()) {
    NCCL_SHIM_INFO(kSubsysReg, "rank %d: buffer %p of %zu bytes adopted: its ops run in place", comm->rank, p, bytes);
  } else if (!IsNotFound(st)) {
    NCCL_SHIM_INFO(kSubsysReg, "rank %d: buffer %p of %zu bytes not adopted, its ops are staged: %s", comm->rank, p,
                   bytes, st.message().c_str());
  }
  return st.ok();
}

// Places `op` in the program's own buffers when the daemon can run it there: a host op
// but PreMulSum whose buffers lie in ncclMemAlloc'd regions (shimproto::ServedInRegions);
// Send and Recv, Reduce and ReduceScatter only with a daemon that says it serves them so.
void PlaceInRegions(ncclComm* comm, PendingOp* op) {
  const uint8_t kind = op->desc.kind;
  const bool served = IsP2p(*op) ? comm->p2p_in_regions
                      : kind == shimproto::kReduce || kind == shimproto::kReduceScatter ? comm->reduce_in_regions
                                                                                       : true;
  if (!RegionsEnabled() || op->place != MemoryKind::kHost || !shimproto::ServedInRegions(kind, op->desc.redop) ||
      !served || op->region_bytes == 0 || !shimproto::InputFitsRegions(kind, op->in_bytes)) {
    return;
  }
  RegionSpan in, out;
  // The larger buffer first: an in-place AllGather's input lies inside its output (a
  // ReduceScatter's output inside its input), and a buffer adopted first would keep the
  // one around it from being adopted.
  const bool out_first = op->out_bytes > op->in_bytes;
  for (int which : {out_first ? 1 : 0, out_first ? 0 : 1}) {
    const void* p = which == 0 ? op->in : op->out;
    const size_t bytes = which == 0 ? op->in_bytes : op->out_bytes;
    if (bytes > 0 && !FindOrAdoptRegion(comm, p, bytes, which == 0 ? &in : &out)) return;
  }
  if ((in.id != 0 && !AttachRegion(comm, in)) || (out.id != 0 && !AttachRegion(comm, out))) return;
  op->in_regions = true;
  op->adopted = in.adopted || out.adopted;
  op->region_ref = shimproto::RegionOpRef{in.id, in.offset, out.id, out.offset};
}

// Sends and receives in regions are read and written where they are while the group
// runs, not copied at its start and end: if one shares bytes with another op of its group,
// where one of them writes, what it sends or leaves would depend on the daemon's order.
// Such a group's sends and receives are staged instead. (Overlapping ranges are found in
// sorted order; a run of overlapping ranges with a write, two ops and a Send or Recv
// among them counts, which may stage a group that would have been safe.)
void StageP2pSharingBytes(std::vector<PendingOp*>& list) {
  struct Range {
    uintptr_t begin, end;
    size_t op;
    bool writes;
  };
  std::vector<Range> ranges;
  bool any_p2p = false;
  for (size_t i = 0; i < list.size(); ++i) {
    const PendingOp* op = list[i];
    if (!op->in_regions) continue;
    any_p2p |= IsP2p(*op);
    const auto in = reinterpret_cast<uintptr_t>(op->in), out = reinterpret_cast<uintptr_t>(op->out);
    if (op->in_bytes > 0) ranges.push_back({in, in + op->in_bytes, i, false});
    if (op->out_bytes > 0) ranges.push_back({out, out + op->out_bytes, i, true});
  }
  if (!any_p2p) return;
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
  bool shared = false;
  for (size_t at = 0; at < ranges.size() && !shared;) {
    size_t next = at + 1;
    uintptr_t end = ranges[at].end;
    bool writes = ranges[at].writes, p2p = IsP2p(*list[ranges[at].op]), two_ops = false;
    for (; next < ranges.size() && ranges[next].begin < end; ++next) {
      end = std::max(end, ranges[next].end);
      writes |= ranges[next].writes;
      p2p |= IsP2p(*list[ranges[next].op]);
      two_ops |= ranges[next].op != ranges[at].op;
    }
    shared = writes && p2p && two_ops;
    at = next;
  }
  if (!shared) return;
  for (PendingOp* op : list) {
    if (!IsP2p(*op)) continue;
    op->in_regions = false;
    op->region_ref = shimproto::RegionOpRef{};
  }
}

// Lays out one communicator's ops and sends its Group request (device_path.h for what
// device and staged ops add; host_regions.h for ops in the program's own buffers).
Status SendGroup(ncclComm* comm, std::vector<PendingOp*>& list, Sent* sent) {
  bool any_device = false;
  for (const PendingOp* op : list) any_device |= op->place == MemoryKind::kDevice;
  if (any_device) {
    CONDUIT_RETURN_IF_ERROR(comm->device_path.Prepare(*comm->conn, list));
    if (comm->device_path.has_registrations()) WatchComm(comm);
  }
  // conduitd moves point-to-point device buffers only in asynchronous groups, and only a
  // daemon that says so (docs/gpu.md); elsewhere they are staged.
  auto stage_p2p = [&] {
    for (PendingOp* op : list) {
      if (op->place != MemoryKind::kDevice || shimproto::IsCollectiveKind(op->desc.kind)) continue;
      op->place = MemoryKind::kStaged;
      op->ref = shimproto::DeviceOpRef{};
    }
  };
  if (any_device && !comm->device_path.serves_p2p()) stage_p2p();
  sent->async = any_device && comm->device_path.UseAsync(*comm->conn, list);
  if (any_device && !sent->async) stage_p2p();
  if (AdoptionEnabled()) SweepAdoptedRegions();
  ReleaseFreedRegions(comm);
  bool any_regions = false;
  if (!any_device) {
    for (PendingOp* op : list) PlaceInRegions(comm, op);
    StageP2pSharingBytes(list);
    for (const PendingOp* op : list) any_regions |= op->in_regions;
  }
  size_t total = 0;
  const PendingOp* first_device = nullptr;
  for (size_t i = 0; i < list.size(); ++i) {
    PendingOp* op = list[i];
    // Before the ready word: a factor copied on the stream must be there when it is read.
    CONDUIT_RETURN_IF_ERROR(comm->device_path.PlaceScalar(op, i, list.size(), sent->async));
    if (op->in_regions) {
      op->desc.flags = shimproto::kOpRegion;
      op->desc.offset = 0;
      if (op->adopted && op->in_bytes > 0) RegionEdgesIn(op->in, op->in_bytes);
      continue;
    }
    if (op->place == MemoryKind::kDevice) {
      op->desc.flags = shimproto::kOpDevice | (op->desc.flags & shimproto::kOpScalarWord);
      op->desc.offset = 0;
      if (first_device != nullptr && op->stream != first_device->stream) {
        return InvalidUsage("device buffers of one communicator in one group must use one stream");
      }
      if (first_device == nullptr) first_device = op;
      continue;
    }
    // Staged from host or device memory alike: the shim copies the root's result back for neither.
    op->desc.flags = op->output_is_input() && comm->counts_in_place_root
                         ? shimproto::kOpOutputIsInput
                         : 0;
    op->desc.offset = kStagingControlBytes + total;
    total += AlignUp(op->region_bytes);
    if (op->place == MemoryKind::kStaged) sent->staged.push_back(op);
  }
  CONDUIT_RETURN_IF_ERROR(comm->staging.Reserve(total, *comm->conn));
  sent->streamed = CanStream(list);
  // A result every local rank reads alike is read from the communicator's result area.
  if (sent->streamed &&
      shimproto::ResultAreaServes(list[0]->desc.kind, static_cast<int>(std::count(
                                      comm->host_of_rank.begin(), comm->host_of_rank.end(), comm->host_index)))) {
    comm->result_area.Prepare(list[0]->region_bytes, *comm->conn);
  }
  sent->device = first_device != nullptr;
  const size_t device_header = sent->async ? sizeof(shimproto::DeviceAsyncHeader) : sizeof(shimproto::DeviceGroupHeader);
  const size_t device_bytes = sent->device ? device_header + list.size() * sizeof(shimproto::DeviceOpRef) : 0;
  const size_t region_bytes = any_regions ? list.size() * sizeof(shimproto::RegionOpRef) : 0;
  std::vector<uint8_t> request(sizeof(shimproto::GroupRequest) + list.size() * sizeof(shimproto::OpDesc) + device_bytes +
                               region_bytes);
  // The reply in the connection's reply page, where this thread waits for it; a streamed
  // group's comes on the socket, which the output pump watches (protocol/call_page.h).
  const bool reply_in_page = !sent->streamed && !sent->device && comm->conn->has_reply_page();
  shimproto::GroupRequest head{static_cast<uint32_t>(list.size()),
                               (sent->streamed ? shimproto::kGroupStreamed : 0) |
                                   (sent->device ? shimproto::kGroupDevice : 0) |
                                   (sent->async ? shimproto::kGroupAsync : 0) |
                                   (any_regions ? shimproto::kGroupRegions : 0) |
                                   (reply_in_page ? shimproto::kGroupReplyInPage : 0)};
  memcpy(request.data(), &head, sizeof(head));
  if (sent->streamed) ResetForStreaming(comm->staging.data());
  uint8_t* descs = request.data() + sizeof(head);
  for (size_t i = 0; i < list.size(); ++i) {
    PendingOp* op = list[i];
    if (op->place == MemoryKind::kHost && !op->in_regions && !sent->streamed && op->in_bytes > 0) {
      memcpy(comm->staging.data() + op->desc.offset + op->in_at, op->in, op->in_bytes);
    } else if (op->place == MemoryKind::kStaged) {
      CONDUIT_RETURN_IF_ERROR(StageIn(*op, comm->staging.data()));
    }
    memcpy(descs + i * sizeof(shimproto::OpDesc), &op->desc, sizeof(op->desc));
  }
  if (any_regions) {
    uint8_t* p = descs + list.size() * sizeof(shimproto::OpDesc);
    for (size_t i = 0; i < list.size(); ++i) {
      memcpy(p + i * sizeof(shimproto::RegionOpRef), &list[i]->region_ref, sizeof(shimproto::RegionOpRef));
    }
  }
  // The daemon reads staged inputs as soon as the request arrives.
  CONDUIT_RETURN_IF_ERROR(SyncStagedStreams(sent->staged));
  if (sent->device) {
    uint8_t* p = descs + list.size() * sizeof(shimproto::OpDesc);
    if (sent->async) {
      shimproto::DeviceAsyncHeader dev;
      CONDUIT_RETURN_IF_ERROR(comm->device_path.SignalReady(first_device->stream, &dev));
      sent->seq = dev.seq;
      memcpy(p, &dev, sizeof(dev));
    } else {
      shimproto::DeviceGroupHeader dev;
      const BufferInfo& info = first_device->in_bytes > 0 ? first_device->in_info : first_device->out_info;
      CONDUIT_RETURN_IF_ERROR(comm->device_path.RecordReady(first_device->stream, info.device, info.context, &dev));
      memcpy(p, &dev, sizeof(dev));
    }
    sent->device_stream = first_device->stream;
    p += device_header;
    for (size_t i = 0; i < list.size(); ++i) {
      const shimproto::DeviceOpRef ref = list[i]->place == MemoryKind::kDevice ? list[i]->ref : shimproto::DeviceOpRef{};
      memcpy(p + i * sizeof(ref), &ref, sizeof(ref));
    }
  }
  return comm->conn->SendRequest(shimproto::kGroup, request.data(), request.size(), -1, reply_in_page);
}

// Whether conduitd refused a device group, running nothing of it, because it could not
// open the group's ready event (shimproto::kReplyEventUnusable).
bool EventRefused(const Sent& sent, const Frame& reply) {
  shimproto::GroupReply head;
  if (!sent.device || sent.async || reply.payload.size() < sizeof(head)) return false;
  memcpy(&head, reply.payload.data(), sizeof(head));
  return (head.flags & shimproto::kReplyEventUnusable) != 0;
}

// Sends the group conduitd refused for its event again, with its device buffers staged
// (and every later group of the connection staged too): the call works, only slower.
Status ResendStaged(ncclComm* comm, std::vector<PendingOp*>& list, const Status& why, Sent* sent) {
  comm->device_path.EventsRefusedByDaemon(why);
  for (PendingOp* op : list) {
    if (op->place != MemoryKind::kDevice) continue;
    op->place = MemoryKind::kStaged;
    op->ref = shimproto::DeviceOpRef{};
  }
  *sent = Sent{};
  return SendGroup(comm, list, sent);
}

// Whether the daemon serves Send and Recv, and Reduce and ReduceScatter, in host regions,
// as its latest group reply says (a live upgrade may have replaced it with one that does
// not).
void NoteWhatTheDaemonServes(ncclComm* comm, const Frame& reply) {
  shimproto::GroupReply head;
  if (reply.payload.size() < sizeof(head)) return;
  memcpy(&head, reply.payload.data(), sizeof(head));
  comm->p2p_in_regions = (head.flags & shimproto::kReplyP2pInRegions) != 0;
  comm->reduce_in_regions = (head.flags & shimproto::kReplyReduceInRegions) != 0;
  comm->counts_in_place_root = (head.flags & shimproto::kReplyCountsInPlaceRoot) != 0;
  if (head.flags & shimproto::kReplyResultAttach) comm->result_area.MarkStale();
}

// After a successful reply: results to the program's buffers (or its stream ordered after
// the daemon's work).
Status FinishGroup(ncclComm* comm, const std::vector<PendingOp*>& list, const Sent& sent, const Frame& reply,
                   std::optional<OutputPump>& pump) {
  if (pump) {
    pump->CopyRest();
    return pump->status();
  }
  for (PendingOp* op : list) {
    if (op->in_regions && op->adopted && op->out_bytes > 0) RegionEdgesOut(op->out, op->out_bytes);
    if (op->place == MemoryKind::kHost && !op->in_regions && op->copy_out_bytes() > 0) {
      const uint8_t* from = comm->staging.data() + op->desc.offset + op->out_at;
      CopyOutput(op->out, from, op->copy_out_bytes(), op->copy_out_bytes());
    } else if (op->place == MemoryKind::kStaged) {
      CONDUIT_RETURN_IF_ERROR(StageOut(*op, comm->staging.data()));
    }
  }
  // The segment is reused by the next request: staged copies out of it finish first.
  CONDUIT_RETURN_IF_ERROR(SyncStagedStreams(sent.staged));
  if (sent.async) {
    // Accepted, not yet run: the stream waits for the daemon's done word.
    if (reply.payload.size() != sizeof(shimproto::GroupReply)) {
      return SystemError("malformed reply to an asynchronous device group (%zu bytes)", reply.payload.size());
    }
    return comm->device_path.WaitDoneWord(sent.device_stream, sent.seq);
  }
  if (sent.device) {
    shimproto::DeviceGroupReplyTail tail;
    if (reply.payload.size() != sizeof(shimproto::GroupReply) + sizeof(tail)) {
      return SystemError("malformed reply to a device group (%zu bytes)", reply.payload.size());
    }
    memcpy(&tail, reply.payload.data() + sizeof(shimproto::GroupReply), sizeof(tail));
    CONDUIT_RETURN_IF_ERROR(comm->device_path.WaitDone(*comm->conn, sent.device_stream, tail));
  }
  return Status::Ok();
}

// How long to spin for a group's reply before sleeping (common/busy_poll.h). On
// kPeerBusyPollMinHosts hosts and more the daemons' steps wait on each other for the peer
// budget, and a small group's reply comes after those steps, later than the program's
// usual 50 us: it is waited for as long as they wait. A larger group's reply comes later
// than either budget, and spinning for it only takes CPU from the daemons doing the work
// (measured: docs/benchmarks.md, "A program's wait on 4 hosts").
constexpr size_t kLongReplySpinMaxBytes = 64u << 10;

int ReplySpinMicros(const ncclComm* comm, const std::vector<PendingOp*>& list) {
  if (comm->host_addrs.size() < static_cast<size_t>(kPeerBusyPollMinHosts)) return -1;
  size_t bytes = 0;
  for (const PendingOp* op : list) bytes += std::max(op->in_bytes, op->out_bytes);
  return bytes <= kLongReplySpinMaxBytes ? ClientPeerBusyPollMicros() : -1;
}

// Runs a batch: all requests are sent before any reply is read, so a thread driving
// several communicators (ncclCommInitAll style) never waits on itself.
ncclResult_t RunOps(const char* call, std::vector<PendingOp>& ops) {
  std::map<ncclComm*, std::vector<PendingOp*>> by_comm;  // ordered by address: a fixed lock order
  for (auto& op : ops) by_comm[op.comm].push_back(&op);
  std::vector<std::unique_lock<std::mutex>> locks;
  ncclResult_t result = ncclSuccess;
  std::vector<ncclComm*> sent_to;
  std::map<ncclComm*, Sent> sent;
  std::map<ncclComm*, std::optional<InputFeeder>> feeders;  // streamed communicators' inputs
  std::vector<SelfCopy> self_copies;                      // own sends, run while the daemons work
  std::map<ncclComm*, std::vector<SelfCopy>> after_reply;  // own sends, run after the reply
  for (auto& [comm, list] : by_comm) {
    ncclResult_t init = WaitInit(comm);
    if (init != ncclSuccess) {
      result = Fail(call, init, "communicator (rank %d) failed to initialize", comm->rank);
      break;
    }
    locks.emplace_back(comm->op_mu);
    // Sends to this rank and receives from it are copied here (self_p2p.h); a communicator
    // with an error hears it from the daemon instead.
    std::vector<SelfCopy> self;
    if (comm->async_error.load() == ncclSuccess) self = TakeSelfCopies(comm->rank, &list);
    if (list.empty()) {
      RunSelfCopies(self);
      continue;
    }
    Status st = SendGroup(comm, list, &sent[comm]);
    if (!st.ok()) {
      if (st.code() == ncclSystemError || st.code() == ncclRemoteError) comm->async_error = st.code();
      result = Fail(call, ExplainAbort(comm, st));
      break;
    }
    // The daemon is already waiting for these bytes and starts on the first ones.
    if (sent[comm].streamed) {
      feeders[comm].emplace(comm->staging.data(), comm->staging.size(), *list[0]);
      feeders[comm]->Serve();
    }
    // While the daemon runs the rest, when it works on copies the shim took before the
    // request (staged inputs): a streamed input or one in host regions is read later, and
    // could meet an own receive's bytes, so those groups' own copies wait for the reply.
    const bool reads_later = sent[comm].streamed || std::any_of(list.begin(), list.end(), [](const PendingOp* op) {
                               return op->in_regions;
                             });
    auto& to = reads_later ? after_reply[comm] : self_copies;
    to.insert(to.end(), self.begin(), self.end());
    // A broadcast root's result out of place is its input: copied now, while the daemon
    // sends (a streamed input's feeder copies it chunk by chunk instead).
    if (!sent[comm].streamed) {
      for (const PendingOp* op : list) {
        if (op->copies_output_from_input()) self_copies.push_back({op->in, op->out, op->out_bytes});
      }
    }
    sent_to.push_back(comm);
  }
  // The pumps below serve one communicator at a time, and other programs' daemons may
  // need these communicators' inputs in another order: with more than one, copy all now.
  if (sent_to.size() > 1) {
    for (auto& [comm, feeder] : feeders) feeder->CopyAll();
  }
  RunSelfCopies(self_copies);
  // Every request that went out gets its reply read, even after a failure elsewhere, so
  // no connection is left with an unread reply.
  // One bound for the whole group, pumps and replies together: the documented 3 x timeout
  // + 30 s (docs/shim-protocol.md), not that much for each wait (communicators of one
  // program share their daemon, hence its timeout).
  const Deadline deadline = sent_to.empty() ? Deadline::Never() : sent_to.front()->conn->ReplyDeadline();
  auto failed = [&](ncclComm* comm, Status st) {
    if (st.code() == ncclRemoteError || st.code() == ncclSystemError) comm->async_error = st.code();
    st = ExplainAbort(comm, st);
    ncclResult_t code = Fail(call, Status(st.code(), "rank " + std::to_string(comm->rank) + ": " + st.message()));
    if (result == ncclSuccess) result = code;
  };
  // Groups conduitd refused, running nothing, because it cannot open their ready event:
  // all of them go again staged before any of those replies is read, since the local
  // ranks of one collective may be this thread's (a group over several communicators).
  std::vector<std::pair<ncclComm*, Status>> refused;
  for (ncclComm* comm : sent_to) {
    std::vector<PendingOp*>& list = by_comm[comm];
    std::optional<OutputPump> pump;
    if (sent[comm].streamed) {
      pump.emplace(comm->staging.data(), comm->staging.size(), *list[0], &comm->result_area);
      pump->PumpUntilReply(comm->conn->fd(), deadline, &*feeders[comm]);
    }
    Frame reply;
    Status st = comm->conn->ReadReply(shimproto::kGroup, shimproto::kGroupReply, &reply, deadline,
                                      ReplySpinMicros(comm, list));
    NoteWhatTheDaemonServes(comm, reply);
    if (!st.ok() && EventRefused(sent[comm], reply)) {
      refused.emplace_back(comm, st);
      continue;
    }
    if (st.ok()) st = FinishGroup(comm, list, sent[comm], reply, pump);
    // A streamed root's result: any chunk the daemon never asked for (none, when it sent them all).
    if (st.ok() && pump && list[0]->copies_output_from_input()) feeders[comm]->CopyAll();
    if (st.ok()) RunSelfCopies(after_reply[comm]);
    if (!st.ok()) failed(comm, st);
  }
  std::vector<ncclComm*> resent;
  for (auto& [comm, why] : refused) {
    Status st = ResendStaged(comm, by_comm[comm], why, &sent[comm]);
    if (st.ok()) {
      resent.push_back(comm);
    } else {
      failed(comm, st);
    }
  }
  for (ncclComm* comm : resent) {
    Frame reply;
    std::optional<OutputPump> no_pump;  // staged groups are never streamed
    Status st = comm->conn->ReadReply(shimproto::kGroup, shimproto::kGroupReply, &reply, deadline);
    NoteWhatTheDaemonServes(comm, reply);
    if (st.ok()) st = FinishGroup(comm, by_comm[comm], sent[comm], reply, no_pump);
    if (st.ok()) RunSelfCopies(after_reply[comm]);
    if (!st.ok()) failed(comm, st);
  }
  return result;
}

}  // namespace

ncclResult_t BuildReduceLike(const char* call, uint8_t kind, const void* send, void* recv, size_t count,
                             ncclDataType_t type, ncclRedOp_t op, int root, ncclComm* comm, PendingOp* out) {
  ncclResult_t r = CheckCommon(call, comm, type);
  if (r != ncclSuccess) return r;
  const size_t elem = DataTypeSize(type);
  const bool scatter = kind == shimproto::kReduceScatter;
  size_t bytes, region;
  if (MulOverflows(count, elem, &bytes) || MulOverflows(bytes, scatter ? comm->nranks : 1, &region)) {
    return Fail(call, ncclInvalidArgument, "count %zu overflows", count);
  }
  if (kind == shimproto::kReduce && (root < 0 || root >= comm->nranks)) {
    return Fail(call, ncclInvalidArgument, "root %d out of range [0, %d)", root, comm->nranks);
  }
  if (region > 0 && (send == nullptr || (recv == nullptr && (kind != shimproto::kReduce || comm->rank == root)))) {
    return Fail(call, ncclInvalidArgument, "null buffer");
  }
  PendingOp p;
  p.comm = comm;
  p.desc.kind = kind;
  p.desc.dtype = static_cast<uint8_t>(type);
  p.desc.peer = kind == shimproto::kReduce ? root : 0;
  p.desc.count = count;
  r = ResolveRedOp(call, comm, op, type, &p.desc, &p.scalar_pointer);
  if (r != ncclSuccess) return r;
  p.region_bytes = region;
  p.in = send;
  p.in_bytes = region;
  p.out = recv;
  if (scatter) {
    p.out_at = static_cast<size_t>(comm->rank) * bytes;
    p.out_bytes = bytes;
  } else if (kind != shimproto::kReduce || comm->rank == root) {
    p.out_bytes = bytes;
  }
  *out = p;
  return ncclSuccess;
}

ncclResult_t BuildBroadcast(const char* call, const void* send, void* recv, size_t count, ncclDataType_t type, int root,
                            ncclComm* comm, PendingOp* out) {
  ncclResult_t r = CheckCommon(call, comm, type);
  if (r != ncclSuccess) return r;
  size_t bytes;
  if (MulOverflows(count, DataTypeSize(type), &bytes)) return Fail(call, ncclInvalidArgument, "count %zu overflows", count);
  if (root < 0 || root >= comm->nranks) return Fail(call, ncclInvalidArgument, "root %d out of range [0, %d)", root, comm->nranks);
  if (bytes > 0 && (recv == nullptr || (comm->rank == root && send == nullptr))) return Fail(call, ncclInvalidArgument, "null buffer");
  PendingOp p;
  p.comm = comm;
  p.desc.kind = shimproto::kBroadcast;
  p.desc.dtype = static_cast<uint8_t>(type);
  p.desc.peer = root;
  p.desc.count = count;
  p.region_bytes = bytes;
  if (comm->rank == root) {
    p.in = send;
    p.in_bytes = bytes;
  }
  p.out = recv;
  p.out_bytes = bytes;
  *out = p;
  return ncclSuccess;
}

ncclResult_t BuildAllGather(const char* call, const void* send, void* recv, size_t count, ncclDataType_t type,
                            ncclComm* comm, PendingOp* out) {
  ncclResult_t r = CheckCommon(call, comm, type);
  if (r != ncclSuccess) return r;
  size_t bytes, region;
  if (MulOverflows(count, DataTypeSize(type), &bytes) || MulOverflows(bytes, comm->nranks, &region)) {
    return Fail(call, ncclInvalidArgument, "count %zu overflows", count);
  }
  if (bytes > 0 && (send == nullptr || recv == nullptr)) return Fail(call, ncclInvalidArgument, "null buffer");
  PendingOp p;
  p.comm = comm;
  p.desc.kind = shimproto::kAllGather;
  p.desc.dtype = static_cast<uint8_t>(type);
  p.desc.count = count;
  p.region_bytes = region;
  p.in = send;
  p.in_at = static_cast<size_t>(comm->rank) * bytes;
  p.in_bytes = bytes;
  p.out = recv;
  p.out_bytes = region;
  *out = p;
  return ncclSuccess;
}

ncclResult_t BuildP2p(const char* call, uint8_t kind, const void* send, void* recv, size_t count, ncclDataType_t type,
                      int peer, ncclComm* comm, PendingOp* out) {
  ncclResult_t r = CheckCommon(call, comm, type);
  if (r != ncclSuccess) return r;
  size_t bytes;
  if (MulOverflows(count, DataTypeSize(type), &bytes)) return Fail(call, ncclInvalidArgument, "count %zu overflows", count);
  if (peer < 0 || peer >= comm->nranks) return Fail(call, ncclInvalidArgument, "peer %d out of range [0, %d)", peer, comm->nranks);
  const bool is_send = kind == shimproto::kSend;
  if (bytes > 0 && (is_send ? send == nullptr : recv == nullptr)) return Fail(call, ncclInvalidArgument, "null buffer");
  PendingOp p;
  p.comm = comm;
  p.desc.kind = kind;
  p.desc.dtype = static_cast<uint8_t>(type);
  p.desc.peer = peer;
  p.desc.count = count;
  p.region_bytes = bytes;
  if (is_send) {
    p.in = send;
    p.in_bytes = bytes;
  } else {
    p.out = recv;
    p.out_bytes = bytes;
  }
  *out = p;
  return ncclSuccess;
}

ncclResult_t SubmitOp(const char* call, const PendingOp& op) {
  if (op.region_bytes == 0) return ncclSuccess;  // NCCL treats empty ops as no-ops
  if (g_group.depth > 0) {
    g_group.ops.push_back(op);
    return ncclSuccess;
  }
  return RunOpNow(call, op);
}

ncclResult_t RunOpNow(const char* call, const PendingOp& op) {
  if (op.region_bytes == 0) return ncclSuccess;
  std::vector<PendingOp> one{op};
  return RunOps(call, one);
}

void GroupStart() { ++g_group.depth; }
bool InGroup() { return g_group.depth > 0; }

void GroupDefer(std::function<ncclResult_t()> job) { g_group.deferred.push_back(std::move(job)); }

ncclResult_t GroupEnd() {
  if (g_group.depth == 0) return Fail("ncclGroupEnd", ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  if (--g_group.depth > 0) return ncclSuccess;
  std::vector<std::function<ncclResult_t()>> deferred = std::move(g_group.deferred);
  std::vector<PendingOp> ops = std::move(g_group.ops);
  g_group = GroupState{};
  // Communicator inits in a group join each other, so they must run concurrently.
  ncclResult_t result = ncclSuccess;
  if (!deferred.empty()) {
    std::vector<ncclResult_t> results(deferred.size(), ncclSuccess);
    std::vector<std::thread> threads;
    for (size_t i = 0; i < deferred.size(); ++i) threads.emplace_back([&, i] { results[i] = deferred[i](); });
    for (auto& t : threads) t.join();
    for (ncclResult_t r : results) {
      if (r != ncclSuccess && result == ncclSuccess) result = r;
    }
  }
  if (!ops.empty()) {
    ncclResult_t r = RunOps("ncclGroupEnd", ops);
    if (result == ncclSuccess) result = r;
  }
  return result;
}

std::vector<PendingOp> GroupDiscard() {
  std::vector<PendingOp> ops = std::move(g_group.ops);
  if (g_group.depth > 0) --g_group.depth;
  if (g_group.depth == 0) g_group = GroupState{};
  return ops;
}

}  // namespace conduit
