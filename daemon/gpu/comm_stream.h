// CommStream: one communicator's GPU work in the daemon (MCCS's per-communicator stream).
//
// Collectives of a communicator on device buffers run in order on one stream, on the GPU
// of its first local rank: the stream first waits for each rank's ready event (recorded
// by the program on its own stream), then combines and copies, then records `done`, an
// IPC event the programs' streams wait on. Nothing here blocks the daemon's thread except
// Drain, which the inter-host path needs before data crosses the network.
#ifndef CONDUIT_DAEMON_GPU_COMM_STREAM_H_
#define CONDUIT_DAEMON_GPU_COMM_STREAM_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "common/deadline.h"
#include "common/status.h"
#include "cuda/cuda_abi.h"
#include "gpu/runtime.h"
#include "nccl.h"

namespace conduit::gpu {

// A buffer as a kernel sees it: its address and the GPU it lives on (-1: pinned host
// memory, which every GPU can reach).
struct DeviceBuf {
  uint64_t ptr = 0;
  int device = -1;
};

class CommStream {
 public:
  // Creates the stream and the done event on `device`.
  static Status Create(Runtime& runtime, int device, std::unique_ptr<CommStream>* out);
  ~CommStream();
  CommStream(const CommStream&) = delete;
  CommStream& operator=(const CommStream&) = delete;

  int device() const { return device_; }
  const cuda::IpcEventHandle& done_handle() const { return done_handle_; }

  // All calls below need this GPU's context current (ScopedContext with context()).
  cuda::CUcontext context() const { return runtime_.context(device_); }

  // Later work waits for `ready`, an event a program recorded on its stream.
  Status WaitFor(cuda::CUevent ready);
  // Later work waits until the 32-bit word at `word` (a program's device memory mapped
  // here) reaches `value` (modulo 2^32); WriteWord writes it after the work before.
  Status WaitWord(uint64_t word, uint32_t value);
  Status WriteWord(uint64_t word, uint32_t value);
  // For every element: in[0] (op) in[1] (op) ..., each input r first scaled by
  // (*scalars)[r] when `scalars` is given (PreMulSum), divided by `divisor` when > 0,
  // written to every output (gpu/combine.h). Any number of inputs and outputs; ones the
  // stream's GPU cannot reach directly are bounced through pinned host memory.
  // `scalar_at` (with `scalars`): where non-zero, input r's factor is read from that
  // device address when the kernel runs instead.
  Status Combine(ncclDataType_t type, ncclRedOp_t op, uint64_t count, const std::vector<DeviceBuf>& in,
                 const std::vector<uint64_t>* scalars, int divisor, const std::vector<DeviceBuf>& out,
                 Deadline deadline, const std::vector<uint64_t>* scalar_at = nullptr);
  Status Copy(DeviceBuf dst, DeviceBuf src, size_t bytes);
  // Pinned host memory of at least `bytes` for the inter-host part; its address is valid
  // on the host and on every GPU. Growing it first drains the stream.
  Status Staging(size_t bytes, Deadline deadline, uint8_t** data);
  // Waits until everything enqueued so far has run: bounded, and ends early when
  // `failed` reports an abort.
  Status Drain(Deadline deadline, const std::function<Status()>& failed = nullptr);
  // Records the done event after what is enqueued.
  Status RecordDone();
  // Keeps `held` (programs' mappings the work enqueued so far uses) until the GPU has run
  // that work: a mapping closed under a running kernel is an illegal address, which would
  // end every GPU job of this daemon. Released by later calls and by the destructor.
  Status Retain(std::vector<std::shared_ptr<const void>> held);
  // Drops what Retain holds for work the GPU has run. Retain does so too, but only at the
  // next collective: a program whose last collective used a buffer it then frees gets the
  // memory back only once this runs (the registry calls it every second).
  void ReleaseFinished();

 private:
  CommStream(Runtime& runtime, int device) : runtime_(runtime), driver_(runtime.driver()), device_(device) {}
  // One kernel launch: at most kCombineSlots inputs and outputs, all reachable.
  Status Launch(ncclDataType_t type, ncclRedOp_t op, uint64_t count, const std::vector<DeviceBuf>& in,
                const std::vector<uint64_t>& scalars, const std::vector<uint64_t>& scalar_at, uint32_t scale_mask,
                int divisor, const std::vector<DeviceBuf>& out);
  bool Reachable(const DeviceBuf& b) { return b.device < 0 || runtime_.EnablePeerAccess(device_, b.device); }
  Status GrowPinned(uint8_t** buffer, size_t* have, size_t bytes, Deadline deadline);

  Runtime& runtime_;
  const cuda::CudaDriver& driver_;
  const int device_;
  cuda::CUstream stream_ = nullptr;
  cuda::CUevent done_ = nullptr;
  cuda::IpcEventHandle done_handle_{};
  uint8_t* staging_ = nullptr;  // inter-host work area
  size_t staging_bytes_ = 0;
  uint8_t* bounce_ = nullptr;  // copies of buffers the GPU cannot reach
  size_t bounce_bytes_ = 0;
  // Retain's: each batch with the event recorded after its work, oldest first.
  struct Held {
    cuda::CUevent after = nullptr;
    std::vector<std::shared_ptr<const void>> held;
  };
  std::deque<Held> held_;
  std::vector<cuda::CUevent> spare_events_;  // Held events whose work ran, for reuse
};

}  // namespace conduit::gpu

#endif  // CONDUIT_DAEMON_GPU_COMM_STREAM_H_
