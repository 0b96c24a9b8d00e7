// The shim's side of device buffers (docs/shim-protocol.md, "Device buffers").
//
// Placement: each op is sorted by where its buffers live (device_memory.h). Host ops go
// through the staging segment with memcpy as always. Staged ops go through it too, with
// CUDA copies ordered on the caller's stream (the copy in waits for the program's prior
// work on the stream; the call returns when the result is in place). Device ops are not
// copied by the program at all: their allocations are registered with the daemon (CUDA
// IPC), the shim records an IPC event on the caller's stream, the daemon's stream waits
// on it, and the caller's stream waits on the daemon's done event (MCCS section 4.4.1).
//
// CUDA graph capture is refused: the daemon's work cannot become part of a graph.
#ifndef CONDUIT_LIBMCCS_NCCL_DEVICE_PATH_H_
#define CONDUIT_LIBMCCS_NCCL_DEVICE_PATH_H_

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "daemon_connection.h"
#include "device_memory.h"
#include "nccl.h"
#include "protocol/shim_protocol.h"

namespace conduit {

struct PendingOp;

// Classifies op's buffers and records its stream. Refuses a call made while the stream
// is being captured into a CUDA graph.
ncclResult_t PlaceOp(const char* call, PendingOp* op, cudaStream_t stream);

// Staged ops: copy the input into the segment / the output out of it, on the op's stream.
// SyncStaged waits (on the host) until those copies are done.
Status StageIn(const PendingOp& op, uint8_t* segment);
Status StageOut(const PendingOp& op, const uint8_t* segment);
Status SyncStaged(const PendingOp& op);

// One communicator rank's device state on its connection to the daemon.
class DevicePath {
 public:
  DevicePath() = default;
  ~DevicePath();
  DevicePath(const DevicePath&) = delete;
  DevicePath& operator=(const DevicePath&) = delete;

  // Readies the group's device ops: asks the daemon once whether it serves device
  // buffers, registers allocations it has not seen (releasing ones they replaced), fills
  // each op's DeviceOpRef. Ops that cannot be shared (daemon without GPU support, a GPU it
  // does not see, an allocation CUDA will not export) become staged.
  Status Prepare(DaemonConnection& conn, const std::vector<PendingOp*>& ops);
  // ncclCommRegister / ncclCommWindowRegister of `bytes` at `p`: a device allocation the
  // daemon can map is registered with it now, so the first collective on it pays no
  // mapping; a range across pages of a virtual-memory segment, its pages and the span of
  // them. *mapped says whether it was (host memory, or memory the daemon cannot map, is
  // staged as usual).
  Status RegisterAhead(DaemonConnection& conn, const void* p, size_t bytes, bool* mapped);
  // ncclCommDeregister / ncclCommWindowDeregister of `bytes` at `p`: the daemon lets go of its
  // mapping of the allocation (every one in the range) now, so that memory the program
  // frees next goes back to the GPU at once (PyTorch deregisters each segment before it
  // frees it). A later collective on the buffer registers it again.
  Status ReleaseAhead(DaemonConnection& conn, const void* p, size_t bytes);
  // Records the ready event on `stream` (after the program's work on it) and fills the
  // group header. `device`: the CUDA ordinal of the ops' buffers.
  Status RecordReady(cudaStream_t stream, int device, cuda::CUcontext fallback, shimproto::DeviceGroupHeader* header);
  // After the daemon accepted the group: the stream waits for the daemon's work. When CUDA
  // will not open the daemon's done event here, the call waits instead until conduitd has
  // run that work (DeviceDrain), and later groups stage.
  Status WaitDone(DaemonConnection& conn, cudaStream_t stream, const shimproto::DeviceGroupReplyTail& tail);
  // conduitd could not open this connection's ready event (shimproto::kReplyEventUnusable):
  // from now on device buffers are staged (one warning per process).
  void EventsRefusedByDaemon(const Status& why);

  // Asynchronous groups (shimproto::kGroupAsync, docs/gpu.md): whether this group, whose
  // ops Prepare placed, goes as one: every op a device op on `stream`, and this
  // connection's sync words set up (on first use: allocated on the stream's GPU, checked
  // that the driver runs stream memory operations, registered with the daemon). Otherwise
  // the group orders by events and its call waits for the daemon to run it.
  bool UseAsync(DaemonConnection& conn, const std::vector<PendingOp*>& ops);
  // The PreMulSum factor PlaceOp left for later (op->scalar_deferred), for op `index` of
  // a group of `nops`: in an asynchronous group, copied on the op's stream into the op's
  // slot after the sync words (the op then carries kOpScalarWord); otherwise read now.
  Status PlaceScalar(PendingOp* op, size_t index, size_t nops, bool async);
  // On `stream`: the ready word gets the group's number after the program's earlier work;
  // fills the header.
  Status SignalReady(cudaStream_t stream, shimproto::DeviceAsyncHeader* header);
  // After the daemon accepted the group: `stream` waits until its done word reaches `seq`.
  Status WaitDoneWord(cudaStream_t stream, uint32_t seq);
  // Whether conduitd takes point-to-point ops on device buffers (in asynchronous groups);
  // known once Prepare has run.
  bool serves_p2p() const { return daemon_p2p_; }
  // Whether an asynchronous group was ever sent (ncclCommGetAsyncError then asks the daemon).
  bool async_used() const { return seq_ != 0; }
  // conduitd is gone (its connection closed) while streams may wait on its done word for
  // groups it accepted: writes the last accepted group's number there itself, on a
  // stream of its own, so no stream of the program waits for good (the results of those
  // groups are undefined, as NCCL's after an abort). True when there was such a wait.
  bool ReleaseStreamsOfLostDaemon(Status* error);
  // Whether an allocation is registered with the daemon (and may be freed under it).
  bool has_registrations() const { return !registered_.empty(); }
  // ReleaseFreed from a thread that is not the program's (comm_watch.h): with the
  // context of the registrations current.
  Status ReleaseFreedBuffers(DaemonConnection& conn);

