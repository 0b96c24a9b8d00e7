// Communicator::Execute: one collective over all ranks, hierarchically.
//
//  1. combine: this host's ranks' contributions are folded into one work buffer (the first
//     local rank's region), so only one copy per host crosses the network;
//  2. inter-host: the daemons run a ring, recursive-doubling or chain algorithm on it, with
//     hosts in the ring order of the communicator's current configuration, its links
//     paced by the tenant policy that covers it;
//  3. distribute: results are copied into every other local rank's region, or, where every
//     local rank attached the communicator's result area, left there for all to read.
// LocalStage does 1 and 3 a chunk at a time, driven by the algorithm's hooks, so local
// copies (and the programs' own copies in and out of shared memory) overlap the network.
#include <string>

#include "collectives/agreement.h"
#include "collectives/algorithms.h"
#include "collectives/comm_stats.h"
#include "collectives/communicator.h"
#include "collectives/local_stage.h"
#include "common/busy_poll.h"
#include "common/unique_id.h"
#include "policy/tenant_pacer.h"
#include "reduce/reduce.h"

namespace conduit {
namespace {

// The reduction used across buffers once PreMulSum scaling and Avg are taken apart.
ncclRedOp_t CombineOp(uint8_t redop) {
  if (redop == shimproto::kRedOpPreMulSum || redop == ncclAvg) return ncclSum;
  return static_cast<ncclRedOp_t>(redop);
}

}  // namespace

std::shared_ptr<TenantState> Communicator::CurrentTenant() {
  if (fabric_ == nullptr) return nullptr;
  const uint64_t generation = fabric_->tenants().generation();
  if (generation != tenant_generation_) {
    tenant_ = fabric_->tenants().Resolve(exe_, CommKeyText(key_));
    tenant_generation_ = generation;
  }
  return tenant_;
}

Status Communicator::Execute(const std::vector<CollRequest*>& batch, const CommConfig& config, const char** algorithm) {
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
    if ((r->device != nullptr) != (batch[0]->device != nullptr)) {
      return InvalidUsage("ranks %d and %d on one host passed %s and %s buffers to one collective; Conduit needs the "
                          "same kind on a host (device memory that cannot be shared is staged by the program)",
                          batch[0]->rank, r->rank, batch[0]->device ? "device" : "host", r->device ? "device" : "host");
    }
  }
  if (batch[0]->device != nullptr) return ExecuteOnDevice(batch, config, algorithm);

  std::vector<StageRank> ranks;
  for (const CollRequest* r : batch) {
    StageRank rank{r->rank, r->buffer.base, r->buffer.size, r->op, r->control, r->session_fd};
    if (r->host != nullptr) {
      rank.regions = true;
      rank.input = r->host->send;
      rank.output = r->host->recv;
    }
    ranks.push_back(rank);
  }
  // The result area, where every local rank attached the current one; held (mapped) until
  // the stage is done even if a rank asks for a larger one meanwhile.
  std::shared_ptr<ResultArea::Area> area = result_area_.Current();
  SharedOutput shared;
  if (area != nullptr) {
    bool attached = true;
    for (const CollRequest* r : batch) attached = attached && r->result_area == area->number;
    if (attached) shared = {area->segment.data(), area->segment.size(), area->number};
  }
  LocalStage stage(std::move(ranks), nranks_, OpDeadline(), [this] { return failure(); }, &traffic_, &work_pool_,
                   &shared);
  CONDUIT_RETURN_IF_ERROR(stage.ready());
  running_shared_ = stage.shares_output();
  // One rank's out-of-place reduction in its own buffers: the algorithms read its input
  // where it is (one copy per byte fewer). Alone on one host no algorithm runs, so the
  // stage's copy stays.
  const uint8_t* input = membership_.host_addrs.size() > 1 ? stage.TakeInputApart() : nullptr;
  // A lone rank's reduce-scatter so read also ends in its output without a copy.
  std::function<uint8_t*(size_t, size_t)> final_place;
  if (input != nullptr && op.kind == shimproto::kReduceScatter) {
    final_place = [&stage](size_t offset, size_t n) { return stage.FinalPlace(offset, n); };
  }
  CONDUIT_RETURN_IF_ERROR(CrossHosts(
      op, config, stage.work(),
      [&stage](const void* p, size_t n) { return stage.EnsureAt(static_cast<const uint8_t*>(p), n); },
      [&stage](const uint8_t* p, size_t n) { stage.FinalizeAt(p, n); }, algorithm, input, std::move(final_place)));
  return stage.Finish();
}

