// Communicator::StageDeviceSends / CopyTakenDeviceSends / FinishDeviceRecvs: the
// point-to-point ops of an asynchronous device group.
//
// A send to a rank of this daemon goes device to device: the receiver's GPU copies from
// the sender's buffer (as mapped here) into its own, on the receiver connection's stream,
// and the sender's group waits until that copy has run (its ticket, Mailbox::Take). It is
// posted only once the sender's stream has reached the group (its ready word), so the
// bytes it names are final. A send whose buffer overlaps one of its group's receives goes
// through host memory instead: the receive could overwrite it before the peer reads it.
//
// Other sends and receives travel as host bytes (the mailbox within a host, the p2p links
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
                                      DeviceP2p* p2p) {
  bool any = false;
  size_t total = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (!IsDeviceP2p(ops[i])) continue;
    any = true;
    p2p->direct[i] = ops[i].kind == shimproto::kSend && GoesDirect(ops, *context.device_ops, i);
    if (!p2p->direct[i]) total += Aligned(OpPayloadBytes(ops[i]));
  }
  if (!any) return Status::Ok();
  gpu::CommStream* stream = context.p2p_stream;  // RunGroup checked it is there
  if (stream == nullptr) return InternalError("device point-to-point ops without their stream");
  gpu::Runtime& runtime = gpu::Runtime::Get();
  cuda::ScopedContext ctx(runtime.driver(), stream->context());
  if (!ctx.ok()) return SystemError("cannot make GPU %d's context current", stream->device());
  const Deadline deadline = OpDeadline();
  uint8_t* pinned = nullptr;
  if (total > 0) CONDUIT_RETURN_IF_ERROR(stream->Staging(total, deadline, &pinned));
  CONDUIT_RETURN_IF_ERROR(stream->WaitWord(context.ready_word, context.ready_value));
  size_t at = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (!IsDeviceP2p(ops[i]) || p2p->direct[i]) continue;
    p2p->host[i] = pinned + at;
    const DeviceOpBuffers& b = (*context.device_ops)[i];
    if (ops[i].kind == shimproto::kSend && OpPayloadBytes(ops[i]) > 0) {
      const gpu::DeviceBuf to{reinterpret_cast<uint64_t>(pinned + at), -1};
      CONDUIT_RETURN_IF_ERROR(stream->Copy(to, gpu::DeviceBuf{b.send, b.send_device}, OpPayloadBytes(ops[i])));
    }
    at += Aligned(OpPayloadBytes(ops[i]));
  }
  // Even with receives or direct sends alone: the program's earlier work on those buffers
  // is done before anything reads or writes them.
  return stream->Drain(deadline, [this] { return failure(); });
}

bool Communicator::GoesDirect(const std::vector<shimproto::OpDesc>& ops, const std::vector<DeviceOpBuffers>& buffers,
                              size_t i) const {
  const size_t bytes = OpPayloadBytes(ops[i]);
  if (!options_.device_p2p_direct || bytes == 0 || buffers[i].send == 0) return false;
  if (membership_.host_of_rank[ops[i].peer] != membership_.my_host) return false;
  for (size_t j = 0; j < ops.size(); ++j) {
    if (!IsDeviceP2p(ops[j]) || ops[j].kind != shimproto::kRecv) continue;
    const uint64_t recv = buffers[j].recv, recv_bytes = OpPayloadBytes(ops[j]);
    if (recv_bytes > 0 && buffers[i].send < recv + recv_bytes && recv < buffers[i].send + bytes) return false;
  }
  return true;
}

Status Communicator::SendDeviceDirect(int rank, const shimproto::OpDesc& op, const DeviceOpBuffers& b,
                                      std::shared_ptr<SendTicket>* ticket) {
  auto source = std::make_shared<DeviceSource>();
  source->ptr = b.send;
  source->device = b.send_device;
  source->keep = b.keep;
  *ticket = std::make_shared<SendTicket>();
  mailbox_.PostLocalDevice(rank, op.peer, std::move(source), OpPayloadBytes(op), *ticket);
  return Status::Ok();
}

