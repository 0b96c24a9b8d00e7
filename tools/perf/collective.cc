#include "collective.h"

namespace conduit::perf {
namespace {

constexpr CollInfo kColls[] = {
    {"allreduce", Coll::kAllReduce, true, false, true},
    {"allgather", Coll::kAllGather, false, false, true},
    {"broadcast", Coll::kBroadcast, false, true, true},
    {"reduce", Coll::kReduce, true, true, true},
    {"reducescatter", Coll::kReduceScatter, true, false, true},
    {"alltoall", Coll::kAllToAll, false, false, false},
    {"sendrecv", Coll::kSendRecv, false, false, false},
};

// alltoall is built from grouped send/recv rather than ncclAlltoAll: that API is
// recent (NCCL 2.28) and the Conduit shim protocol has no alltoall op, while
// send/recv groups work everywhere.
ncclResult_t AllToAll(const char* send, char* recv, size_t count, ncclDataType_t type, size_t type_size,
                      int nranks, ncclComm_t comm, cudaStream_t stream) {
  const size_t block = count * type_size;
  ncclResult_t r = ncclGroupStart();
  for (int peer = 0; peer < nranks && r == ncclSuccess; ++peer) {
    r = ncclSend(send + peer * block, count, type, peer, comm, stream);
    if (r == ncclSuccess) r = ncclRecv(recv + peer * block, count, type, peer, comm, stream);
  }
  const ncclResult_t end = ncclGroupEnd();
  return r != ncclSuccess ? r : end;
}

ncclResult_t SendRecvRing(const void* send, void* recv, size_t count, ncclDataType_t type, int rank, int nranks,
                          ncclComm_t comm, cudaStream_t stream) {
  ncclResult_t r = ncclGroupStart();
  if (r != ncclSuccess) return r;
  r = ncclSend(send, count, type, (rank + 1) % nranks, comm, stream);
  if (r == ncclSuccess) r = ncclRecv(recv, count, type, (rank - 1 + nranks) % nranks, comm, stream);
  const ncclResult_t end = ncclGroupEnd();
  return r != ncclSuccess ? r : end;
}

}  // namespace

const CollInfo* FindColl(std::string_view name) {
  for (const CollInfo& c : kColls) {
    if (name == c.name) return &c;
  }
  return nullptr;
}

const char* CollNames() { return "allreduce allgather broadcast reduce reducescatter alltoall sendrecv"; }

Shape ShapeFor(Coll coll, size_t bytes, size_t type_size, int nranks, int rank) {
  Shape s;
  const size_t n = static_cast<size_t>(nranks);
  switch (coll) {
    case Coll::kAllReduce:
    case Coll::kBroadcast:
    case Coll::kReduce:
    case Coll::kSendRecv:
      s.count = bytes / type_size;
      s.send_elems = s.recv_elems = s.count;
      s.bytes = s.count * type_size;
      break;
    case Coll::kAllGather:
      s.count = bytes / type_size / n;
      s.send_elems = s.count;
      s.recv_elems = s.count * n;
      s.in_offset = s.count * static_cast<size_t>(rank);  // NCCL's in-place convention
      s.bytes = s.recv_elems * type_size;
      break;
    case Coll::kReduceScatter:
      s.count = bytes / type_size / n;
      s.send_elems = s.count * n;
      s.recv_elems = s.count;
      s.out_offset = s.count * static_cast<size_t>(rank);
      s.bytes = s.send_elems * type_size;
      break;
    case Coll::kAllToAll:
      s.count = bytes / type_size / n;
      s.send_elems = s.recv_elems = s.count * n;
      s.bytes = s.send_elems * type_size;
      break;
  }
  return s;
}

double BusBwFactor(Coll coll, int nranks) {
  const double n = nranks;
  switch (coll) {
    case Coll::kAllReduce: return 2.0 * (n - 1) / n;
    case Coll::kAllGather:
    case Coll::kReduceScatter:
    case Coll::kAllToAll: return (n - 1) / n;
    case Coll::kBroadcast:
    case Coll::kReduce:
    case Coll::kSendRecv: return 1.0;
  }
  return 1.0;
}

ncclResult_t Issue(Coll coll, const void* send, void* recv, const Shape& s, ncclDataType_t type, size_t type_size,
                   ncclRedOp_t op, int root, int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
  switch (coll) {
    case Coll::kAllReduce: return ncclAllReduce(send, recv, s.count, type, op, comm, stream);
    case Coll::kAllGather: return ncclAllGather(send, recv, s.count, type, comm, stream);
    case Coll::kBroadcast: return ncclBroadcast(send, recv, s.count, type, root, comm, stream);
    case Coll::kReduce: return ncclReduce(send, recv, s.count, type, op, root, comm, stream);
    case Coll::kReduceScatter: return ncclReduceScatter(send, recv, s.count, type, op, comm, stream);
    case Coll::kAllToAll:
      return AllToAll(static_cast<const char*>(send), static_cast<char*>(recv), s.count, type, type_size, nranks,
                      comm, stream);
    case Coll::kSendRecv: return SendRecvRing(send, recv, s.count, type, rank, nranks, comm, stream);
  }
  return ncclInvalidArgument;
}

}  // namespace conduit::perf
