// Collective and point-to-point calls on the managed path. Gather, Scatter and AlltoAll
// are grouped sends and receives, as NCCL defines them.
#include "device_path.h"
#include "managed.h"
#include "nccl_debug.h"
#include "ops.h"
#include "reduce/reduce.h"
#include "shim_log.h"

namespace conduit::managed {
namespace {

// Host and staged buffers: the call completes before returning. Device buffers: the
// work is ordered on `stream` (device_path.h).
ncclResult_t Submit(const char* call, ncclResult_t built, PendingOp& op, cudaStream_t stream) {
  if (built != ncclSuccess) return built;
  const bool p2p = op.desc.kind == shimproto::kSend || op.desc.kind == shimproto::kRecv;
  const uint32_t subsys = p2p ? kSubsysP2p : kSubsysColl;
  const uint64_t op_count = op.comm->op_count.fetch_add(1, std::memory_order_relaxed);
  if (NcclInfoEnabled(subsys)) {
    // NCCL's line for each call, so that a hang can be read off the last lines per rank.
    SetNcclLogDevice(op.comm->device);
    const bool rooted = op.desc.kind == shimproto::kBroadcast || op.desc.kind == shimproto::kReduce || p2p;
    CLOG_INFO("%s: opCount %llx sendbuff %p recvbuff %p count %llu datatype %d op %d root %d comm %p [nranks=%d] "
              "stream %p", call + 4 /* past "nccl" */,
              static_cast<unsigned long long>(op_count), op.in,
              op.out, static_cast<unsigned long long>(op.desc.count), op.desc.dtype, op.desc.redop,
              rooted ? op.desc.peer : 0, static_cast<void*>(op.comm), op.comm->nranks, static_cast<void*>(stream));
  }
  ncclResult_t r = PlaceOp(call, &op, stream);
  return r != ncclSuccess ? r : SubmitOp(call, op);
}

// Runs `body` as one group (joining the caller's group if one is open).
template <typename Body>
ncclResult_t AsGroup(Body body) {
  GroupStart();
  ncclResult_t r = body();
  ncclResult_t end = GroupEnd();
  return r != ncclSuccess ? r : end;
}

}  // namespace

ncclResult_t AllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                       ncclComm_t comm, cudaStream_t stream) {
  PendingOp p;
  ncclResult_t r = BuildReduceLike("ncclAllReduce", shimproto::kAllReduce, sendbuff, recvbuff, count, datatype, op, 0, comm, &p);
  return Submit("ncclAllReduce", r, p, stream);
}

ncclResult_t Reduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op, int root,
                    ncclComm_t comm, cudaStream_t stream) {
  PendingOp p;
  ncclResult_t r = BuildReduceLike("ncclReduce", shimproto::kReduce, sendbuff, recvbuff, count, datatype, op, root, comm, &p);
  return Submit("ncclReduce", r, p, stream);
}

ncclResult_t ReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  PendingOp p;
  ncclResult_t r = BuildReduceLike("ncclReduceScatter", shimproto::kReduceScatter, sendbuff, recvbuff, recvcount,
                                   datatype, op, 0, comm, &p);
  return Submit("ncclReduceScatter", r, p, stream);
}

ncclResult_t Broadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                       ncclComm_t comm, cudaStream_t stream) {
  PendingOp p;
  ncclResult_t r = BuildBroadcast("ncclBroadcast", sendbuff, recvbuff, count, datatype, root, comm, &p);
  return Submit("ncclBroadcast", r, p, stream);
}

ncclResult_t Bcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  return Broadcast(buff, buff, count, datatype, root, comm, stream);
}

ncclResult_t AllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype, ncclComm_t comm,
                       cudaStream_t stream) {
  PendingOp p;
  ncclResult_t r = BuildAllGather("ncclAllGather", sendbuff, recvbuff, sendcount, datatype, comm, &p);
  return Submit("ncclAllGather", r, p, stream);
}

ncclResult_t Send(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm, cudaStream_t stream) {
  PendingOp p;
  ncclResult_t r = BuildP2p("ncclSend", shimproto::kSend, sendbuff, nullptr, count, datatype, peer, comm, &p);
  return Submit("ncclSend", r, p, stream);
}

ncclResult_t Recv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm, cudaStream_t stream) {
  PendingOp p;
  ncclResult_t r = BuildP2p("ncclRecv", shimproto::kRecv, nullptr, recvbuff, count, datatype, peer, comm, &p);
  return Submit("ncclRecv", r, p, stream);
}

ncclResult_t AlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,
                      cudaStream_t stream) {
  if (!ValidComm(comm)) return Fail("ncclAlltoAll", ncclInvalidArgument, "invalid communicator");
  const size_t block = count * DataTypeSize(datatype);
  return AsGroup([&] {
    for (int p = 0; p < comm->nranks; ++p) {
      ncclResult_t r = Send(static_cast<const char*>(sendbuff) + p * block, count, datatype, p, comm, stream);
      if (r == ncclSuccess) r = Recv(static_cast<char*>(recvbuff) + p * block, count, datatype, p, comm, stream);
      if (r != ncclSuccess) return r;
    }
    return ncclSuccess;
  });
}

ncclResult_t Gather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                    ncclComm_t comm, cudaStream_t stream) {
  if (!ValidComm(comm)) return Fail("ncclGather", ncclInvalidArgument, "invalid communicator");
  const size_t block = count * DataTypeSize(datatype);
  return AsGroup([&] {
    ncclResult_t r = Send(sendbuff, count, datatype, root, comm, stream);
    for (int p = 0; r == ncclSuccess && comm->rank == root && p < comm->nranks; ++p) {
      r = Recv(static_cast<char*>(recvbuff) + p * block, count, datatype, p, comm, stream);
    }
    return r;
  });
}

ncclResult_t Scatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                     ncclComm_t comm, cudaStream_t stream) {
  if (!ValidComm(comm)) return Fail("ncclScatter", ncclInvalidArgument, "invalid communicator");
  const size_t block = count * DataTypeSize(datatype);
  return AsGroup([&] {
    ncclResult_t r = ncclSuccess;
    for (int p = 0; r == ncclSuccess && comm->rank == root && p < comm->nranks; ++p) {
      r = Send(static_cast<const char*>(sendbuff) + p * block, count, datatype, p, comm, stream);
    }
    if (r == ncclSuccess) r = Recv(recvbuff, count, datatype, root, comm, stream);
    return r;
  });
}

ncclResult_t GroupStart() {
  conduit::GroupStart();
  return ncclSuccess;
}

ncclResult_t GroupEnd() { return conduit::GroupEnd(); }

ncclResult_t GroupSimulateEnd(ncclSimInfo_t* simInfo) {
  // Nothing runs; the estimate is a plain model of this path: ~60 us per op plus the bytes
  // at 1 GB/s (documented as approximate in docs/shim-protocol.md).
  std::vector<PendingOp> ops = GroupDiscard();
  if (simInfo != nullptr) {
    double us = 0;
    for (const auto& op : ops) us += 60.0 + static_cast<double>(op.region_bytes) / 1e3;
    simInfo->estimatedTime = static_cast<float>(us);
  }
  return ncclSuccess;
}

}  // namespace conduit::managed