Status Communicator::CrossHosts(const shimproto::OpDesc& op, const CommConfig& config, uint8_t* work, SendGate ensure,
                                std::function<void(const uint8_t*, size_t)> finalize, const char** algorithm,
                                const uint8_t* input, std::function<uint8_t*(size_t, size_t)> final_place) {
  const int nhosts = static_cast<int>(membership_.host_addrs.size());
  const int me = membership_.my_host;
  // The algorithms see hosts in ring order: position p is host config.ring[p].
  std::vector<int> position(nhosts);
  for (int p = 0; p < nhosts; ++p) position[config.ring[p]] = p;
  HostGroup group;
  group.nhosts = nhosts;
  group.me = position[me];
  // Every transfer of this collective carries (and checks) what each host calls.
  peerproto::CollectiveHeader mine = DescribeCollective(op, running_seq_, config.epoch);
  const peerproto::CollectiveAlgorithm allreduce =
      op.kind == shimproto::kAllReduce && nhosts > 1
          ? ChooseAllReduce(OpPayloadBytes(op), nhosts, config.allreduce_algo)
          : peerproto::kAlgorithmNotSaid;
  mine.algorithm = allreduce;
  std::vector<std::unique_ptr<AgreementLink>> agreed(nhosts);
  for (int p = 0; p < nhosts; ++p) {
    Link* link = coll_links_[config.ring[p]].link.get();
    if (link != nullptr) agreed[p] = std::make_unique<AgreementLink>(link, &mine, my_addr_, &traffic_);
    group.links.push_back(agreed[p].get());
  }
  group.chunk_bytes = options_.chunk_bytes;
  group.deadline = OpDeadline();
  group.ensure = std::move(ensure);
  group.finalize = std::move(finalize);
  group.scratch = &scratch_;
  group.traffic = &traffic_;
  group.input = input;
  group.final_place = std::move(final_place);

  // Tenant policy: pace this host's sends (cap, yield) and tell lower priorities we are busy.
  std::shared_ptr<TenantState> tenant = nhosts > 1 ? CurrentTenant() : nullptr;
  std::unique_ptr<TenantPacer> pacer;
  if (tenant) {
    pacer = std::make_unique<TenantPacer>(tenant.get(), &fabric_->tenants().board());
    tenant->collectives.fetch_add(1, std::memory_order_relaxed);
  }
  const int priority = tenant ? tenant->policy().priority : 0;
  // On 4 hosts and more a step waits for the slowest of several daemons: a longer spin
  // catches its bytes without a wake-up (common/busy_poll.h, --peer-busy-poll-us). On 2
  // hosts the A/Bs could not tell the budgets apart, so they keep the programs' budget.
  const int spin_micros = nhosts >= kPeerBusyPollMinHosts ? PeerBusyPollMicros() : -1;
  for (Link* l : group.links) {
    if (l == nullptr) continue;
    l->SetPacer(pacer.get());
    l->SetSpinMicros(spin_micros);
  }
  if (priority > 0) fabric_->tenants().board().Enter(priority);
  Status st = RunInterHost(op, group, position, allreduce, work, algorithm);
  if (priority > 0) fabric_->tenants().board().Exit(priority);
  for (Link* l : group.links) {
    if (l == nullptr) continue;
    l->SetPacer(nullptr);
    l->SetSpinMicros(-1);
  }
  if (!st.ok() && op.kind == shimproto::kAllReduce && nhosts >= 3 && group.deadline.expired()) {
    // Daemons whose settings choose different all-reduce algorithms wait on different links
    // (the ring and halving-doubling on 4 hosts), so neither reads the other's header and
    // they time out: wherever the wait began, say what to check (the text travels to every
    // rank in 252 bytes, so briefly).
    st = Status(st.canonical(), st.message() + " (or the hosts' --allreduce-algo, --rd-max-bytes or --rh-max-bytes differ)");
  }
  return st;
}

