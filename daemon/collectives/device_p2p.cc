// Communicator::StageDeviceSends / FinishDeviceRecvs: the point-to-point ops of an
// asynchronous device group.
//
// Sends and receives travel as host bytes (the mailbox within a host, the p2p links
// between hosts). For a device buffer those bytes live in pinned memory of the program
// connection's own stream (GroupContext::p2p_stream): the stream waits for the program's
// ready word, so it copies inputs only after the program's earlier work and writes outputs
// only after the program's earlier reads; the copies in come before any byte leaves, the
// copies out once every receive has arrived, and the daemon's thread waits for each. The
// program's thread waits for none of it: its stream waits for the group's done word,
// written after FinishDeviceRecvs returns (SignalDeviceDone).
//
// The stream is the connection's, used only by its proxy thread one group at a time, so
// it needs no lock; the communicator's own stream (device_collective.cc) is not touched.
#include "collectives/communicator.h"
#include "gpu/comm_stream.h"
#include "gpu/runtime.h"

namespace conduit {
namespace {

bool IsDeviceP2p(const shimproto::OpDesc& op) {
  return (op.flags & shimproto::kOpDevice) && (op.kind == shimproto::kSend || op.kind == shimproto::kRecv);
}

// Each op's place in the pinned memory, aligned as CUDA copies like.
constexpr size_t kAlign = 256;
size_t Aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

}  // namespace

Status Communicator::StageDeviceSends(const std::vector<shimproto::OpDesc>& ops, const GroupContext& context,
                                      std::vector<uint8_t*>* host) {
  size_t total = 0;
  for (const shimproto::OpDesc& op : ops) total += IsDeviceP2p(op) ? Aligned(OpPayloadBytes(op)) : 0;
  if (total == 0) return Status::Ok();
  gpu::CommStream* stream = context.p2p_stream;  // RunGroup checked it is there
  if (stream == nullptr) return InternalError("device point-to-point ops without their stream");
  gpu::Runtime& runtime = gpu::Runtime::Get();
  cuda::ScopedContext ctx(runtime.driver(), stream->context());
  if (!ctx.ok()) return SystemError("cannot make GPU %d's context current", stream->device());
  const Deadline deadline = OpDeadline();
  uint8_t* pinned = nullptr;
  CONDUIT_RETURN_IF_ERROR(stream->Staging(total, deadline, &pinned));
  CONDUIT_RETURN_IF_ERROR(stream->WaitWord(context.ready_word, context.ready_value));
  size_t at = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (!IsDeviceP2p(ops[i])) continue;
    (*host)[i] = pinned + at;
    const DeviceOpBuffers& b = (*context.device_ops)[i];
    if (ops[i].kind == shimproto::kSend && OpPayloadBytes(ops[i]) > 0) {
      const gpu::DeviceBuf to{reinterpret_cast<uint64_t>(pinned + at), -1};
      CONDUIT_RETURN_IF_ERROR(stream->Copy(to, gpu::DeviceBuf{b.send, b.send_device}, OpPayloadBytes(ops[i])));
    }
    at += Aligned(OpPayloadBytes(ops[i]));
  }
  // Even with receives alone: the program's earlier work on those buffers is done before
  // FinishDeviceRecvs writes them.
  return stream->Drain(deadline, [this] { return failure(); });
}

Status Communicator::FinishDeviceRecvs(const std::vector<shimproto::OpDesc>& ops, const GroupContext& context,
                                       const std::vector<uint8_t*>& host) {
  bool any = false;
  for (size_t i = 0; i < ops.size(); ++i) any |= IsDeviceP2p(ops[i]) && ops[i].kind == shimproto::kRecv && OpPayloadBytes(ops[i]) > 0;
  if (!any) return Status::Ok();
  gpu::CommStream* stream = context.p2p_stream;  // StageDeviceSends checked it
  gpu::Runtime& runtime = gpu::Runtime::Get();
  cuda::ScopedContext ctx(runtime.driver(), stream->context());
  if (!ctx.ok()) return SystemError("cannot make GPU %d's context current", stream->device());
  for (size_t i = 0; i < ops.size(); ++i) {
    if (!IsDeviceP2p(ops[i]) || ops[i].kind != shimproto::kRecv || OpPayloadBytes(ops[i]) == 0) continue;
    const DeviceOpBuffers& b = (*context.device_ops)[i];
    const gpu::DeviceBuf from{reinterpret_cast<uint64_t>(host[i]), -1};
    CONDUIT_RETURN_IF_ERROR(stream->Copy(gpu::DeviceBuf{b.recv, b.recv_device}, from, OpPayloadBytes(ops[i])));
  }
  return stream->Drain(OpDeadline(), [this] { return failure(); });
}

}  // namespace conduit
