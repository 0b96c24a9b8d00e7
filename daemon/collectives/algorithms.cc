#include "collectives/algorithms.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "protocol/peer_protocol.h"
#include "reduce/reduce.h"

namespace conduit {
namespace {

int Mod(int a, int n) { return ((a % n) + n) % n; }

size_t RangesBytes(const std::vector<ByteRange>& ranges) {
  size_t n = 0;
  for (const auto& r : ranges) n += r.len;
  return n;
}

std::vector<ConstSpan> AsConst(const uint8_t* buf, const std::vector<ByteRange>& ranges) {
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

// `bytes` of staging for one call: the group's scratch, or a buffer owned by `own`.
uint8_t* Staging(const HostGroup& g, size_t bytes, std::unique_ptr<uint8_t[]>* own) {
  if (g.scratch != nullptr) return g.scratch->Get(bytes, own);
  own->reset(new uint8_t[std::max<size_t>(bytes, 1)]);
  return own->get();
}

// Finalizes the bytes at linear positions [from, to) of `ranges`.
void FinalizeLinear(const HostGroup& g, uint8_t* buf, const std::vector<ByteRange>& ranges, size_t from, size_t to) {
  if (!g.finalize || to <= from) return;
  VisitLinear(ranges, from, to - from, [&](size_t, size_t offset, size_t len) { g.finalize(buf + offset, len); });
}

// Finalizes what has arrived of a receive into `ranges` (cumulative: finalize is idempotent).
RecvProgress FinalizeArrivals(const HostGroup& g, uint8_t* buf, const std::vector<ByteRange>& ranges) {
  if (!g.finalize) return nullptr;
  return [&g, buf, &ranges](size_t received) {
    FinalizeLinear(g, buf, ranges, 0, received);
    return Status::Ok();
  };
}

// The ring's pipelining grain. On 3 hosts and more: the configured chunk, but at most half
// a step, so a mid-size buffer's step is forwarded in two pieces or more (the next host
// reduces and passes on the first while the second arrives), and never under 32 KiB, where
// each piece's wake-ups cost more than the overlap gains. On 2 hosts the two sides' steps
// mirror each other and there is nothing to overlap: the configured chunk. A/B in one run
// each (docs/benchmarks.md): 4 hosts, 256 KiB allreduce 1.08-1.31x faster, other sizes
// unchanged; 2 hosts with half-step chunks were slower at 128-256 KiB (0.64-0.90x).
constexpr size_t kMinRingChunk = 32 * 1024;

size_t RingChunk(const HostGroup& g, const HostSegments& segments, size_t elem) {
  size_t chunk = g.chunk_bytes;
  if (g.nhosts > 2) {
    size_t step = 0;
    for (const auto& segment : segments) step = std::max(step, RangesBytes(segment));
    chunk = std::min(chunk, std::max(step / 2, kMinRingChunk));
  }
  return std::max(chunk - chunk % elem, elem);
}

// One pass around the ring, as a single pipelined transfer: `rs_steps` reduce-scatter steps
// then `ag_steps` all-gather steps. Step k sends what step k-1 received (reduced, for the
// reduce-scatter), so after the first segment the send stream is the receive stream
// itself, shifted: each chunk goes on to the next host as soon as it has arrived and been
// reduced, instead of each step waiting for the whole previous one (a barrier per step
// idled the links a few milliseconds at every step boundary: 16-64 MiB allreduces on 4
// hosts ran at 0.91-0.95x of the link, against 0.99x at 4-8 MiB where socket buffers hid
// the barrier). Reduce-scatter input lands in a small ring of staging slots, reduced into
// buf a chunk at a time; all-gather input lands in buf directly.
class RingPass {
 public:
  RingPass(const HostGroup& g, uint8_t* buf, const HostSegments& segments, int rs_steps, int ag_steps,
           ncclDataType_t type, ncclRedOp_t op)
      : g_(g), buf_(buf), type_(type), op_(op), elem_(rs_steps > 0 ? DataTypeSize(type) : 1),
        chunk_(RingChunk(g, segments, elem_)) {
    const int n = g.nhosts;
    // Reduce-scatter step s receives segment me-s-2; all-gather step t receives me-t-1.
    size_t at = 0;
    for (int s = 0; s < rs_steps; ++s) AddStep(segments[Mod(g.me - s - 2, n)], true, s == n - 2, &at);
    for (int t = 0; t < ag_steps; ++t) AddStep(segments[Mod(g.me - t - 1, n)], false, false, &at);
    recv_total_ = at;
    // The first segment sent is this host's own (me-1 for a reduce-scatter, me for an
    // all-gather); every later one is a received one, forwarded.
    const auto& first = segments[Mod(g.me - (rs_steps > 0 ? 1 : 0), n)];
    // A reduce-scatter's first segment is this host's contribution alone: sent from where
    // it lives. (Its place in buf is written by the all-gather.)
    out_ = AsConst(rs_steps > 0 && g.input != nullptr ? g.input : buf, first);
    first_bytes_ = RangesBytes(first);
    for (size_t i = 0; i + 1 < steps_.size(); ++i) {
      for (const ConstSpan& span : AsConst(buf, *steps_[i].ranges)) out_.push_back(span);
    }
    send_total_ = TotalBytes(out_);
    staging_ = Staging(g, kSlots * chunk_, &own_staging_);
    for (const Step& step : steps_) {
      if (!step.reduce) {
        for (const MutSpan& span : AsMut(buf, *step.ranges)) in_.push_back(span);
        continue;
      }
      for (size_t off = 0; off < step.len; off += chunk_) {
        in_.push_back({staging_ + (chunk_begin_.size() % kSlots) * chunk_, std::min(chunk_, step.len - off)});
        chunk_begin_.push_back(step.begin + off);
      }
    }
  }

  // Sends to the next host of the ring and receives from the previous one.
  Status Run() {
    if (send_total_ == 0 && recv_total_ == 0) return Status::Ok();
    Link& next = *g_.links[Mod(g_.me + 1, g_.nhosts)];
    Link& prev = *g_.links[Mod(g_.me - 1, g_.nhosts)];
    FlowLimits limits;
    limits.send_limit = [this] { return std::min(send_total_, first_bytes_ + processed_); };
    limits.recv_limit = [this] {
      // A staging slot is reused once the chunk in it has been reduced.
      const size_t allowed = reduced_chunks_ + kSlots;
      return allowed < chunk_begin_.size() ? chunk_begin_[allowed] : recv_total_;
    };
    CONDUIT_RETURN_IF_ERROR(next.SendRecv(
        out_, prev, in_, g_.deadline, [this](size_t received) { return Advance(received); }, g_.ensure, limits));
    return Advance(recv_total_);
  }

 private:
  static constexpr size_t kSlots = 8;

  struct Step {
    const std::vector<ByteRange>* ranges;
    size_t len;
    size_t begin;  // offset in the receive stream
    bool reduce;
    bool final;    // its reduced bytes are final results (the last reduce-scatter step)
    size_t done = 0;
  };

  void AddStep(const std::vector<ByteRange>& ranges, bool reduce, bool final, size_t* at) {
    steps_.push_back({&ranges, RangesBytes(ranges), *at, reduce, final});
    *at += steps_.back().len;
  }

  // Reduces (or, for all-gather steps, finalizes) what has arrived, in stream order.
  Status Advance(size_t received) {
    for (; current_ < steps_.size(); ++current_) {
      Step& step = steps_[current_];
      const size_t arrived = std::min(received, step.begin + step.len) - std::min(received, step.begin);
      if (step.reduce) {
        while (step.done < step.len) {
          const size_t take = std::min(chunk_, step.len - step.done);
          if (arrived - step.done < take) break;
          CONDUIT_RETURN_IF_ERROR(ReduceChunk(step, take));
          step.done += take;
          ++reduced_chunks_;
        }
      } else if (arrived > step.done) {
        FinalizeLinear(g_, buf_, *step.ranges, step.done, arrived);
        step.done = arrived;
      }
      processed_ = step.begin + step.done;
      if (step.done < step.len) break;
    }
    return Status::Ok();
  }

  Status ReduceChunk(const Step& step, size_t take) {
    const uint8_t* src = staging_ + (reduced_chunks_ % kSlots) * chunk_;
    Status st;
    VisitLinear(*step.ranges, step.done, take, [&](size_t linear, size_t offset, size_t len) {
      if (!st.ok()) return;
      uint8_t* const at = buf_ + offset;
      if (g_.ensure) st = g_.ensure(at, len);
      if (!st.ok()) return;
      // Each segment is reduced here once: this host's contribution folds in now (Reduce2
      // works in place when it is already in buf). A final result may go straight to its
      // owner's output instead of through buf.
      const uint8_t* mine = g_.input != nullptr ? g_.input + offset : at;
      uint8_t* dst = step.final && g_.final_place ? g_.final_place(offset, len) : nullptr;
      if (dst == nullptr) dst = at;
      Reduce2(dst, mine, src + (linear - step.done), len / elem_, type_, op_);
      CountReduce(g_.traffic, len);
      if (step.final && g_.finalize) g_.finalize(at, len);
    });
    return st;
  }

  const HostGroup& g_;
  uint8_t* buf_;
  ncclDataType_t type_;
  ncclRedOp_t op_;
  size_t elem_;
  size_t chunk_;
  std::vector<Step> steps_;
  std::vector<ConstSpan> out_;
  std::vector<MutSpan> in_;
  std::vector<size_t> chunk_begin_;  // receive-stream offset of each staged chunk
  size_t first_bytes_ = 0, send_total_ = 0, recv_total_ = 0;
  std::unique_ptr<uint8_t[]> own_staging_;
  uint8_t* staging_ = nullptr;
  size_t current_ = 0;         // first step not fully processed
  size_t processed_ = 0;       // receive-stream bytes reduced or placed, in order
  size_t reduced_chunks_ = 0;  // staged chunks reduced so far
};

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
  return RingPass(g, buf, segments, n - 1, 0, type, op).Run();
}

Status RingAllGather(const HostGroup& g, uint8_t* buf, const HostSegments& segments) {
  const int n = g.nhosts;
  if (n == 1) return Status::Ok();
  return RingPass(g, buf, segments, 0, n - 1, ncclInt8, ncclSum).Run();
}

Status RingAllReduce(const HostGroup& g, uint8_t* buf, size_t count, ncclDataType_t type, ncclRedOp_t op) {
  const int n = g.nhosts;
  if (n == 1) return Status::Ok();
  HostSegments segments = EvenSegments(count, DataTypeSize(type), n);
  return RingPass(g, buf, segments, n - 1, n - 1, type, op).Run();
}

namespace {

// Hosts beyond the largest power of two fold in (recursive doubling, halving-doubling):
// hosts 0..2*extra-1 pair up, the even one hands its data to the odd one, which reduces it
// in, and waits for the result, which the odd one sends back at the end (FoldOut).
struct Fold {
  explicit Fold(int nhosts) {
    while (pow2 * 2 <= nhosts) pow2 *= 2;
    extra = nhosts - pow2;
  }
  int RealHost(int v) const { return v < extra ? 2 * v + 1 : v + extra; }