peerproto::CollectiveAlgorithm Communicator::ChooseAllReduce(size_t bytes, int nhosts, const std::string& algo) const {
  if (algo == "rd" || (algo == "auto" &&
                       bytes <= RecursiveDoublingMaxBytes(options_.rd_max_bytes, nhosts, membership_.protocol_version) &&
                       RecursiveDoublingIsFaster(bytes, nhosts, options_.rd_latency_bytes))) {
    return peerproto::kAlgorithmRecursiveDoubling;
  }
  if (algo == "rh" || (algo == "auto" && nhosts >= 4 &&
                       bytes <= HalvingDoublingMaxBytes(options_.rh_max_bytes, membership_.protocol_version))) {
    return peerproto::kAlgorithmHalvingDoubling;
  }
  return peerproto::kAlgorithmRing;
}

Status Communicator::RunInterHost(const shimproto::OpDesc& op, const HostGroup& group, const std::vector<int>& position,
                                  peerproto::CollectiveAlgorithm allreduce, uint8_t* work, const char** algorithm) {
  const auto type = static_cast<ncclDataType_t>(op.dtype);
  const size_t elem = DataTypeSize(type);
  const ncclRedOp_t combine = CombineOp(op.redop);
  const int nhosts = group.nhosts;
  // Reduce and Broadcast run pipelined chains; AllGather and ReduceScatter rings.
  *algorithm = nhosts == 1 ? "local" : (op.kind == shimproto::kReduce || op.kind == shimproto::kBroadcast) ? "chain" : "ring";
  if (nhosts > 1) {
    switch (op.kind) {
      case shimproto::kAllReduce: {
        if (allreduce == peerproto::kAlgorithmRecursiveDoubling) {
          *algorithm = "recursive-doubling";
          CONDUIT_RETURN_IF_ERROR(RecursiveDoublingAllReduce(group, work, op.count, type, combine));
        } else if (allreduce == peerproto::kAlgorithmHalvingDoubling) {
          *algorithm = "halving-doubling";
          CONDUIT_RETURN_IF_ERROR(HalvingDoublingAllReduce(group, work, op.count, type, combine));
        } else {
          CONDUIT_RETURN_IF_ERROR(RingAllReduce(group, work, op.count, type, combine));
        }
        break;
      }
      case shimproto::kReduce:
        CONDUIT_RETURN_IF_ERROR(ChainReduce(group, position[membership_.host_of_rank[op.peer]], work, op.count, type, combine));
        break;
      case shimproto::kBroadcast:
        CONDUIT_RETURN_IF_ERROR(ChainBroadcast(group, position[membership_.host_of_rank[op.peer]], work, op.count * elem));
        break;
      case shimproto::kAllGather:
      case shimproto::kReduceScatter: {
        const size_t block = op.count * elem;
        // Each host owns the blocks of its ranks, wherever they sit in rank order; segments
        // are indexed by ring position.
        HostSegments segments(nhosts);
        for (int r = 0; r < nranks_; ++r) {
          segments[position[membership_.host_of_rank[r]]].push_back({static_cast<size_t>(r) * block, block});
        }
        if (op.kind == shimproto::kAllGather) {
          CONDUIT_RETURN_IF_ERROR(RingAllGather(group, work, segments));
        } else {
          CONDUIT_RETURN_IF_ERROR(RingReduceScatter(group, work, segments, type, combine));
        }
        break;
      }
      default:
        return InternalError("op kind %u is not a collective", op.kind);
    }
  }
  return Status::Ok();
}

}  // namespace conduit