Status Communicator::CopyTakenDeviceSends(const std::vector<shimproto::OpDesc>& ops, const GroupContext& context,
                                          const RankBuffer& buffer, DeviceP2p* p2p) {
  bool any = false, on_stream = false;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (!p2p->taken[i].device) continue;
    any = true;
    on_stream |= IsDeviceP2p(ops[i]);
  }
  if (!any) return Status::Ok();
  Status st = failure();
  const Deadline deadline = OpDeadline();
  gpu::Runtime& runtime = gpu::Runtime::Get();
  if (st.ok() && on_stream) {
    // Device receives: one copy each on the connection's stream, whose earlier wait for the
    // ready word (StageDeviceSends) ordered them after the program's earlier work.
    gpu::CommStream* stream = context.p2p_stream;
    cuda::ScopedContext ctx(runtime.driver(), stream->context());
    if (!ctx.ok()) {
      st = SystemError("cannot make GPU %d's context current", stream->device());
    } else {
      std::vector<std::shared_ptr<const void>> held;
      for (size_t i = 0; i < ops.size() && st.ok(); ++i) {
        const DeviceSource* source = p2p->taken[i].device.get();
        if (source == nullptr || !IsDeviceP2p(ops[i])) continue;
        const DeviceOpBuffers& b = (*context.device_ops)[i];
        st = stream->Copy(gpu::DeviceBuf{b.recv, b.recv_device}, gpu::DeviceBuf{source->ptr, source->device},
                          OpPayloadBytes(ops[i]));
        held.insert(held.end(), source->keep.begin(), source->keep.end());
        held.insert(held.end(), b.keep.begin(), b.keep.end());
      }
      // Both sides' mappings stay until the copies have run, even if the wait below ends
      // early (an abort) and the sender's group goes on.
      Status retained = stream->Retain(std::move(held));
      if (st.ok()) st = retained;
      if (st.ok()) st = stream->Drain(deadline, [this] { return failure(); });
      if (st.ok()) stream->ReleaseFinished();
    }
  }
  for (size_t i = 0; i < ops.size() && st.ok(); ++i) {
    const DeviceSource* source = p2p->taken[i].device.get();
    if (source == nullptr || IsDeviceP2p(ops[i])) continue;
    // A receive into host memory (the segment of a program staging it, or its region) of
    // a device send: copied out by the sender's GPU.
    uint8_t* into = p2p->host[i] != nullptr ? p2p->host[i] : buffer.base + ops[i].offset;
    st = runtime.CopyNow(source->device, reinterpret_cast<uint64_t>(into), source->ptr, OpPayloadBytes(ops[i]),
                         deadline);
  }
  for (size_t i = 0; i < ops.size(); ++i) {
    TakenMessage& taken = p2p->taken[i];
    if (!taken.device) continue;
    if (st.ok()) stats_.AddDeviceP2p(IsDeviceP2p(ops[i]), OpPayloadBytes(ops[i]));
    mailbox_.Complete(taken.ticket, st);  // `device` stays: FinishDeviceRecvs skips these
  }
  return st;
}

Status Communicator::FinishDeviceRecvs(const std::vector<shimproto::OpDesc>& ops, const GroupContext& context,
                                       const DeviceP2p& p2p) {
  // Receives the pinned memory holds: into device buffers, not matched to a direct send.
  auto staged = [&](size_t i) {
    return IsDeviceP2p(ops[i]) && ops[i].kind == shimproto::kRecv && OpPayloadBytes(ops[i]) > 0 &&
           p2p.host[i] != nullptr && !p2p.taken[i].device;
  };
  bool any = false;
  for (size_t i = 0; i < ops.size(); ++i) any |= staged(i);
  if (!any) return Status::Ok();
  gpu::CommStream* stream = context.p2p_stream;  // StageDeviceSends checked it
  gpu::Runtime& runtime = gpu::Runtime::Get();
  cuda::ScopedContext ctx(runtime.driver(), stream->context());
  if (!ctx.ok()) return SystemError("cannot make GPU %d's context current", stream->device());
  for (size_t i = 0; i < ops.size(); ++i) {
    if (!staged(i)) continue;
    const DeviceOpBuffers& b = (*context.device_ops)[i];
    const gpu::DeviceBuf from{reinterpret_cast<uint64_t>(p2p.host[i]), -1};
    CONDUIT_RETURN_IF_ERROR(stream->Copy(gpu::DeviceBuf{b.recv, b.recv_device}, from, OpPayloadBytes(ops[i])));
  }
  CONDUIT_RETURN_IF_ERROR(stream->Drain(OpDeadline(), [this] { return failure(); }));
  for (size_t i = 0; i < ops.size(); ++i) {
    if (staged(i)) stats_.AddDeviceP2p(false, OpPayloadBytes(ops[i]));
  }
  return Status::Ok();
}

}  // namespace conduit