  int pow2 = 1;
  int extra = 0;   // hosts beyond pow2: as many pairs fold
  int vrank = -1;  // this host's rank among the pow2 that run the algorithm (FoldIn); -1: sat out
};

// `staging` takes the whole buffer on an odd host of a pair. A host that sat out has the
// result in buf when this returns. `*mine`: where this host's data is (HostGroup::input or
// buf); buf once the host has reduced into it.
Status FoldIn(const HostGroup& g, uint8_t* buf, const uint8_t** mine, uint8_t* staging, size_t count,
              ncclDataType_t type, ncclRedOp_t op, Fold* f) {
  const size_t bytes = count * DataTypeSize(type);
  if (g.me >= 2 * f->extra) {
    f->vrank = g.me - f->extra;
    return Status::Ok();
  }
  if (g.me % 2 == 0) {
    Link& partner = *g.links[g.me + 1];
    CONDUIT_RETURN_IF_ERROR(partner.Send({{*mine, bytes}}, g.deadline));
    return partner.Recv({{buf, bytes}}, g.deadline);
  }
  CONDUIT_RETURN_IF_ERROR(g.links[g.me - 1]->Recv({{staging, bytes}}, g.deadline));
  Reduce2(buf, *mine, staging, count, type, op);
  CountReduce(g.traffic, bytes);
  *mine = buf;
  f->vrank = g.me / 2;
  return Status::Ok();
}

Status FoldOut(const HostGroup& g, const Fold& f, const uint8_t* buf, size_t bytes) {
  if (g.me < 2 * f.extra) return g.links[g.me - 1]->Send({{buf, bytes}}, g.deadline);
  return Status::Ok();
}

// Staging slots of an exchange that reduces what it receives (ExchangeReducing).
constexpr size_t kExchangeSlots = 4;

// The reducing grain of an exchange of `len` bytes: the configured chunk (an A/B of 128 KiB
// against 512 KiB on 4 hosts, 1-16 MiB, was within the rounds' spread).
size_t ExchangeChunk(const HostGroup& g, size_t len, size_t elem) {
  const size_t chunk = std::min(g.chunk_bytes, std::max(len, elem));
  return std::max(chunk - chunk % elem, elem);
}

bool Overlap(const uint8_t* a, size_t alen, const uint8_t* b, size_t blen) {
  return a < b + blen && b < a + alen;
}

// Sends `out` to `partner` while receiving its `len` bytes, and reduces them into dst
// (dst = mine op received). They land in kExchangeSlots staging slots of `chunk` bytes,
// each reduced as soon as it is whole: read back from cache while later bytes are still
// on the wire. (Staging the whole exchange and reducing after its last byte read every
// received byte back from memory, once the transfer was over.) A part of dst that `out`
// still has to send is reduced only once it was sent (recursive doubling in place).
Status ExchangeReducing(const HostGroup& g, Link& partner, ConstSpan out, uint8_t* dst, const uint8_t* mine,
                        size_t len, uint8_t* staging, size_t chunk, ncclDataType_t type, ncclRedOp_t op) {
  const size_t elem = DataTypeSize(type);
  const auto* out_begin = static_cast<const uint8_t*>(out.data);
  const bool guard = Overlap(out_begin, out.len, dst, len);
  std::vector<MutSpan> in;
  for (size_t off = 0; off < len; off += chunk) {
    in.push_back({staging + (in.size() % kExchangeSlots) * chunk, std::min(chunk, len - off)});
  }
  size_t received = 0, sent = 0, reduced = 0;
  auto drain = [&]() -> Status {
    while (reduced < len) {
      const size_t take = std::min(chunk, len - reduced);
      if (received - reduced < take) break;
      if (guard && Overlap(out_begin + sent, out.len - sent, dst + reduced, take)) break;
      Reduce2(dst + reduced, mine + reduced, staging + (reduced / chunk % kExchangeSlots) * chunk, take / elem,
              type, op);
      reduced += take;
    }
    return Status::Ok();
  };
  FlowLimits limits;
  // A slot is received into again once the chunk in it has been reduced.
  limits.recv_limit = [&] { return std::min(len, reduced + kExchangeSlots * chunk); };
  if (guard) {
    limits.sent = [&](size_t total) {
      sent = total;
      return drain();
    };
  }
  CONDUIT_RETURN_IF_ERROR(partner.SendRecv(
      {out}, partner, in, g.deadline,
      [&](size_t total) {
        received = total;
        return drain();
      },
      nullptr, limits));
  received = len;
  sent = out.len;
  CONDUIT_RETURN_IF_ERROR(drain());
  CountReduce(g.traffic, len);
  return Status::Ok();
}

// What recursive doubling and halving-doubling set up alike before their exchanges: the
// fold of the hosts beyond a power of two (run by Start), the staging slots sized for the
// largest exchange (a whole buffer on the odd host of a pair, which FoldIn stages), and
// where this host's data is.
struct Exchanges {
  explicit Exchanges(int nhosts) : fold(nhosts) {}