 private:
  struct Registered {
    uint64_t base = 0;
    uint64_t size = 0;
    cuda::CUcontext context = nullptr;  // the allocation's
  };
  // Registers the allocation behind `p` if needed; false in *shared when it cannot be
  // shared (the op is staged instead). Fills id and offset.
  Status Register(DaemonConnection& conn, const void* p, const BufferInfo& info, bool* shared, uint64_t* id,
                  uint64_t* offset);
  // Whether registration `id` holds [offset, offset + bytes).
  bool Covers(uint64_t id, uint64_t offset, uint64_t bytes) const;
  // A virtual-memory buffer of `bytes` at `p` that runs past the end of its registered page
  // (*id, *offset from Register) into the pages mapped after it, as in PyTorch's
  // expandable segments: registers those pages and the span of them (RegisterSpan), and
  // names the span in *id and *offset. *shared false when that cannot be (a daemon without
  // spans, memory after the page that is not the next page of the segment, a refusal):
  // the op is staged.
  Status RegisterSpan(DaemonConnection& conn, const void* p, uint64_t bytes, const BufferInfo& info, bool* shared,
                      uint64_t* id, uint64_t* offset);
  // conduitd dropped the spans holding page `buffer_id` with it: forget them here too.
  void ForgetSpansOf(uint64_t buffer_id);
  // Remembers an allocation CUDA would not export (CUDA IPC or file descriptor), so later
  // ops on it are staged without the driver calls and the log line each time.
  void NoteUnexportable(uint64_t buffer_id);
  Status Uuid(int device, shimproto::DeviceUuid* out);
  // Asks the daemon, once per connection, whether it maps device buffers and which GPUs
  // it sees.
  Status Probe(DaemonConnection& conn);
  bool DaemonSees(const shimproto::DeviceUuid& uuid) const;
  // Makes the connection's interprocess ready event live in `ctx` (created and its
  // handle exported on first use). *usable false when CUDA will not create or export
  // one here: from then on this connection stages its device buffers.
  void EnsureReadyEvent(cuda::CUcontext ctx, bool* usable);
  // No interprocess events on this connection from now on (device buffers are staged); the
  // first time in the process, one warning saying why.
  void StopUsingEvents(const Status& why);
  // Releases, at most every kFreeCheckInterval, the registrations whose allocation the
  // program has freed (the driver no longer names their buffer id at their base), so
  // conduitd drops its mapping and the memory goes back to the GPU.
  Status ReleaseFreed(DaemonConnection& conn);
  Status ReleaseBuffer(DaemonConnection& conn, uint64_t buffer_id);
  // UseAsync's first-use setup; false (and async off for this connection) on any refusal.
  bool SetUpWords(DaemonConnection& conn, const PendingOp& op);

  // One driver query per registration: cheap, but a group of small calls need not pay it.
  static constexpr std::chrono::milliseconds kFreeCheckInterval{100};
  std::chrono::steady_clock::time_point last_free_check_{};
  bool probed_ = false;
  bool daemon_serves_ = false;
  bool daemon_p2p_ = false;  // it takes Send/Recv as device ops in asynchronous groups
  bool events_usable_ = true;
  bool async_usable_ = true;          // until a setup step fails, or CONDUIT_DEVICE_SYNC=events
  cuda::CUdeviceptr words_ = 0;       // ready word, then done word (device memory)
  cuda::CUcontext words_context_ = nullptr;
  int words_device_ = -1;
  shimproto::DeviceAsyncHeader async_header_{};
  uint32_t seq_ = 0;                  // the last group's number
  uint32_t awaited_seq_ = 0;          // the last number a stream waits for on the done word
  uint32_t released_seq_ = 0;         // what ReleaseStreamsOfLostDaemon wrote there
  cudaStream_t last_async_stream_ = nullptr;
  std::vector<shimproto::DeviceUuid> daemon_devices_;
  std::map<uint64_t, Registered> registered_;  // by buffer id
  struct Span {
    uint64_t id = 0;    // shimproto::kSpanIdBit | a count; 0: conduitd refused it (staged)
    uint64_t base = 0;  // the first page's first byte
  };
  std::map<std::vector<uint64_t>, Span> spans_;  // by their pages' buffer ids, in address order
  uint64_t spans_made_ = 0;
  bool daemon_spans_ = false;  // it serves RegisterSpan
  static constexpr size_t kMaxUnexportable = 4096;
  std::set<uint64_t> unexportable_;  // buffer ids
  std::map<int, shimproto::DeviceUuid> uuids_;  // by CUDA ordinal
  cuda::CUevent ready_ = nullptr;
  cuda::CUcontext ready_context_ = nullptr;
  shimproto::DeviceGroupHeader ready_header_{};
  std::map<std::array<uint8_t, shimproto::kIpcHandleBytes>, std::pair<cuda::CUevent, cuda::CUcontext>> done_events_;
};

}  // namespace conduit

#endif  // CONDUIT_LIBMCCS_NCCL_DEVICE_PATH_H_
