#include "collectives/algorithms.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "reduce/reduce.h"

namespace conduit {
namespace {

int Mod(int a, int n) { return ((a % n) + n) % n; }

size_t RangesBytes(const std::vector<ByteRange>& ranges) {
  size_t n = 0;
  for (const auto& r : ranges) n += r.len;
  return n;
}

std::vector<ConstSpan> AsConst(uint8_t* buf, const std::vector<ByteRange>& ranges) {
  std::vector<ConstSpan> spans;
  for (const auto& r : ranges) spans.push_back({buf + r.offset, r.len});
  return spans;
}

std::vector<MutSpan> AsMut(uint8_t* buf, const std::vector<ByteRange>& ranges) {
  std::vector<MutSpan> spans;
  for (const auto& r : ranges) spans.push_back({buf + r.offset, r.len});
  return spans;
}

// Calls fn(linear, offset, len) for the pieces of `ranges` at linear positions
// [pos, pos + len), in order (the ranges laid end to end; `offset` is in the buffer).
template <typename Fn>
void VisitLinear(const std::vector<ByteRange>& ranges, size_t pos, size_t len, Fn fn) {
  size_t start = 0;
  for (const auto& r : ranges) {
    if (len == 0) return;
    if (pos < start + r.len) {
      size_t in_range = pos - start;
      size_t take = std::min(len, r.len - in_range);
      fn(pos, r.offset + in_range, take);
      pos += take;
      len -= take;
    }
    start += r.len;
  }
}

// Reduces a linear staging buffer into scattered destination ranges, a chunk at a time
// as the bytes arrive, so reduction overlaps with the rest of the transfer. With `last`,
// the reduced bytes are complete and are finalized as they are produced.
class ScatteredReducer {
 public:
  ScatteredReducer(const HostGroup& g, uint8_t* dst_base, const std::vector<ByteRange>& ranges,
                   const uint8_t* staging, ncclDataType_t type, ncclRedOp_t op, bool last)
      : g_(g), dst_base_(dst_base), ranges_(ranges), staging_(staging), type_(type), op_(op),
        elem_(DataTypeSize(type)), chunk_(std::max(g.chunk_bytes - g.chunk_bytes % elem_, elem_)), last_(last) {}

  // Reduces every whole element received so far, in chunk-sized steps (or all at the end).
  Status Advance(size_t received, bool final_call) {
    size_t ready = received - received % elem_;
    while (done_ < ready && (final_call || ready - done_ >= chunk_ || ready == RangesBytes(ranges_))) {
      size_t step = std::min(ready - done_, chunk_);
      Status st;
      VisitLinear(ranges_, done_, step, [&](size_t linear, size_t offset, size_t len) {
        if (!st.ok()) return;
        uint8_t* dst = dst_base_ + offset;
        if (g_.ensure) st = g_.ensure(dst, len);
        if (!st.ok()) return;
        ReduceInto(dst, staging_ + linear, len / elem_, type_, op_);
        if (last_ && g_.finalize) g_.finalize(dst, len);
      });
      CONDUIT_RETURN_IF_ERROR(st);
      done_ += step;
    }
    return Status::Ok();
  }

