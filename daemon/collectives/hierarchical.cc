// Communicator::Execute: one collective over all ranks, hierarchically.
//
//  1. combine: this host's ranks' buffers are reduced (or gathered) into the lowest local
//     rank's segment, so only one copy per host crosses the network;
//  2. inter-host: the daemons run a ring, recursive-doubling or chain algorithm on it;
//  3. distribute: the result is copied into every other local rank's segment.
#include <cstring>
#include <string>

#include "collectives/algorithms.h"
#include "collectives/comm_stats.h"
#include "collectives/communicator.h"
#include "reduce/reduce.h"

namespace conduit {
namespace {

// The reduction used across buffers once PreMulSum scaling and Avg are taken apart.
ncclRedOp_t CombineOp(uint8_t redop) {
  if (redop == shimproto::kRedOpPreMulSum || redop == ncclAvg) return ncclSum;
  return static_cast<ncclRedOp_t>(redop);
}

}  // namespace

Status Communicator::Execute(const std::vector<CollRequest*>& batch, const char** algorithm) {
  const shimproto::OpDesc& op = batch[0]->op;
  for (const CollRequest* r : batch) {
    const auto& o = r->op;
    bool same = o.kind == op.kind && o.dtype == op.dtype && o.count == op.count && o.peer == op.peer &&
                (o.redop == op.redop || !(o.kind == shimproto::kAllReduce || o.kind == shimproto::kReduce ||
                                          o.kind == shimproto::kReduceScatter));
    if (!same) {
      return InvalidUsage("ranks %d and %d called different collectives: %s(count %llu, type %u, op %u, root %d) vs "
                          "%s(count %llu, type %u, op %u, root %d)",
                          batch[0]->rank, r->rank, OpKindName(op.kind), static_cast<unsigned long long>(op.count),
                          op.dtype, op.redop, op.peer, OpKindName(o.kind), static_cast<unsigned long long>(o.count),
                          o.dtype, o.redop, o.peer);
    }
  }
  const auto type = static_cast<ncclDataType_t>(op.dtype);
  const size_t elem = DataTypeSize(type);
  const ncclRedOp_t combine = CombineOp(op.redop);
  const int nhosts = static_cast<int>(membership_.host_addrs.size());
  const int me = membership_.my_host;
  auto data = [](const CollRequest* r) { return r->buffer.base + r->op.offset; };
  uint8_t* lead = data(batch[0]);

  HostGroup group;
  group.nhosts = nhosts;
  group.me = me;
  for (auto& link : coll_links_) group.links.push_back(link.get());
  group.chunk_bytes = options_.chunk_bytes;
  group.deadline = OpDeadline();

  // Step 1 for reductions: scale PreMulSum inputs, then fold every local buffer into lead.
  auto combine_local = [&](size_t count) {
    for (const CollRequest* r : batch) {
      if (r->op.redop == shimproto::kRedOpPreMulSum) ScaleInPlace(data(r), count, type, r->op.scalar);
    }
    for (size_t i = 1; i < batch.size(); ++i) ReduceInto(lead, data(batch[i]), count, type, combine);
  };
  auto copy_to_others = [&](size_t offset, size_t bytes) {
    for (size_t i = 1; i < batch.size(); ++i) memcpy(data(batch[i]) + offset, lead + offset, bytes);
  };

  // Reduce and Broadcast run pipelined chains; AllGather and ReduceScatter rings.
  *algorithm = nhosts == 1 ? "local" : (op.kind == shimproto::kReduce || op.kind == shimproto::kBroadcast) ? "chain" : "ring";
  switch (op.kind) {
    case shimproto::kAllReduce: {
      const size_t count = op.count;
      combine_local(count);
      bool use_rd = options_.allreduce_algo == "rd" ||
                    (options_.allreduce_algo == "auto" && count * elem <= options_.rd_max_bytes);
      if (nhosts == 1) {
        // Nothing crosses the network.
      } else if (use_rd) {
        *algorithm = "recursive-doubling";
        CONDUIT_RETURN_IF_ERROR(RecursiveDoublingAllReduce(group, lead, count, type, combine));
      } else {
        *algorithm = "ring";
        CONDUIT_RETURN_IF_ERROR(RingAllReduce(group, lead, count, type, combine));
      }
      if (op.redop == ncclAvg) DivideInPlace(lead, count, type, nranks_);
      copy_to_others(0, count * elem);
      return Status::Ok();
    }
    case shimproto::kReduce: {
      const size_t count = op.count;
      const int root_host = membership_.host_of_rank[op.peer];
      combine_local(count);
      CONDUIT_RETURN_IF_ERROR(ChainReduce(group, root_host, lead, count, type, combine));
      if (me == root_host) {
        if (op.redop == ncclAvg) DivideInPlace(lead, count, type, nranks_);
        for (const CollRequest* r : batch) {
          if (r->rank == op.peer && r != batch[0]) memcpy(data(r), lead, count * elem);
        }
      }
      return Status::Ok();
    }
    case shimproto::kBroadcast: {
      const size_t bytes = op.count * elem;
      const int root_host = membership_.host_of_rank[op.peer];
      uint8_t* src = lead;
      if (me == root_host) {
        for (const CollRequest* r : batch) {
          if (r->rank == op.peer) src = data(r);
        }
      }
      CONDUIT_RETURN_IF_ERROR(ChainBroadcast(group, root_host, src, bytes));
      for (const CollRequest* r : batch) {
        if (data(r) != src) memcpy(data(r), src, bytes);
      }
      return Status::Ok();
    }
    case shimproto::kAllGather:
    case shimproto::kReduceScatter: {
      const size_t block = op.count * elem;
      // Each host owns the blocks of its ranks, wherever they sit in rank order.
      HostSegments segments(nhosts);
      for (int r = 0; r < nranks_; ++r) {
        segments[membership_.host_of_rank[r]].push_back({static_cast<size_t>(r) * block, block});
      }
      if (op.kind == shimproto::kAllGather) {
        for (size_t i = 1; i < batch.size(); ++i) {
          size_t at = static_cast<size_t>(batch[i]->rank) * block;
          memcpy(lead + at, data(batch[i]) + at, block);
        }
        CONDUIT_RETURN_IF_ERROR(RingAllGather(group, lead, segments));
        copy_to_others(0, block * nranks_);
        return Status::Ok();
      }
      combine_local(op.count * nranks_);
      CONDUIT_RETURN_IF_ERROR(RingReduceScatter(group, lead, segments, type, combine));
      for (const CollRequest* r : batch) {
        size_t at = static_cast<size_t>(r->rank) * block;
        if (op.redop == ncclAvg) DivideInPlace(lead + at, op.count, type, nranks_);
        if (r != batch[0]) memcpy(data(r) + at, lead + at, block);
      }
      return Status::Ok();
    }
    default:
      return InternalError("op kind %u is not a collective", op.kind);
  }
}

}  // namespace conduit
