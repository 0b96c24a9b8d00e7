#include "issue.h"

#include <cstring>

namespace conduit::perf {
namespace {

// Buffers are host memory: there is no stream to order work on, so every call gets
// the null stream.
constexpr cudaStream_t kNoStream{};

ncclResult_t SendRecvRing(const IssueArgs& a) {
  ncclResult_t r = ncclGroupStart();
  if (r != ncclSuccess) return r;
  const size_t count = a.shape->count;
  r = ncclSend(a.send, count, a.type, (a.rank + 1) % a.nranks, a.comm, kNoStream);
  if (r == ncclSuccess) r = ncclRecv(a.recv, count, a.type, (a.rank - 1 + a.nranks) % a.nranks, a.comm, kNoStream);
  const ncclResult_t end = ncclGroupEnd();
  return r != ncclSuccess ? r : end;
}

// An all-gather by recursive doubling: in round k a rank swaps everything it has
// gathered so far with the peer across dimension k of the hypercube. Round 0 first
// puts the rank's own block in place (in place it is already there).
ncclResult_t HyperCubeRound(const IssueArgs& a, int round) {
  const size_t block = a.shape->count * a.type_size;
  char* out = static_cast<char*>(a.recv);
  if (round == 0) {
    const char* mine = static_cast<const char*>(a.send);
    char* my_slot = out + static_cast<size_t>(a.rank) * block;
    if (my_slot != mine) std::memcpy(my_slot, mine, block);
  }
  const int mask = 1 << round;
  if (mask >= a.nranks) return ncclSuccess;  // a single rank only copies its block
  const int peer = a.rank ^ mask;
  const size_t have = static_cast<size_t>(a.rank & ~(mask - 1));
  const size_t get = have ^ static_cast<size_t>(mask);
  const size_t elems = a.shape->count * static_cast<size_t>(mask);
  ncclResult_t r = ncclGroupStart();
  if (r != ncclSuccess) return r;
  r = ncclSend(out + have * block, elems, a.type, peer, a.comm, kNoStream);
  if (r == ncclSuccess) r = ncclRecv(out + get * block, elems, a.type, peer, a.comm, kNoStream);
  const ncclResult_t end = ncclGroupEnd();
  return r != ncclSuccess ? r : end;
}

}  // namespace

int IssueRounds(Coll coll, int nranks) {
  if (coll != Coll::kHyperCube) return 1;
  int rounds = 0;
  while ((1 << rounds) < nranks) ++rounds;
  return rounds > 0 ? rounds : 1;
}

ncclResult_t Issue(const IssueArgs& a, int round) {
  const size_t count = a.shape->count;
  switch (a.coll) {
    case Coll::kAllReduce: return ncclAllReduce(a.send, a.recv, count, a.type, a.op, a.comm, kNoStream);
    case Coll::kAllGather: return ncclAllGather(a.send, a.recv, count, a.type, a.comm, kNoStream);
    case Coll::kBroadcast: return ncclBroadcast(a.send, a.recv, count, a.type, a.root, a.comm, kNoStream);
    case Coll::kReduce: return ncclReduce(a.send, a.recv, count, a.type, a.op, a.root, a.comm, kNoStream);
    case Coll::kReduceScatter: return ncclReduceScatter(a.send, a.recv, count, a.type, a.op, a.comm, kNoStream);
    case Coll::kAllToAll: return ncclAlltoAll(a.send, a.recv, count, a.type, a.comm, kNoStream);
    case Coll::kSendRecv: return SendRecvRing(a);
    case Coll::kGather: return ncclGather(a.send, a.recv, count, a.type, a.root, a.comm, kNoStream);
    case Coll::kScatter: return ncclScatter(a.send, a.recv, count, a.type, a.root, a.comm, kNoStream);
    case Coll::kHyperCube: return HyperCubeRound(a, round);
  }
  return ncclInvalidArgument;
}

}  // namespace conduit::perf
