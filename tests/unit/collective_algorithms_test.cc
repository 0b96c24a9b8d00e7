// The inter-host collective algorithms (daemon/collectives/algorithms.h) with 1..16 hosts
// in one process: each host is a thread, the links are socketpairs (transport/local_link.h).
//
// Every case checks the results against a reference folded on one thread, and checks the
// hooks the algorithms promise LocalStage: a host's input is only in its buffer once
// `ensure` asked for those bytes (this model copies it in then, so an algorithm that reads
// first computes garbage), and every byte `finalize` names already holds its final value.
#include "collectives/algorithms.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "reduce/reduce.h"
#include "transport/local_link.h"

namespace conduit {
namespace {

constexpr uint8_t kGarbage = 0xCD;

// One host's side of a case.
struct HostCase {
  std::vector<uint8_t> input;     // what this host contributes, laid out as the buffer
  std::vector<uint8_t> has_input; // per byte: 1 where `input` is this host's contribution
  std::vector<uint8_t> expected;  // the buffer afterwards, where `check` is set
  std::vector<uint8_t> check;
  std::vector<uint8_t> buf;       // the working buffer the algorithm runs on
  std::vector<uint8_t> out;       // HostGroup::final_place's target (output_apart), laid out as buf
  std::vector<uint8_t> ensured, finalized;
  std::string violation;          // the first broken hook promise, if any
  Status status;
  bool input_apart = false;       // HostGroup::input: the algorithm reads `input` itself
  bool output_apart = false;      // HostGroup::final_place: final results go to `out`, not buf
  const std::vector<uint8_t>& result() const { return output_apart ? out : buf; }

  void Init(size_t bytes) {
    input.assign(bytes, 0);
    has_input.assign(bytes, 0);
    expected.assign(bytes, 0);
    check.assign(bytes, 0);
    buf.assign(bytes, kGarbage);
    out.assign(bytes, kGarbage);
    ensured.assign(bytes, 0);
    finalized.assign(bytes, 0);
  }

  // The model of LocalStage::Ensure: this host's contribution appears on first request.
  Status Ensure(const void* p, size_t len) {
    const size_t at = Offset(p, len, "ensure");
    if (at == SIZE_MAX) return Status::Ok();  // the algorithm's own staging
    // Span by span (memchr, memset, memcpy), not byte by byte: the sanitizers check a
    // library call's range at once, where they would check each byte of a loop apart
    // (this test took two minutes under TSan that way).
    const size_t end = at + len;
    for (size_t i = RunEnd(ensured, at, end, 1); i < end;) {
      const size_t j = RunEnd(ensured, i, end, 0);  // [i, j): not ensured yet
      memset(ensured.data() + i, 1, j - i);
      if (!input_apart) {
        for (size_t k = RunEnd(has_input, i, j, 0); k < j;) {
          const size_t l = RunEnd(has_input, k, j, 1);  // [k, l): this host's contribution
          memcpy(buf.data() + k, input.data() + k, l - k);
          k = RunEnd(has_input, l, j, 0);
        }
      }
      i = RunEnd(ensured, j, end, 1);
    }
    return Status::Ok();
  }

  // The end of the run of `value` in flags[from, end): the first other byte, or `end`. The
  // flags are 0 or 1.
  static size_t RunEnd(const std::vector<uint8_t>& flags, size_t from, size_t end, uint8_t value) {
    if (from >= end) return end;
    const void* other = memchr(flags.data() + from, value ^ 1, end - from);
    return other == nullptr ? end : static_cast<size_t>(static_cast<const uint8_t*>(other) - flags.data());
  }

  void Finalize(const uint8_t* p, size_t len) {
    const size_t at = Offset(p, len, "finalize");
    if (at == SIZE_MAX) {
      Violate("finalize of bytes outside the buffer");
      return;
    }
    const size_t end = at + len;
    if (const size_t i = RunEnd(check, at, end, 1); i < end) {
      Violate("finalize of byte " + std::to_string(i) + ", which is not a result of this host");
      return;
    }
    if (const size_t i = FirstDifference(result(), expected, at, end); i < end) {
      Violate("byte " + std::to_string(i) + " finalized before it held its result");
      return;
    }
    memset(finalized.data() + at, 1, len);
  }