 private:
  const HostGroup& g_;
  uint8_t* dst_base_;
  const std::vector<ByteRange>& ranges_;
  const uint8_t* staging_;
  ncclDataType_t type_;
  ncclRedOp_t op_;
  size_t elem_;
  size_t chunk_;
  bool last_;
  size_t done_ = 0;
};

// `bytes` of staging for one call: the group's scratch, or a buffer owned by `own`.
uint8_t* Staging(const HostGroup& g, size_t bytes, std::unique_ptr<uint8_t[]>* own) {
  if (g.scratch != nullptr) return g.scratch->Get(bytes, own);
  own->reset(new uint8_t[std::max<size_t>(bytes, 1)]);
  return own->get();
}

// Finalizes what has arrived of a receive into `ranges` (cumulative: finalize is idempotent).
RecvProgress FinalizeArrivals(const HostGroup& g, uint8_t* buf, const std::vector<ByteRange>& ranges) {
  if (!g.finalize) return nullptr;
  return [&g, buf, &ranges](size_t received) {
    VisitLinear(ranges, 0, received, [&](size_t, size_t offset, size_t len) { g.finalize(buf + offset, len); });
    return Status::Ok();
  };
}

}  // namespace

uint8_t* Scratch::Get(size_t bytes, std::unique_ptr<uint8_t[]>* transient) {
  bytes = std::max<size_t>(bytes, 1);
  if (bytes > kKeepBytes) {
    transient->reset(new uint8_t[bytes]);
    return transient->get();
  }
  if (bytes > kept_bytes_) {
    kept_.reset();  // before allocating: never hold both
    kept_.reset(new uint8_t[bytes]);
    kept_bytes_ = bytes;
  }
  return kept_.get();
}

HostSegments EvenSegments(size_t count, size_t elem, int parts) {
  HostSegments segments(parts);
  size_t base = count / parts, extra = count % parts, offset = 0;
  for (int p = 0; p < parts; ++p) {
    size_t n = base + (static_cast<size_t>(p) < extra ? 1 : 0);
    segments[p].push_back({offset * elem, n * elem});
    offset += n;
  }
  return segments;
}

Status RingReduceScatter(const HostGroup& g, uint8_t* buf, const HostSegments& segments, ncclDataType_t type,
                         ncclRedOp_t op) {
  const int n = g.nhosts;
  if (n == 1) return Status::Ok();
  Link& next = *g.links[Mod(g.me + 1, n)];
  Link& prev = *g.links[Mod(g.me - 1, n)];
  size_t max_seg = 0;
  for (const auto& s : segments) max_seg = std::max(max_seg, RangesBytes(s));
  std::unique_ptr<uint8_t[]> own;
  uint8_t* staging = Staging(g, max_seg, &own);
  // Step s sends segment me-s-1 (reduced over s+1 hosts) and folds the incoming copy of
  // segment me-s-2 into ours; after n-1 steps segment `me` is complete here.
  for (int s = 0; s < n - 1; ++s) {
    const auto& send_seg = segments[Mod(g.me - s - 1, n)];
    const auto& recv_seg = segments[Mod(g.me - s - 2, n)];
    size_t recv_bytes = RangesBytes(recv_seg);
    ScatteredReducer reducer(g, buf, recv_seg, staging, type, op, /*last=*/s == n - 2);
    std::vector<MutSpan> in{{staging, recv_bytes}};
    CONDUIT_RETURN_IF_ERROR(next.SendRecv(
        AsConst(buf, send_seg), prev, in, g.deadline,
        [&](size_t received) { return reducer.Advance(received, false); }, g.ensure));
    CONDUIT_RETURN_IF_ERROR(reducer.Advance(recv_bytes, true));
  }
  return Status::Ok();
}

Status RingAllGather(const HostGroup& g, uint8_t* buf, const HostSegments& segments) {
  const int n = g.nhosts;
  if (n == 1) return Status::Ok();
  Link& next = *g.links[Mod(g.me + 1, n)];
  Link& prev = *g.links[Mod(g.me - 1, n)];
  // Step s forwards segment me-s (ours at s = 0) and receives segment me-s-1 in place,
  // final as it lands.
  for (int s = 0; s < n - 1; ++s) {
    const auto& recv_seg = segments[Mod(g.me - s - 1, n)];
    CONDUIT_RETURN_IF_ERROR(next.SendRecv(AsConst(buf, segments[Mod(g.me - s, n)]), prev, AsMut(buf, recv_seg),
                                          g.deadline, FinalizeArrivals(g, buf, recv_seg), g.ensure));
  }
  return Status::Ok();
}

Status RingAllReduce(const HostGroup& g, uint8_t* buf, size_t count, ncclDataType_t type, ncclRedOp_t op) {
  HostSegments segments = EvenSegments(count, DataTypeSize(type), g.nhosts);
  CONDUIT_RETURN_IF_ERROR(RingReduceScatter(g, buf, segments, type, op));
  return RingAllGather(g, buf, segments);
}

Status RecursiveDoublingAllReduce(const HostGroup& g, uint8_t* buf, size_t count, ncclDataType_t type,
                                  ncclRedOp_t op) {
  const int n = g.nhosts;
  if (n == 1) return Status::Ok();
  const size_t bytes = count * DataTypeSize(type);
  if (g.ensure) CONDUIT_RETURN_IF_ERROR(g.ensure(buf, bytes));
  std::unique_ptr<uint8_t[]> own;
  uint8_t* staging = Staging(g, bytes, &own);
  std::vector<ConstSpan> out{{buf, bytes}};
  std::vector<MutSpan> in{{staging, bytes}};
  int pow2 = 1;
  while (pow2 * 2 <= n) pow2 *= 2;
  const int extra = n - pow2;
  // Hosts 0..2*extra-1 pair up: the even one hands its data to the odd one and sits out.
  int vrank;
  if (g.me < 2 * extra) {
    if (g.me % 2 == 0) {
      Link& partner = *g.links[g.me + 1];
      CONDUIT_RETURN_IF_ERROR(partner.Send(out, g.deadline));
      return partner.Recv({{buf, bytes}}, g.deadline);
    }
    CONDUIT_RETURN_IF_ERROR(g.links[g.me - 1]->Recv(in, g.deadline));
    ReduceInto(buf, staging, count, type, op);
    vrank = g.me / 2;
  } else {
    vrank = g.me - extra;
  }
  auto real_host = [extra](int v) { return v < extra ? 2 * v + 1 : v + extra; };
  for (int mask = 1; mask < pow2; mask <<= 1) {
    Link& partner = *g.links[real_host(vrank ^ mask)];
    CONDUIT_RETURN_IF_ERROR(partner.SendRecv(out, partner, in, g.deadline));
    ReduceInto(buf, staging, count, type, op);  // commutative ops: same bits on both sides
  }
  if (g.me < 2 * extra) return g.links[g.me - 1]->Send(out, g.deadline);
  return Status::Ok();
}

bool RecursiveDoublingIsFaster(size_t bytes, int nhosts, size_t latency_bytes) {
  if (nhosts <= 2) return true;  // one exchange of the whole buffer: the ring's bytes in fewer steps
  int pow2 = 1, log2 = 0;
  while (pow2 * 2 <= nhosts) {
    pow2 *= 2;
    ++log2;
  }
  const double rd_steps = log2 + (nhosts > pow2 ? 2 : 0);
  const double ring_steps = 2.0 * (nhosts - 1);
  const double extra_bytes = static_cast<double>(bytes) * (rd_steps - ring_steps / nhosts);
  return extra_bytes <= (ring_steps - rd_steps) * static_cast<double>(latency_bytes);
}

Status ChainBroadcast(const HostGroup& g, int root, uint8_t* buf, size_t bytes) {
  const int n = g.nhosts;
  if (n == 1 || bytes == 0) return Status::Ok();
  const int pos = Mod(g.me - root, n);  // position along the chain, root = 0
  Link* to = pos == n - 1 ? nullptr : g.links[Mod(g.me + 1, n)];
  Link* from = pos == 0 ? nullptr : g.links[Mod(g.me - 1, n)];
  if (from == nullptr) return to->Send({{buf, bytes}}, g.deadline, g.ensure);
  const std::vector<ByteRange> whole{{0, bytes}};
  if (to == nullptr) return from->Recv({{buf, bytes}}, g.deadline, FinalizeArrivals(g, buf, whole));
  // Middle of the chain: forward chunk k while chunk k+1 arrives.
  const size_t chunk = std::max<size_t>(g.chunk_bytes, 1);
  size_t recv_end = std::min(chunk, bytes);
  CONDUIT_RETURN_IF_ERROR(from->Recv({{buf, recv_end}}, g.deadline));
  if (g.finalize) g.finalize(buf, recv_end);
  size_t send_begin = 0;
  while (recv_end < bytes) {
    size_t next_end = std::min(recv_end + chunk, bytes);
    CONDUIT_RETURN_IF_ERROR(to->SendRecv({{buf + send_begin, recv_end - send_begin}}, *from,
                                         {{buf + recv_end, next_end - recv_end}}, g.deadline));
    if (g.finalize) g.finalize(buf + recv_end, next_end - recv_end);
    send_begin = recv_end;
    recv_end = next_end;
  }
  return to->Send({{buf + send_begin, bytes - send_begin}}, g.deadline);
}

Status ChainReduce(const HostGroup& g, int root, uint8_t* buf, size_t count, ncclDataType_t type, ncclRedOp_t op) {
  const int n = g.nhosts;
  const size_t elem = DataTypeSize(type);
  const size_t bytes = count * elem;
  if (n == 1 || bytes == 0) return Status::Ok();
  // Data flows from the far end of the chain (position n-1) toward the root (position 0).
  const int pos = Mod(g.me - root, n);
  Link* to = pos == 0 ? nullptr : g.links[Mod(g.me - 1, n)];
  Link* from = pos == n - 1 ? nullptr : g.links[Mod(g.me + 1, n)];
  if (from == nullptr) return to->Send({{buf, bytes}}, g.deadline, g.ensure);
  const size_t chunk = std::max<size_t>(g.chunk_bytes - g.chunk_bytes % elem, elem);
  std::unique_ptr<uint8_t[]> own;
  uint8_t* staging = Staging(g, std::min(chunk, bytes) * 2, &own);
  uint8_t* slots[2] = {staging, staging + std::min(chunk, bytes)};
  // Receive chunk k into a staging slot, fold it into buf, then send the folded chunk on
  // while chunk k+1 arrives.
  size_t k_begin = 0, k_end = std::min(chunk, bytes);
  CONDUIT_RETURN_IF_ERROR(from->Recv({{slots[0], k_end}}, g.deadline));
  int slot = 0;
  for (;;) {
    if (g.ensure) CONDUIT_RETURN_IF_ERROR(g.ensure(buf + k_begin, k_end - k_begin));
    ReduceInto(buf + k_begin, slots[slot], (k_end - k_begin) / elem, type, op);
    if (to == nullptr && g.finalize) g.finalize(buf + k_begin, k_end - k_begin);  // the root's result
    if (k_end == bytes) break;
    size_t next_end = std::min(k_end + chunk, bytes);
    slot ^= 1;
    std::vector<MutSpan> in{{slots[slot], next_end - k_end}};
    if (to != nullptr) {
      CONDUIT_RETURN_IF_ERROR(to->SendRecv({{buf + k_begin, k_end - k_begin}}, *from, in, g.deadline));
    } else {
      CONDUIT_RETURN_IF_ERROR(from->Recv(in, g.deadline));
    }
    k_begin = k_end;
    k_end = next_end;
  }
  if (to != nullptr) return to->Send({{buf + k_begin, k_end - k_begin}}, g.deadline);
  return Status::Ok();
}

}  // namespace conduit
