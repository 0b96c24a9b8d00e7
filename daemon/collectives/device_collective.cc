// Communicator::ExecuteOnDevice: one collective whose local ranks passed device buffers.
//
// Everything local runs on the communicator's stream (gpu/comm_stream.h), in stream order
// after each rank's ready event, without the daemon's thread waiting for the GPU:
//  * one host: a reduction is one combine kernel reading every local rank's input and
//    writing every local rank's output; gathers and broadcasts are device copies;
//  * several hosts: the local ranks are combined into pinned host memory, the stream is
//    drained, the usual inter-host algorithm runs on that memory over TCP (CrossHosts,
//    exactly as for host buffers), and the result is spread back to the ranks' buffers.
// Then the done event is recorded; each program's stream waits on it.
#include <cstring>

#include "collectives/communicator.h"
#include "gpu/comm_stream.h"
#include "gpu/runtime.h"
#include "reduce/reduce.h"

namespace conduit {
namespace {

using gpu::DeviceBuf;

DeviceBuf At(DeviceBuf b, size_t offset) { return DeviceBuf{b.ptr + offset, b.device}; }

}  // namespace

Status Communicator::ExecuteOnDevice(const std::vector<CollRequest*>& batch, const CommConfig& config,
                                     const char** algorithm) {
  gpu::Runtime& runtime = gpu::Runtime::Get();
  if (!runtime.available()) {
    return InvalidUsage("device buffers reached a daemon without GPU support: %s", runtime.unavailable_reason().c_str());
  }
  if (!device_) CONDUIT_RETURN_IF_ERROR(gpu::CommStream::Create(runtime, batch[0]->device->stream_device, &device_));
  gpu::CommStream& cs = *device_;
  cuda::ScopedContext ctx(runtime.driver(), cs.context());
  if (!ctx.ok()) return SystemError("cannot make GPU %d's context current", cs.device());
  const Deadline deadline = OpDeadline();
  auto failed = [this] { return failure(); };

  const shimproto::OpDesc& op = batch[0]->op;
  const auto type = static_cast<ncclDataType_t>(op.dtype);
  const size_t elem = DataTypeSize(type);
  const size_t block = op.count * elem;
  const bool premul = op.redop == shimproto::kRedOpPreMulSum;
  const ncclRedOp_t kernel_op = premul || op.redop == ncclAvg ? ncclSum : static_cast<ncclRedOp_t>(op.redop);
  const int divisor = op.redop == ncclAvg ? nranks_ : 0;
  const bool one_host = membership_.host_addrs.size() == 1;
  *algorithm = "local";

  std::vector<DeviceBuf> sends, recvs;
  std::vector<uint64_t> scalars, scalar_at;
  bool any_scalar_at = false;
  int root = -1;  // local index of the root, if it is here
  for (size_t i = 0; i < batch.size(); ++i) {
    const CollRequest* r = batch[i];
    CONDUIT_RETURN_IF_ERROR(r->ready != nullptr ? cs.WaitFor(r->ready) : cs.WaitWord(r->ready_word, r->ready_value));
    sends.push_back(DeviceBuf{r->device->send, r->device->send_device});
    recvs.push_back(DeviceBuf{r->device->recv, r->device->recv_device});
    uint64_t s = 0;
    memcpy(&s, r->op.scalar, sizeof(s));
    scalars.push_back(s);
    scalar_at.push_back(r->device->scalar);
    any_scalar_at |= r->device->scalar != 0;
    if (r->rank == op.peer) root = static_cast<int>(i);
  }
  const std::vector<uint64_t>* scale = premul ? &scalars : nullptr;
  const std::vector<uint64_t>* scale_at = premul && any_scalar_at ? &scalar_at : nullptr;

  // Every kernel and copy goes through these two, which count what it writes (memory_traffic.h):
  // a DeviceBuf on device -1 is the pinned staging memory.
  auto combine = [&](uint64_t count, const std::vector<DeviceBuf>& in, const std::vector<uint64_t>* by, int div,
                     const std::vector<DeviceBuf>& out, const std::vector<uint64_t>* by_at = nullptr) -> Status {
    CONDUIT_RETURN_IF_ERROR(cs.Combine(type, kernel_op, count, in, by, div, out, deadline, by_at));
    for (const DeviceBuf& o : out) traffic_.AddDeviceWrite(in[0].device < 0, o.device < 0, count * elem);
    return Status::Ok();
  };
  auto copy = [&](DeviceBuf dst, DeviceBuf src, size_t bytes) -> Status {
    CONDUIT_RETURN_IF_ERROR(cs.Copy(dst, src, bytes));
    traffic_.AddDeviceWrite(src.device < 0, dst.device < 0, bytes);
    return Status::Ok();
  };

  // Several hosts: this host's contribution in pinned memory, the network, the result back.
  uint8_t* work = nullptr;
  DeviceBuf pinned;
  auto cross = [&]() -> Status {
    CONDUIT_RETURN_IF_ERROR(cs.Drain(deadline, failed));
    return CrossHosts(op, config, work, nullptr, nullptr, algorithm);
  };
  auto stage = [&](size_t bytes) -> Status {
    CONDUIT_RETURN_IF_ERROR(cs.Staging(bytes, deadline, &work));
    pinned = DeviceBuf{reinterpret_cast<uint64_t>(work), -1};
    return Status::Ok();
  };

  switch (op.kind) {
    case shimproto::kAllReduce:
      if (one_host) {
        CONDUIT_RETURN_IF_ERROR(combine(op.count, sends, scale, divisor, recvs, scale_at));
        break;
      }
      CONDUIT_RETURN_IF_ERROR(stage(block));
      CONDUIT_RETURN_IF_ERROR(combine(op.count, sends, scale, 0, {pinned}, scale_at));
      CONDUIT_RETURN_IF_ERROR(cross());
      CONDUIT_RETURN_IF_ERROR(combine(op.count, {pinned}, nullptr, divisor, recvs));
      break;
    case shimproto::kReduce:
      if (one_host) {
        CONDUIT_RETURN_IF_ERROR(combine(op.count, sends, scale, divisor, {recvs[root]}, scale_at));
        break;
      }
      CONDUIT_RETURN_IF_ERROR(stage(block));
      CONDUIT_RETURN_IF_ERROR(combine(op.count, sends, scale, 0, {pinned}, scale_at));
      CONDUIT_RETURN_IF_ERROR(cross());
      if (root >= 0) CONDUIT_RETURN_IF_ERROR(combine(op.count, {pinned}, nullptr, divisor, {recvs[root]}));
      break;
    case shimproto::kReduceScatter:
      if (one_host) {
        for (size_t j = 0; j < batch.size(); ++j) {
          std::vector<DeviceBuf> blocks;
          for (const DeviceBuf& s : sends) blocks.push_back(At(s, static_cast<size_t>(batch[j]->rank) * block));
          CONDUIT_RETURN_IF_ERROR(combine(op.count, blocks, scale, divisor, {recvs[j]}, scale_at));
        }
        break;
      }
      CONDUIT_RETURN_IF_ERROR(stage(block * nranks_));
      CONDUIT_RETURN_IF_ERROR(combine(op.count * nranks_, sends, scale, 0, {pinned}, scale_at));
      CONDUIT_RETURN_IF_ERROR(cross());
      for (size_t j = 0; j < batch.size(); ++j) {
        DeviceBuf mine = At(pinned, static_cast<size_t>(batch[j]->rank) * block);
        CONDUIT_RETURN_IF_ERROR(combine(op.count, {mine}, nullptr, divisor, {recvs[j]}));
      }
      break;
    case shimproto::kAllGather:
      if (one_host) {
        for (const DeviceBuf& dst : recvs) {
          for (size_t i = 0; i < batch.size(); ++i) {
            CONDUIT_RETURN_IF_ERROR(copy(At(dst, static_cast<size_t>(batch[i]->rank) * block), sends[i], block));
          }
        }
        break;
      }
      CONDUIT_RETURN_IF_ERROR(stage(block * nranks_));
      for (size_t i = 0; i < batch.size(); ++i) {
        CONDUIT_RETURN_IF_ERROR(copy(At(pinned, static_cast<size_t>(batch[i]->rank) * block), sends[i], block));
      }
      CONDUIT_RETURN_IF_ERROR(cross());
      for (const DeviceBuf& dst : recvs) CONDUIT_RETURN_IF_ERROR(copy(dst, pinned, block * nranks_));
      break;
    case shimproto::kBroadcast:
      if (one_host) {
        for (const DeviceBuf& dst : recvs) CONDUIT_RETURN_IF_ERROR(copy(dst, sends[root], block));
        break;
      }
      CONDUIT_RETURN_IF_ERROR(stage(block));
      if (root >= 0) CONDUIT_RETURN_IF_ERROR(copy(pinned, sends[root], block));
      CONDUIT_RETURN_IF_ERROR(cross());
      for (const DeviceBuf& dst : recvs) CONDUIT_RETURN_IF_ERROR(copy(dst, pinned, block));
      break;
    default:
      return InternalError("op kind %u is not a collective", op.kind);
  }
  // The programs' mappings stay open until the GPU has run this work, whatever the
  // programs release or free meanwhile.
  std::vector<std::shared_ptr<const void>> held;
  for (const CollRequest* r : batch) held.insert(held.end(), r->device->keep.begin(), r->device->keep.end());
  CONDUIT_RETURN_IF_ERROR(cs.Retain(std::move(held)));
  return cs.RecordDone();
}

Status Communicator::DrainDevice(Deadline deadline) {
  gpu::CommStream* stream = nullptr;
  {
    // device_ is made by the thread holding the running token: read it with mu_ held and
    // no token taken (as ReleaseFinishedDeviceWork does).
    std::unique_lock<std::mutex> lock(mu_);
    while (queue_.running()) {
      if (cv_.wait_until(lock, deadline.when()) == std::cv_status::timeout && queue_.running()) {
        return RemoteError("timed out waiting for the communicator's collective to end");
      }
    }
    stream = device_.get();  // replaced only by ~Communicator
  }
  if (stream == nullptr) return Status::Ok();
  gpu::Runtime& runtime = gpu::Runtime::Get();
  cuda::ScopedContext ctx(runtime.driver(), stream->context());
  if (!ctx.ok()) return SystemError("cannot make GPU %d's context current", stream->device());
  return stream->Drain(deadline, [this] { return failure(); });
}

}  // namespace conduit