  // The first byte of [from, end) where `a` and `b` differ, or `end`.
  static size_t FirstDifference(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b, size_t from, size_t end) {
    if (from >= end || memcmp(a.data() + from, b.data() + from, end - from) == 0) return end;
    size_t i = from;
    while (a[i] == b[i]) ++i;
    return i;
  }

  size_t Offset(const void* p, size_t len, const char* hook) {
    auto* b = static_cast<const uint8_t*>(p);
    if (b < buf.data() || b >= buf.data() + buf.size()) return SIZE_MAX;
    const size_t at = static_cast<size_t>(b - buf.data());
    if (len > buf.size() - at) {
      Violate(std::string(hook) + " past the end of the buffer");
      return SIZE_MAX;
    }
    return at;
  }

  void Violate(const std::string& what) {
    if (violation.empty()) violation = what;
  }
};

using Algorithm = std::function<Status(const HostGroup&, uint8_t* buf)>;

struct RunOptions {
  size_t chunk_bytes = 512 * 1024;
  bool scratch = true;            // a kept Scratch, as communicators have; else fresh memory
  bool all_finalized = false;     // every checked byte must have been finalized
  // The contribution stays in HostCase::input (HostGroup::input) and nothing copies it into
  // buf: a byte of buf the algorithm never wrote keeps kGarbage and fails the check.
  bool input_apart = false;
  // Final results through HostGroup::final_place into HostCase::out; buf keeps kGarbage
  // there.
  bool output_apart = false;
  int64_t deadline_ms = 10000;
};

// Host h's group on `mesh`, without hooks or scratch.
HostGroup GroupOf(const LocalMesh& mesh, int h, size_t chunk_bytes, int64_t deadline_ms) {
  HostGroup group;
  group.nhosts = mesh.nhosts();
  group.me = h;
  group.links = mesh.Row(h);
  group.chunk_bytes = chunk_bytes;
  group.deadline = Deadline::AfterMs(deadline_ms);
  return group;
}

// Runs `algorithm` on every host at once over `mesh` and checks each host's results.
void RunOnMesh(const LocalMesh& mesh, std::vector<HostCase>& hosts, const Algorithm& algorithm,
               const RunOptions& options = {}) {
  const int n = mesh.nhosts();
  ASSERT_EQ(hosts.size(), static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int h = 0; h < n; ++h) {
    threads.emplace_back([&, h] {
      HostCase& host = hosts[h];
      Scratch scratch;
      HostGroup group = GroupOf(mesh, h, options.chunk_bytes, options.deadline_ms);
      group.ensure = [&host](const void* p, size_t len) { return host.Ensure(p, len); };
      group.finalize = [&host](const uint8_t* p, size_t len) { host.Finalize(p, len); };
      group.scratch = options.scratch ? &scratch : nullptr;
      host.input_apart = options.input_apart;
      if (options.input_apart) group.input = host.input.data();
      host.output_apart = options.output_apart;
      if (options.output_apart) {
        group.final_place = [&host](size_t offset, size_t) { return host.out.data() + offset; };
      }
      host.status = algorithm(group, host.buf.data());
      // Then the caller ensures whatever the algorithm never read (LocalStage::Finish):
      // bytes it wrote without asking first would be overwritten here, as they would be there.
      if (host.status.ok()) host.status = host.Ensure(host.buf.data(), host.buf.size());
    });
  }
  for (auto& t : threads) t.join();
  for (int h = 0; h < n; ++h) {
    const HostCase& host = hosts[h];
    ASSERT_TRUE(host.status.ok()) << "host " << h << ": " << host.status.message();
    ASSERT_EQ(host.violation, "") << "host " << h;
    // Each run of checked bytes at once (as HostCase::Ensure).
    const size_t size = host.buf.size();
    for (size_t i = HostCase::RunEnd(host.check, 0, size, 0); i < size;) {
      const size_t j = HostCase::RunEnd(host.check, i, size, 1);  // [i, j): checked
      const size_t wrong = HostCase::FirstDifference(host.result(), host.expected, i, j);
      ASSERT_EQ(wrong, j) << "host " << h << " byte " << wrong << ": " << int{host.result()[wrong]} << ", expected "
                          << int{host.expected[wrong]};
      if (options.all_finalized) {
        const size_t never = HostCase::RunEnd(host.finalized, i, j, 1);
        ASSERT_EQ(never, j) << "host " << h << " byte " << never << " never finalized";
      }
      i = HostCase::RunEnd(host.check, j, size, 0);
    }
  }
}

// Small whole numbers, exact in every type and under every order of summation, so the
// reference fold and the algorithms agree bit for bit. Products stay powers of two.
int Value(int host, size_t i, ncclRedOp_t op) {
  if (op == ncclProd) return 1 + static_cast<int>((host * 5 + i * 3) % 7 == 0);
  return static_cast<int>((host * 7 + i * 13) % 9) - (op == ncclSum ? 0 : 4);
}

void Store(ncclDataType_t type, uint8_t* p, int v) {
  switch (type) {
    case ncclInt8: { int8_t x = static_cast<int8_t>(v); memcpy(p, &x, 1); break; }
    case ncclUint8: { uint8_t x = static_cast<uint8_t>(v); memcpy(p, &x, 1); break; }
    case ncclInt32: { int32_t x = v; memcpy(p, &x, 4); break; }
    case ncclUint32: { uint32_t x = static_cast<uint32_t>(v); memcpy(p, &x, 4); break; }
    case ncclInt64: { int64_t x = v; memcpy(p, &x, 8); break; }
    case ncclUint64: { uint64_t x = static_cast<uint64_t>(v); memcpy(p, &x, 8); break; }
    case ncclFloat16: { uint16_t x = FloatToHalf(static_cast<float>(v)); memcpy(p, &x, 2); break; }
    case ncclBfloat16: { uint16_t x = FloatToBf16(static_cast<float>(v)); memcpy(p, &x, 2); break; }
    case ncclFloat32: { float x = static_cast<float>(v); memcpy(p, &x, 4); break; }
    case ncclFloat64: { double x = v; memcpy(p, &x, 8); break; }
    default: FAIL() << "type " << type << " has no test values";
  }
}

// Every host contributes a whole buffer of `count` elements; hosts whose `wants(h)` holds
// check the element-wise reduction over all hosts.
std::vector<HostCase> ReductionCase(int n, size_t count, ncclDataType_t type, ncclRedOp_t op,
                                    const std::function<bool(int)>& wants) {
  const size_t elem = DataTypeSize(type), bytes = count * elem;
  std::vector<HostCase> hosts(n);
  std::vector<uint8_t> fold;
  for (int h = 0; h < n; ++h) {
    hosts[h].Init(bytes);
    for (size_t i = 0; i < count; ++i) Store(type, hosts[h].input.data() + i * elem, Value(h, i, op));
    hosts[h].has_input.assign(bytes, 1);
    if (h == 0) {
      fold = hosts[0].input;
    } else {
      ReduceInto(fold.data(), hosts[h].input.data(), count, type, op);
    }
  }
  for (int h = 0; h < n; ++h) {
    hosts[h].expected = fold;
    hosts[h].check.assign(bytes, wants(h) ? 1 : 0);
  }
  return hosts;
}

std::unique_ptr<LocalMesh> Mesh(int n) {
  std::unique_ptr<LocalMesh> mesh;
  Status st = LocalMesh::Create(n, &mesh);
  EXPECT_TRUE(st.ok()) << st.message();
  return mesh;
}

bool Everyone(int) { return true; }

TEST(CollectiveAlgorithmsTest, AllReduceOnOneToSixteenHostsAndOddSizes) {
  for (int n = 1; n <= 16; ++n) {
    auto mesh = Mesh(n);
    for (size_t count : {0, 1, 3, 17, 1001}) {
      for (size_t chunk : {4, 100, 512 * 1024}) {
        SCOPED_TRACE("hosts " + std::to_string(n) + " count " + std::to_string(count) + " chunk " +
                     std::to_string(chunk));
        auto ring = ReductionCase(n, count, ncclFloat32, ncclSum, Everyone);
        RunOnMesh(*mesh, ring, [count](const HostGroup& g, uint8_t* buf) {
          return RingAllReduce(g, buf, count, ncclFloat32, ncclSum);
        }, {.chunk_bytes = chunk, .scratch = chunk != 100, .all_finalized = n > 1});
        auto rd = ReductionCase(n, count, ncclFloat32, ncclSum, Everyone);
        RunOnMesh(*mesh, rd, [count](const HostGroup& g, uint8_t* buf) {
          return RecursiveDoublingAllReduce(g, buf, count, ncclFloat32, ncclSum);
        }, {.chunk_bytes = chunk, .scratch = chunk != 100});
        auto rh = ReductionCase(n, count, ncclFloat32, ncclSum, Everyone);
        RunOnMesh(*mesh, rh, [count](const HostGroup& g, uint8_t* buf) {
          return HalvingDoublingAllReduce(g, buf, count, ncclFloat32, ncclSum);
        }, {.chunk_bytes = chunk, .scratch = chunk != 100});
      }
    }
  }
}

// One rank's out-of-place all-reduce in its own buffers (LocalStage::TakeInputApart): each
// algorithm reads the contribution where it is, and must write every byte of buf itself,
// the results only.
TEST(CollectiveAlgorithmsTest, AllReduceReadsAnInputApartAndWritesEveryByte) {
  for (int n : {2, 3, 4, 5, 7, 8}) {
    auto mesh = Mesh(n);
    for (size_t count : {1, 3, 17, 1001, 70000}) {
      for (size_t chunk : {100, 512 * 1024}) {
        SCOPED_TRACE("hosts " + std::to_string(n) + " count " + std::to_string(count) + " chunk " +
                     std::to_string(chunk));
        const RunOptions apart{.chunk_bytes = chunk, .input_apart = true};
        auto ring = ReductionCase(n, count, ncclFloat32, ncclSum, Everyone);
        RunOnMesh(*mesh, ring, [count](const HostGroup& g, uint8_t* buf) {
          return RingAllReduce(g, buf, count, ncclFloat32, ncclSum);
        }, apart);
        auto rd = ReductionCase(n, count, ncclFloat32, ncclSum, Everyone);
        RunOnMesh(*mesh, rd, [count](const HostGroup& g, uint8_t* buf) {
          return RecursiveDoublingAllReduce(g, buf, count, ncclFloat32, ncclSum);
        }, apart);
        auto rh = ReductionCase(n, count, ncclFloat32, ncclSum, Everyone);
        RunOnMesh(*mesh, rh, [count](const HostGroup& g, uint8_t* buf) {
          return HalvingDoublingAllReduce(g, buf, count, ncclFloat32, ncclSum);
        }, apart);
      }
    }
  }
  for (ncclRedOp_t op : {ncclProd, ncclMax, ncclMin}) {
    for (ncclDataType_t type : {ncclInt8, ncclFloat16, ncclFloat64}) {
      SCOPED_TRACE("type " + std::string(DataTypeName(type)) + " op " + std::to_string(op));
      auto mesh = Mesh(4);
      auto ring = ReductionCase(4, 257, type, op, Everyone);
      RunOnMesh(*mesh, ring, [&](const HostGroup& g, uint8_t* buf) { return RingAllReduce(g, buf, 257, type, op); },
                {.chunk_bytes = 60, .input_apart = true});
      auto rh = ReductionCase(4, 257, type, op, Everyone);
      RunOnMesh(*mesh, rh, [&](const HostGroup& g, uint8_t* buf) {
        return HalvingDoublingAllReduce(g, buf, 257, type, op);
      }, {.input_apart = true});
    }
  }
}

TEST(CollectiveAlgorithmsTest, AllReduceEveryTypeAndOperator) {
  const ncclDataType_t types[] = {ncclInt8,  ncclUint8,   ncclInt32,    ncclUint32,  ncclInt64,
                                  ncclUint64, ncclFloat16, ncclBfloat16, ncclFloat32, ncclFloat64};
  for (int n : {3, 4}) {
    auto mesh = Mesh(n);
    for (ncclDataType_t type : types) {
      for (ncclRedOp_t op : {ncclSum, ncclProd, ncclMax, ncclMin}) {
        SCOPED_TRACE("hosts " + std::to_string(n) + " type " + DataTypeName(type) + " op " + std::to_string(op));
        const size_t count = 257;
        auto ring = ReductionCase(n, count, type, op, Everyone);
        RunOnMesh(*mesh, ring, [&](const HostGroup& g, uint8_t* buf) { return RingAllReduce(g, buf, count, type, op); },
                  {.chunk_bytes = 60, .all_finalized = true});
        auto rd = ReductionCase(n, count, type, op, Everyone);
        RunOnMesh(*mesh, rd, [&](const HostGroup& g, uint8_t* buf) {
          return RecursiveDoublingAllReduce(g, buf, count, type, op);
        });
        auto rh = ReductionCase(n, count, type, op, Everyone);
        RunOnMesh(*mesh, rh, [&](const HostGroup& g, uint8_t* buf) {
          return HalvingDoublingAllReduce(g, buf, count, type, op);
        });
      }
    }
  }
}

// Many more chunks than the ring's staging slots, so slots are reused while the next
// host is still sending: the flow limits must hold the sender back.
TEST(CollectiveAlgorithmsTest, LargeRingAllReduceCyclesItsStagingSlots) {
  for (int n : {2, 4, 5}) {
    auto mesh = Mesh(n);
    constexpr size_t count = (1u << 16) + 3;  // 64 chunks of 1 KiB per host's segment: 8 rounds of slots
    SCOPED_TRACE("hosts " + std::to_string(n));
    auto hosts = ReductionCase(n, count, ncclFloat32, ncclSum, Everyone);
    RunOnMesh(*mesh, hosts, [](const HostGroup& g, uint8_t* buf) {
      return RingAllReduce(g, buf, count, ncclFloat32, ncclSum);
    }, {.chunk_bytes = 1024, .all_finalized = true});
  }
}

// Recursive doubling and halving-doubling reduce what they receive through a few staging
// slots (ExchangeReducing): exchanges much larger than the slots and than the socket
// buffers, so both sides are held back by their slots while the other still sends, and in
// place a slot is reduced into bytes the exchange is still sending only once they left.
// With either of ExchangeReducing's flow limits lifted, cases of this test fail (checked at
// this size; 16 MiB, as it was, took 214 s of the thread sanitizer's CI stage, 2 MiB 22 s).
TEST(CollectiveAlgorithmsTest, LargeExchangesCycleTheirStagingSlots) {
  for (int n : {2, 3, 4}) {
    auto mesh = Mesh(n);
    // 2 MiB and a bit per host: 32 chunks of 64 KiB, 8 times the 4 slots, and 10 times a
    // socketpair's buffer.
    constexpr size_t count = (512u << 10) + 5;
    for (bool apart : {false, true}) {
      SCOPED_TRACE("hosts " + std::to_string(n) + (apart ? " input apart" : " in place"));
      auto rd = ReductionCase(n, count, ncclFloat32, ncclSum, Everyone);
      RunOnMesh(*mesh, rd, [](const HostGroup& g, uint8_t* buf) {
        return RecursiveDoublingAllReduce(g, buf, count, ncclFloat32, ncclSum);
      }, {.chunk_bytes = 64 * 1024, .input_apart = apart});
      auto rh = ReductionCase(n, count, ncclFloat32, ncclSum, Everyone);
      RunOnMesh(*mesh, rh, [](const HostGroup& g, uint8_t* buf) {
        return HalvingDoublingAllReduce(g, buf, count, ncclFloat32, ncclSum);
      }, {.chunk_bytes = 64 * 1024, .input_apart = apart});
    }
  }
}

// Ranks are dealt to hosts round robin, as the daemon's segments follow rank order: a host
// owns several separate blocks, or none when there are fewer ranks than hosts.
HostSegments DealtSegments(int nhosts, int nranks, size_t block) {
  HostSegments segments(nhosts);
  for (int r = 0; r < nranks; ++r) segments[r % nhosts].push_back({static_cast<size_t>(r) * block, block});
  return segments;
}

// A reduce-scatter of int32 `count` elements: each host checks only its own segments.
std::vector<HostCase> ReduceScatterCase(int n, size_t count, ncclRedOp_t op, const HostSegments& segments) {
  auto hosts = ReductionCase(n, count, ncclInt32, op, Everyone);
  for (int h = 0; h < n; ++h) {
    std::fill(hosts[h].check.begin(), hosts[h].check.end(), 0);
    for (const ByteRange& r : segments[h]) std::fill_n(hosts[h].check.begin() + r.offset, r.len, 1);
  }
  return hosts;
}

TEST(CollectiveAlgorithmsTest, ReduceScatterLeavesEachHostItsOwnBlocks) {
  for (int n : {2, 3, 5, 8}) {
    auto mesh = Mesh(n);
    for (int nranks : {n - 1, n, 2 * n + 1}) {
      if (nranks == 0) continue;
      const size_t block_count = 37;
      const size_t block = block_count * sizeof(int32_t);
      SCOPED_TRACE("hosts " + std::to_string(n) + " ranks " + std::to_string(nranks));
      const HostSegments segments = DealtSegments(n, nranks, block);
      auto hosts = ReduceScatterCase(n, block_count * nranks, ncclMax, segments);
      RunOnMesh(*mesh, hosts, [&](const HostGroup& g, uint8_t* buf) {
        return RingReduceScatter(g, buf, segments, ncclInt32, ncclMax);
      }, {.chunk_bytes = 44, .all_finalized = true});
    }
  }
}

// One rank's out-of-place reduce-scatter or reduce in its own buffers
// (LocalStage::TakeInputApart): the contribution is read where it is, and every byte the
// host keeps or finalizes (its segments; the root's result) is written by the algorithm.
TEST(CollectiveAlgorithmsTest, ReduceScatterAndReduceReadAnInputApart) {
  for (int n : {2, 3, 4, 5, 8}) {
    auto mesh = Mesh(n);
    for (int nranks : {n, 2 * n + 1}) {
      for (size_t chunk : {44, 512 * 1024}) {
        const size_t block_count = 37;
        const size_t block = block_count * sizeof(int32_t);
        SCOPED_TRACE("hosts " + std::to_string(n) + " ranks " + std::to_string(nranks) + " chunk " +
                     std::to_string(chunk));
        const HostSegments segments = DealtSegments(n, nranks, block);
        auto hosts = ReduceScatterCase(n, block_count * nranks, ncclSum, segments);
        RunOnMesh(*mesh, hosts, [&](const HostGroup& g, uint8_t* buf) {
          return RingReduceScatter(g, buf, segments, ncclInt32, ncclSum);
        }, {.chunk_bytes = chunk, .all_finalized = true, .input_apart = true});
        // The last step reduced straight into the output: buf's results are never written.
        auto direct = ReduceScatterCase(n, block_count * nranks, ncclSum, segments);
        RunOnMesh(*mesh, direct, [&](const HostGroup& g, uint8_t* buf) {
          return RingReduceScatter(g, buf, segments, ncclInt32, ncclSum);
        }, {.chunk_bytes = chunk, .all_finalized = true, .input_apart = true, .output_apart = true});
      }
    }
    for (int root : {0, n - 1, n / 2}) {
      for (size_t count : {1, 999, 25001}) {
        SCOPED_TRACE("hosts " + std::to_string(n) + " root " + std::to_string(root) + " count " +
                     std::to_string(count));
        auto hosts = ReductionCase(n, count, ncclInt32, ncclMax, [root](int h) { return h == root; });
        RunOnMesh(*mesh, hosts, [&](const HostGroup& g, uint8_t* buf) {
          return ChainReduce(g, root, buf, count, ncclInt32, ncclMax);
        }, {.chunk_bytes = 4000, .all_finalized = true, .input_apart = true});
      }
    }
  }
}

TEST(CollectiveAlgorithmsTest, AllGatherGivesEveryHostEveryBlock) {
  for (int n : {2, 3, 5, 8}) {
    auto mesh = Mesh(n);
    for (int nranks : {n - 1, n, 2 * n + 1}) {
      if (nranks == 0) continue;
      const size_t block = 1003;
      SCOPED_TRACE("hosts " + std::to_string(n) + " ranks " + std::to_string(nranks));
      const HostSegments segments = DealtSegments(n, nranks, block);
      std::vector<HostCase> hosts(n);
      std::vector<uint8_t> whole(block * nranks);
      for (size_t i = 0; i < whole.size(); ++i) whole[i] = static_cast<uint8_t>(i * 31 + 7);
      for (int h = 0; h < n; ++h) {
        hosts[h].Init(whole.size());
        hosts[h].input = whole;
        for (const ByteRange& r : segments[h]) std::fill_n(hosts[h].has_input.begin() + r.offset, r.len, 1);
        hosts[h].expected = whole;
        hosts[h].check.assign(whole.size(), 1);
        // A host's own blocks are its input, never finalized by the algorithm.
        for (const ByteRange& r : segments[h]) std::fill_n(hosts[h].finalized.begin() + r.offset, r.len, 1);
      }
      RunOnMesh(*mesh, hosts, [&](const HostGroup& g, uint8_t* buf) {
        return RingAllGather(g, buf, segments);
      }, {.chunk_bytes = 256, .all_finalized = true});
    }
  }
}

TEST(CollectiveAlgorithmsTest, ChainBroadcastFromEveryRoot) {
  for (int n : {1, 2, 3, 5, 8}) {
    auto mesh = Mesh(n);
    for (int root = 0; root < n; ++root) {
      for (size_t bytes : {0, 1, 1000, 100003}) {
        for (size_t chunk : {7, 4096}) {
          if (bytes > 1000 && chunk < 4096) continue;  // 14,000 tiny steps per hop: slow, no new path
          SCOPED_TRACE("hosts " + std::to_string(n) + " root " + std::to_string(root) + " bytes " +
                       std::to_string(bytes) + " chunk " + std::to_string(chunk));
          std::vector<HostCase> hosts(n);
          for (int h = 0; h < n; ++h) {
            hosts[h].Init(bytes);
            for (size_t i = 0; i < bytes; ++i) hosts[h].input[i] = static_cast<uint8_t>(i * 7 + root);
            if (h == root) hosts[h].has_input.assign(bytes, 1);
            hosts[h].expected = hosts[h].input;
            hosts[h].check.assign(bytes, 1);
            if (h == root) hosts[h].finalized.assign(bytes, 1);  // the root's data is its input
          }
          RunOnMesh(*mesh, hosts, [&](const HostGroup& g, uint8_t* buf) {
            return ChainBroadcast(g, root, buf, bytes);
          }, {.chunk_bytes = chunk, .all_finalized = true});
        }
      }
    }
  }
}

TEST(CollectiveAlgorithmsTest, ChainReduceToEveryRoot) {
  for (int n : {1, 2, 3, 5, 8}) {
    auto mesh = Mesh(n);
    for (int root = 0; root < n; ++root) {
      for (size_t count : {0, 1, 999, 25001}) {
        for (ncclRedOp_t op : {ncclSum, ncclMin}) {
          SCOPED_TRACE("hosts " + std::to_string(n) + " root " + std::to_string(root) + " count " +
                       std::to_string(count) + " op " + std::to_string(op));
          auto hosts = ReductionCase(n, count, ncclInt32, op, [root](int h) { return h == root; });
          RunOnMesh(*mesh, hosts, [&](const HostGroup& g, uint8_t* buf) {
            return ChainReduce(g, root, buf, count, ncclInt32, op);
          }, {.chunk_bytes = 4000, .all_finalized = n > 1});
        }
      }
    }
  }
}

// A host that dies (its links shut down) fails the collective on every other host within
// the deadline, each with an error naming a peer, instead of hanging or reporting success.
TEST(CollectiveAlgorithmsTest, ALostHostFailsEveryHostBeforeTheDeadline) {
  for (int algo : {0, 1, 2}) {  // ring, recursive doubling, halving-doubling
    const bool ring = algo == 0;
    const int n = 4, lost = 2;
    auto mesh = Mesh(n);
    const size_t count = 1u << 18;
    auto hosts = ReductionCase(n, count, ncclFloat32, ncclSum, Everyone);
    std::vector<std::thread> threads;
    for (int h = 0; h < n; ++h) {
      threads.emplace_back([&, h] {
        if (h == lost) {
          for (Link* l : mesh->Row(h)) if (l != nullptr) l->Shutdown();
          return;
        }
        const HostGroup group = GroupOf(*mesh, h, 8192, 3000);
        uint8_t* buf = hosts[h].input.data();
        hosts[h].status = ring        ? RingAllReduce(group, buf, count, ncclFloat32, ncclSum)
                          : algo == 1 ? RecursiveDoublingAllReduce(group, buf, count, ncclFloat32, ncclSum)
                                      : HalvingDoublingAllReduce(group, buf, count, ncclFloat32, ncclSum);
        // As a communicator does on failure: abort its links so nobody waits on it.
        if (!hosts[h].status.ok()) {
          for (Link* l : mesh->Row(h)) if (l != nullptr) l->Shutdown();
        }
      });
    }
    for (auto& t : threads) t.join();
    for (int h = 0; h < n; ++h) {
      if (h == lost) continue;
      SCOPED_TRACE(std::string(ring ? "ring" : algo == 1 ? "recursive doubling" : "halving-doubling") + " host " +
                   std::to_string(h));
      EXPECT_FALSE(hosts[h].status.ok());
      EXPECT_NE(hosts[h].status.message().find("host"), std::string::npos) << hosts[h].status.message();
    }
  }
}

}  // namespace
}  // namespace conduit