  // `largest`: the most bytes one exchange receives. After it returns OK, a host that sat
  // out (fold.vrank < 0) has the result in buf.
  Status Start(const HostGroup& g, uint8_t* buf, size_t count, ncclDataType_t type, ncclRedOp_t op, size_t largest) {
    const size_t elem = DataTypeSize(type);
    const size_t bytes = count * elem;
    if (g.ensure) CONDUIT_RETURN_IF_ERROR(g.ensure(buf, bytes));
    chunk = ExchangeChunk(g, largest, elem);
    staging = Staging(g, fold.extra > 0 ? bytes : std::min(largest, kExchangeSlots * chunk), &own);
    mine = g.input != nullptr ? g.input : buf;
    return FoldIn(g, buf, &mine, staging, count, type, op, &fold);
  }

  Fold fold;
  size_t chunk = 0;
  uint8_t* staging = nullptr;
  std::unique_ptr<uint8_t[]> own;
  const uint8_t* mine = nullptr;  // this host's data: HostGroup::input or buf, buf once reduced into
};

}  // namespace

Status RecursiveDoublingAllReduce(const HostGroup& g, uint8_t* buf, size_t count, ncclDataType_t type,
                                  ncclRedOp_t op) {
  if (g.nhosts == 1) return Status::Ok();
  const size_t bytes = count * DataTypeSize(type);
  Exchanges x(g.nhosts);
  CONDUIT_RETURN_IF_ERROR(x.Start(g, buf, count, type, op, bytes));
  if (x.fold.vrank < 0) return Status::Ok();
  for (int mask = 1; mask < x.fold.pow2; mask <<= 1) {
    Link& partner = *g.links[x.fold.RealHost(x.fold.vrank ^ mask)];
    // Commutative ops: the same bits on both sides.
    CONDUIT_RETURN_IF_ERROR(
        ExchangeReducing(g, partner, {x.mine, bytes}, buf, x.mine, bytes, x.staging, x.chunk, type, op));
    x.mine = buf;
  }
  return FoldOut(g, x.fold, buf, bytes);
}

Status HalvingDoublingAllReduce(const HostGroup& g, uint8_t* buf, size_t count, ncclDataType_t type,
                                ncclRedOp_t op) {
  if (g.nhosts == 1) return Status::Ok();
  const size_t elem = DataTypeSize(type);
  const size_t bytes = count * elem;
  Exchanges x(g.nhosts);
  // The most received at once: the other half of the buffer at the first halving step.
  CONDUIT_RETURN_IF_ERROR(x.Start(g, buf, count, type, op, (count - count / 2) * elem));
  if (x.fold.vrank < 0) return Status::Ok();
  const Fold& fold = x.fold;
  const uint8_t* mine = x.mine;
  const int pow2 = fold.pow2, vrank = fold.vrank;
  // Block b of pow2 (whole elements) starts at byte at(b).
  auto at = [&](int b) { return count * static_cast<size_t>(b) / static_cast<size_t>(pow2) * elem; };
  // Reduce-scatter by recursive halving: at distance d the pair keeps one half of the
  // blocks both still hold each (the lower vrank the lower half) and reduces the other's
  // copy of it into its own. Then vrank owns block vrank.
  int lo = 0, hi = pow2;
  for (int d = pow2 / 2; d >= 1; d /= 2) {
    Link& partner = *g.links[fold.RealHost(vrank ^ d)];
    const int mid = lo + d;
    const bool keep_lower = (vrank & d) == 0;
    const int keep_lo = keep_lower ? lo : mid, keep_hi = keep_lower ? mid : hi;
    const int give_lo = keep_lower ? mid : lo, give_hi = keep_lower ? hi : mid;
    const size_t keep_bytes = at(keep_hi) - at(keep_lo);
    CONDUIT_RETURN_IF_ERROR(ExchangeReducing(g, partner, {mine + at(give_lo), at(give_hi) - at(give_lo)},
                                             buf + at(keep_lo), mine + at(keep_lo), keep_bytes, x.staging,
                                             x.chunk, type, op));
    // What later steps send and reduce lies within the kept half, in buf from now on (the
    // given half of buf is written by the all-gather).
    mine = buf;
    lo = keep_lo;
    hi = keep_hi;
  }
  // All-gather by recursive doubling, distances in the opposite order: each exchange
  // doubles the reduced blocks a host holds, received straight into buf.
  for (int d = 1; d < pow2; d *= 2) {
    Link& partner = *g.links[fold.RealHost(vrank ^ d)];
    const int other_lo = (vrank & d) == 0 ? hi : lo - d;
    CONDUIT_RETURN_IF_ERROR(partner.SendRecv({{buf + at(lo), at(hi) - at(lo)}}, partner,
                                             {{buf + at(other_lo), at(other_lo + d) - at(other_lo)}}, g.deadline));
    lo = std::min(lo, other_lo);
    hi = lo + 2 * d;
  }
  return FoldOut(g, fold, buf, bytes);
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

size_t RecursiveDoublingMaxBytes(const std::optional<size_t>& configured, int nhosts, uint32_t protocol_version) {
  if (configured.has_value()) return *configured;
  if (nhosts == 2 && protocol_version >= peerproto::kCollectiveVersionTwoHostRecursiveDoublingTo1MiB) {
    return kTwoHostRecursiveDoublingMaxBytes;
  }
  return kDefaultRecursiveDoublingMaxBytes;
}

size_t HalvingDoublingMaxBytes(const std::optional<size_t>& configured, uint32_t protocol_version) {
  if (configured.has_value()) return *configured;
  if (protocol_version >= peerproto::kCollectiveVersionHalvingDoublingTo2MiB) return kDefaultHalvingDoublingMaxBytes;
  if (protocol_version >= peerproto::kCollectiveVersionHalvingDoublingByDefault) return kHalvingDoublingMaxBytesAt4;
  return 0;
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
  // Middle of the chain: one transfer each way, bytes passed on as they arrive, in whole
  // chunks (and the rest at the end). Forwarding chunk k while chunk k+1 arrived, as pairs
  // of transfers that both had to end before the next pair began, waited at every chunk for
  // the slower of the two: 1.08-1.22x slower from 8 MiB on 4 hosts (docs/benchmarks.md).
  // The size of the pieces mattered less than the rounds' spread: every arrival passed on
  // at once was 0.93-1.11x as fast as the old code, and 64 KiB pieces 1.00-1.09x as fast
  // as 512 KiB ones.
  const size_t grain = std::max<size_t>(g.chunk_bytes, 1);
  size_t received = 0;
  FlowLimits limits;
  limits.send_limit = [&] { return received == bytes ? bytes : received - received % grain; };
  return to->SendRecv(
      {{buf, bytes}}, *from, {{buf, bytes}}, g.deadline,
      [&](size_t total) {
        FinalizeLinear(g, buf, whole, received, total);
        received = total;
        return Status::Ok();
      },
      nullptr, limits);
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
  // This host's contribution: where it lives apart (HostGroup::input), folded in as the
  // partial results pass, else in buf.
  const uint8_t* mine = g.input != nullptr ? g.input : buf;
  if (from == nullptr) return to->Send({{mine, bytes}}, g.deadline, g.ensure);
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
    Reduce2(buf + k_begin, mine + k_begin, slots[slot], (k_end - k_begin) / elem, type, op);
    CountReduce(g.traffic, k_end - k_begin);
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
