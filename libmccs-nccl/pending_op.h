// PendingOp: one NCCL call on the managed path, laid out for the staging segment and
// waiting for its group to be sent. The group machinery (ops.h) builds and sends it; the
// device path (device_path.h) classifies and stages its buffers. Its own header so that
// neither of those two includes the other's.
#ifndef CONDUIT_LIBMCCS_NCCL_PENDING_OP_H_
#define CONDUIT_LIBMCCS_NCCL_PENDING_OP_H_

#include <cstddef>

#include "comm.h"
#include "device_memory.h"
#include "nccl.h"
#include "protocol/shim_protocol.h"

namespace conduit {

struct PendingOp {
  ncclComm* comm = nullptr;
  shimproto::OpDesc desc{};
  size_t region_bytes = 0;   // bytes of the segment the op uses
  const void* in = nullptr;  // copied to region + in_at before the op
  size_t in_at = 0, in_bytes = 0;
  void* out = nullptr;       // copied from region + out_at after the op
  size_t out_at = 0, out_bytes = 0;
  // Where in and out live (device_path.h): host ops are copied with memcpy, staged ones
  // with CUDA copies on `stream`; device ones are shared with the daemon through `ref`.
  MemoryKind place = MemoryKind::kHost;
  cudaStream_t stream = nullptr;
  BufferInfo in_info, out_info;
  shimproto::DeviceOpRef ref{};
  // Run in the program's own ncclMemAlloc'd buffers (host_regions.h) instead of staged:
  // desc carries kOpRegion and region_ref where they are. `adopted`: a buffer is one of the
  // program's own whose pages were adopted (its edge bytes are copied in and out).
  bool in_regions = false;
  bool adopted = false;
  shimproto::RegionOpRef region_ref{};
  // PreMulSum with ncclScalarDevice: where the factor is, read into desc.scalar by PlaceOp
  // in the order of the op's stream (after the program's earlier work on it), or, for a
  // device op whose factor CUDA knows, left to DevicePath::PlaceScalar (deferred).
  const void* scalar_pointer = nullptr;
  bool scalar_deferred = false;

  // A broadcast's root in place: its buffer already holds the result (the input it sends),
  // so nothing is copied back out of the segment (docs/design.md, "Copies per payload byte").
  bool output_is_input() const { return desc.kind == shimproto::kBroadcast && in != nullptr && in == out; }
  // A broadcast's root out of place, staged from host memory: its result is its input, so
  // the shim copies `in` to `out` itself while the daemon sends (a streamed input's feeder
  // chunk by chunk, right after each chunk went into the segment), not from the segment
  // once the reply has come, after the whole transfer.
  bool copies_output_from_input() const {
    return desc.kind == shimproto::kBroadcast && place == MemoryKind::kHost && !in_regions && in != nullptr &&
           out != nullptr && in != out;
  }
  // Bytes copied out of the segment into `out` after a staged op.
  size_t copy_out_bytes() const { return output_is_input() || copies_output_from_input() ? 0 : out_bytes; }
};

}  // namespace conduit

#endif  // CONDUIT_LIBMCCS_NCCL_PENDING_OP_H_
