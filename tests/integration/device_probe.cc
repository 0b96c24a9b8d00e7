// device_probe: an NCCL program on device memory, as PyTorch runs one, for hosts without a
// GPU: it loads the CUDA driver named by $CONDUIT_CUDA_DRIVER (the test double,
// tests/cuda_double) the way the CUDA runtime would, makes device buffers, puts "compute"
// on its streams (the double's fill kernel, which sleeps first, so a collective that does
// not wait for the program's stream reads stale data), calls collectives through the shim
// and checks every result after copying it back on the stream.
//
//   device_probe local [--ranks N]          N ranks in this process (default 3) on GPU 0:
//       every collective; ncclMemAlloc buffers; ordering across streams through events;
//       free and re-allocation at the same address.
//   device_probe hosts --nranks T --base B --ranks N --id-file F [--linger-ms M [--release-file R]]
//       ranks B..B+N-1 of T (the process holding rank 0 writes the id): every collective
//       and a send/recv ring on device buffers across hosts; then, with M, prints
//       "lingering" and keeps the communicators (for conduitd's trace) until R exists, at
//       most M ms (linger.h).
//   device_probe abort                      rank 0 of 2 waits in an all-reduce on device
//       buffers (rank 1 never calls); ncclCommAbort on another thread must end it promptly.
//   device_probe async-error                rank 0's all-reduce is accepted, then rank 1 is
//       aborted: ncclCommGetAsyncError must report it and the stream must be released.
//   device_probe release                    two buffers used and freed: conduitd must drop
//       its mappings of them (counted in its /proc maps) by the next call.
//   device_probe vanish                     exits at once after two accepted all-reduces.
//   device_probe daemon-dies                two accepted all-reduces behind a long kernel,
//       then conduitd is killed: the stream must be released and the error reported.
//   device_probe register                   ncclCommRegister / ncclCommWindowRegister map
//       device buffers in conduitd before any collective.
//   device_probe loop [--ranks N] [--inputs vmm] --stop-file F   all-reduces on the same
//       device buffers back to back, each checked, until F exists (conduitd is replaced
//       meanwhile); with --inputs vmm the inputs are virtual-memory-managed allocations,
//       each across two pages of a segment (a span).
//   device_probe revoke                     ncclCommRevoke + shrink, and shrink with
//       NCCL_SHRINK_ABORT, while an accepted all-reduce waits for a rank that never calls.
//   device_probe p2p [--ranks N] [--linger-ms M [--release-file R]]   point-to-point on device buffers (N ranks
//       here): a ring of sends and receives in one group, and ncclAlltoAll, inputs still
//       being computed when the calls are made; then, as hosts does, it may linger. (The
//       hosts mode runs the ring across hosts.)
//   device_probe broadcast-in-place [--ranks N]   broadcasts in place from each rank in
//       turn, each marked in the double's copy log ($CONDUIT_CUDA_DOUBLE_COPY_LOG).
//   device_probe vmm                        two ranks on virtual-memory-managed buffers laid
//       out as PyTorch's expandable segments: mapped in conduitd from file descriptors,
//       buffers across two allocations mapped as spans, allocations that cannot be exported staged,
//       ncclMemAlloc's memory of that kind, the mappings dropped once the program unmaps.
// With CONDUIT_DEVICE_SYNC=events the shim uses its waiting path (calls return once
// conduitd has run the group); otherwise calls across hosts must return before the GPU
// work they wait for has run.
// Prints a line per check; exits 0 when all pass. With $CONDUIT_PROBE_DEADLINE_S it exits
// 124 after that many seconds, naming the call it is in.
#include <dlfcn.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "coll_id_file.h"
#include "cuda/cuda_driver.h"
#include "linger.h"
#include "nccl.h"

namespace {

using namespace conduit::cuda;  // NOLINT: the driver ABI's types

// The driver's entry points, as a CUDA runtime would resolve them.
struct Driver {
#define DEVICE_PROBE_MEMBER_(member, symbol, params) CUresult(*member) params = nullptr;
  CONDUIT_CUDA_DRIVER_API(DEVICE_PROBE_MEMBER_)
#undef DEVICE_PROBE_MEMBER_
};

Driver g_cu;

cudaStream_t Nccl(CUstream s) { return reinterpret_cast<cudaStream_t>(s); }
CUcontext g_ctx = nullptr;
CUfunction g_fill = nullptr;
int g_failures = 0;

// The call the probe is in, for the watchdog (main's --deadline / $CONDUIT_PROBE_DEADLINE_S):
// a probe that hangs says where instead of being killed silently.
std::atomic<const char*> g_stage{"starting"};
#define PROBE_STAGE_(call) g_stage.store(__FILE__ ":" PROBE_LINE_(__LINE__) ": " #call)
#define PROBE_LINE_(l) PROBE_LINE2_(l)
#define PROBE_LINE2_(l) #l

#define CU_CHECK(call)                                                              \
  do {                                                                              \
    PROBE_STAGE_(call);                                                             \
    CUresult r_ = (call);                                                           \
    if (r_ != kSuccess) {                                                           \
      std::printf("device_probe: %s failed: CUresult %d (line %d)\n", #call, r_, __LINE__); \
      std::exit(2);                                                                 \
    }                                                                               \
  } while (0)

#define NCCL_CHECK(call)                                                                                   \
  do {                                                                                                     \
    PROBE_STAGE_(call);                                                                                    \
    ncclResult_t r_ = (call);                                                                              \
    if (r_ != ncclSuccess) {                                                                               \
      std::printf("device_probe: %s failed: %s (%s)\n", #call, ncclGetErrorString(r_), ncclGetLastError(nullptr)); \
      std::exit(3);                                                                                        \
    }                                                                                                      \
  } while (0)

void LoadDriver() {
  const char* path = std::getenv("CONDUIT_CUDA_DRIVER");
  if (path == nullptr) {
    std::printf("device_probe: set CONDUIT_CUDA_DRIVER to the CUDA driver test double\n");
    std::exit(2);
  }
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    std::printf("device_probe: cannot load %s: %s\n", path, dlerror());
    std::exit(2);
  }
#define DEVICE_PROBE_RESOLVE_(member, symbol, params) \
  g_cu.member = reinterpret_cast<decltype(g_cu.member)>(dlsym(h, #symbol));
  CONDUIT_CUDA_DRIVER_API(DEVICE_PROBE_RESOLVE_)
#undef DEVICE_PROBE_RESOLVE_
  CU_CHECK(g_cu.Init(0));
  CUdevice dev = 0;
  CU_CHECK(g_cu.DeviceGet(&dev, 0));
  CU_CHECK(g_cu.DevicePrimaryCtxRetain(&g_ctx, dev));
  CU_CHECK(g_cu.CtxSetCurrent(g_ctx));
  CUmodule module = nullptr;
  CU_CHECK(g_cu.ModuleLoadData(&module, "conduit-cuda-double-module"));
  CU_CHECK(g_cu.ModuleGetFunction(&g_fill, module, "conduit_double_fill_float32"));
}

void Check(bool ok, const std::string& what) {
  std::printf("device_probe: %s: %s\n", ok ? "ok" : "FAILED", what.c_str());
  if (!ok) ++g_failures;
}

float* DeviceFloats(size_t count) {
  CUdeviceptr p = 0;
  CU_CHECK(g_cu.MemAlloc(&p, count * sizeof(float)));
  return reinterpret_cast<float*>(p);
}

// dst[i] = first + i, on `stream`, after `delay_ms` (a kernel still running when the
// collective is called).
void Fill(float* dst, size_t count, float first, uint32_t delay_ms, CUstream stream) {
  uint64_t ptr = reinterpret_cast<uint64_t>(dst), n = count;
  float step = 1;
  void* params[] = {&ptr, &n, &first, &step, &delay_ms};
  CU_CHECK(g_cu.LaunchKernel(g_fill, 1, 1, 1, 128, 1, 1, 0, stream, params, nullptr));
}

// The buffer's contents once the work queued on `stream` is done (a copy into pageable
// memory returns when complete).
std::vector<float> Read(const float* src, size_t count, CUstream stream) {
  std::vector<float> out(count);
  CU_CHECK(g_cu.MemcpyAsync(reinterpret_cast<CUdeviceptr>(out.data()), reinterpret_cast<CUdeviceptr>(src),
                            count * sizeof(float), stream));
  CU_CHECK(g_cu.StreamSynchronize(stream));
  return out;
}

// Index of the first element where got differs from want(i), or -1.
template <typename F>
long FirstWrong(const std::vector<float>& got, F want) {
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want(i)) return static_cast<long>(i);
  }
  return -1;
}

struct Ranks {
  int nranks = 0;  // in the communicator
  int base = 0;    // global rank of local rank 0
  std::vector<ncclComm_t> comms;
  std::vector<CUstream> streams;
  int local() const { return static_cast<int>(comms.size()); }
};

void Init(Ranks* r, int nranks, int base, int local, const ncclUniqueId& id) {
  r->nranks = nranks;
  r->base = base;
  r->comms.assign(local, nullptr);
  r->streams.assign(local, nullptr);
  for (int i = 0; i < local; ++i) CU_CHECK(g_cu.StreamCreate(&r->streams[i], kStreamNonBlocking));
  NCCL_CHECK(ncclGroupStart());
  for (int i = 0; i < local; ++i) NCCL_CHECK(ncclCommInitRank(&r->comms[i], nranks, id, base + i));
  NCCL_CHECK(ncclGroupEnd());
}

// `nranks` ranks of a new communicator, all in this process.
Ranks AllHere(int nranks) {
  ncclUniqueId id;
  NCCL_CHECK(ncclGetUniqueId(&id));
  Ranks r;
  Init(&r, nranks, 0, nranks, id);
  return r;
}

constexpr size_t kCount = 1001;  // odd: the kernels' element tail, not only whole vectors
constexpr uint32_t kComputeMs = 150;

// Each local rank's send buffer filled with b + (global rank + 1) + i by a slow kernel;
// returns b, different for every call so a collective that read the inputs before the
// kernel finished would find the previous call's values and fail.
float FillSends(const Ranks& r, const std::vector<float*>& send, size_t count) {
  static int round = 0;
  const float b = static_cast<float>(1000 * ++round);
  for (int i = 0; i < r.local(); ++i) Fill(send[i], count, b + static_cast<float>(r.base + i + 1), kComputeMs, r.streams[i]);
  return b;
}

float RankSum(int nranks) { return static_cast<float>(nranks * (nranks + 1) / 2); }

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// Whether `stream` has nothing left to run by limit_ms after `since` (polled).
bool IdleBy(CUstream stream, Clock::time_point since, double limit_ms) {
  while (g_cu.StreamQuery(stream) == kErrorNotReady && MsSince(since) < limit_ms) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return g_cu.StreamQuery(stream) != kErrorNotReady;
}

// Whether calls are expected to return once conduitd has queued them (the default), not
// once it has run them (CONDUIT_DEVICE_SYNC=events).
bool AsyncExpected() {
  const char* sync = std::getenv("CONDUIT_DEVICE_SYNC");
  return sync == nullptr || std::strcmp(sync, "events") != 0;
}

// How an all-reduce's calls went: how long they took, and whether every stream was still
// computing the inputs (the slow fill kernel) when they had all returned.
struct CallsReturned {
  double ms = 0;
  bool inputs_computing = false;
};

// An event on each of r's streams after the work queued so far (the fills of the inputs).
std::vector<CUevent> MarkInputs(const Ranks& r) {
  std::vector<CUevent> filled(r.local());
  for (int i = 0; i < r.local(); ++i) {
    CU_CHECK(g_cu.EventCreate(&filled[i], kEventDisableTiming));
    CU_CHECK(g_cu.EventRecord(filled[i], r.streams[i]));
  }
  return filled;
}

// True when no stream has reached its mark yet: every input is still being computed.
// (A stream that is merely busy is not enough: after a call that blocked until its inputs
// existed, the stream would still hold the wait for the collective's result.)
bool InputsComputing(const std::vector<CUevent>& filled) {
  bool computing = true;
  for (CUevent e : filled) {
    computing = computing && g_cu.EventQuery(e) == kErrorNotReady;
    CU_CHECK(g_cu.EventDestroy(e));
  }
  return computing;
}

CallsReturned AllReduceSum(const Ranks& r, const std::vector<float*>& send, const std::vector<float*>& recv,
                           const char* label) {
  const float b = FillSends(r, send, kCount);
  const std::vector<CUevent> filled = MarkInputs(r);
  const Clock::time_point start = Clock::now();
  NCCL_CHECK(ncclGroupStart());
  for (int i = 0; i < r.local(); ++i) {
    NCCL_CHECK(ncclAllReduce(send[i], recv[i], kCount, ncclFloat32, ncclSum, r.comms[i], Nccl(r.streams[i])));
  }
  NCCL_CHECK(ncclGroupEnd());
  CallsReturned returned;
  returned.ms = MsSince(start);
  returned.inputs_computing = InputsComputing(filled);
  for (int i = 0; i < r.local(); ++i) {
    const long wrong = FirstWrong(Read(recv[i], kCount, r.streams[i]), [&](size_t e) {
      return r.nranks * b + RankSum(r.nranks) + r.nranks * static_cast<float>(e);
    });
    Check(wrong < 0, std::string(label) + " rank " + std::to_string(r.base + i) +
                         (wrong < 0 ? "" : " (first wrong element " + std::to_string(wrong) + ")"));
  }
  return returned;
}

void AllGather(const Ranks& r, const std::vector<float*>& send, const std::vector<float*>& recv) {
  const float b = FillSends(r, send, kCount);
  NCCL_CHECK(ncclGroupStart());
  for (int i = 0; i < r.local(); ++i) NCCL_CHECK(ncclAllGather(send[i], recv[i], kCount, ncclFloat32, r.comms[i], Nccl(r.streams[i])));
  NCCL_CHECK(ncclGroupEnd());
  for (int i = 0; i < r.local(); ++i) {
    const long wrong = FirstWrong(Read(recv[i], kCount * r.nranks, r.streams[i]), [&](size_t e) {
      return b + static_cast<float>(e / kCount + 1) + static_cast<float>(e % kCount);
    });
    Check(wrong < 0, "all-gather rank " + std::to_string(r.base + i));
  }
}

// Every other collective, on this process's ranks (all of them, or those of one host).
void OtherCollectives(const Ranks& r, const std::vector<float*>& send, const std::vector<float*>& recv) {
  const int n = r.nranks;
  auto rank = [&](int i) { return std::to_string(r.base + i); };
  // Average.
  float b = FillSends(r, send, kCount);
  NCCL_CHECK(ncclGroupStart());
  for (int i = 0; i < r.local(); ++i) NCCL_CHECK(ncclAllReduce(send[i], recv[i], kCount, ncclFloat32, ncclAvg, r.comms[i], Nccl(r.streams[i])));
  NCCL_CHECK(ncclGroupEnd());
  for (int i = 0; i < r.local(); ++i) {
    Check(FirstWrong(Read(recv[i], kCount, r.streams[i]), [&](size_t e) { return b + RankSum(n) / n + e; }) < 0,
          "all-reduce avg rank " + rank(i));
  }
  // Reduce-scatter: send holds n * c elements, rank g gets sum over h of send_h[g*c + e].
  const size_t c = kCount / n;
  b = FillSends(r, send, c * n);
  NCCL_CHECK(ncclGroupStart());
  for (int i = 0; i < r.local(); ++i) NCCL_CHECK(ncclReduceScatter(send[i], recv[i], c, ncclFloat32, ncclSum, r.comms[i], Nccl(r.streams[i])));
  NCCL_CHECK(ncclGroupEnd());
  for (int i = 0; i < r.local(); ++i) {
    const float g = static_cast<float>(r.base + i);
    Check(FirstWrong(Read(recv[i], c, r.streams[i]), [&](size_t e) { return n * b + RankSum(n) + n * (g * c + e); }) < 0,
          "reduce-scatter rank " + rank(i));
  }
  // Broadcast from the last rank and reduce to rank 0.
  const int root = n - 1;
  b = FillSends(r, send, kCount);
  NCCL_CHECK(ncclGroupStart());
  for (int i = 0; i < r.local(); ++i) NCCL_CHECK(ncclBroadcast(send[i], recv[i], kCount, ncclFloat32, root, r.comms[i], Nccl(r.streams[i])));
  NCCL_CHECK(ncclGroupEnd());
  for (int i = 0; i < r.local(); ++i) {
    Check(FirstWrong(Read(recv[i], kCount, r.streams[i]), [&](size_t e) { return b + static_cast<float>(root + 1) + e; }) < 0,
          "broadcast from rank " + std::to_string(root) + ", rank " + rank(i));
  }
  b = FillSends(r, send, kCount);
  NCCL_CHECK(ncclGroupStart());
  for (int i = 0; i < r.local(); ++i) NCCL_CHECK(ncclReduce(send[i], recv[i], kCount, ncclFloat32, ncclSum, 0, r.comms[i], Nccl(r.streams[i])));
  NCCL_CHECK(ncclGroupEnd());
  if (r.base == 0) {
    Check(FirstWrong(Read(recv[0], kCount, r.streams[0]),
                     [&](size_t e) { return n * b + RankSum(n) + n * static_cast<float>(e); }) < 0,
          "reduce to rank 0");
  }
}

// PreMulSum with each rank's factor in device memory (ncclScalarDevice), written by a kernel
// still running when the call is made: the factor that counts is the one the stream holds
// when it reaches the collective, as NCCL's kernel reads it.
void PreMulSumDeviceFactor(const Ranks& r, const std::vector<float*>& send, const std::vector<float*>& recv) {
  std::vector<float*> factor(r.local());
  std::vector<ncclRedOp_t> ops(r.local());
  for (int i = 0; i < r.local(); ++i) {
    factor[i] = DeviceFloats(1);
    Fill(factor[i], 1, 1.0f, 0, r.streams[i]);  // an old value, replaced below
    NCCL_CHECK(ncclRedOpCreatePreMulSum(&ops[i], factor[i], ncclFloat32, ncclScalarDevice, r.comms[i]));
  }
  const float b = FillSends(r, send, kCount);
  for (int i = 0; i < r.local(); ++i) Fill(factor[i], 1, static_cast<float>(r.base + i + 2), kComputeMs, r.streams[i]);
  NCCL_CHECK(ncclGroupStart());
  for (int i = 0; i < r.local(); ++i) {
    NCCL_CHECK(ncclAllReduce(send[i], recv[i], kCount, ncclFloat32, ops[i], r.comms[i], Nccl(r.streams[i])));
  }
  NCCL_CHECK(ncclGroupEnd());
  for (int i = 0; i < r.local(); ++i) {
    const long wrong = FirstWrong(Read(recv[i], kCount, r.streams[i]), [&](size_t e) {
      float sum = 0;  // in rank order, as the reduction runs
      for (int g = 0; g < r.nranks; ++g) sum += static_cast<float>(g + 2) * (b + static_cast<float>(g + 1) + e);
      return sum;
    });
    Check(wrong < 0, "PreMulSum with the factor on the device, rank " + std::to_string(r.base + i));
    NCCL_CHECK(ncclRedOpDestroy(ops[i], r.comms[i]));
    CU_CHECK(g_cu.MemFree(reinterpret_cast<CUdeviceptr>(factor[i])));
  }
}

// The program's compute runs on another stream; the collective's stream waits for it
// through an event, so the daemon must wait for that other stream's kernel too.
void AcrossStreams(const Ranks& r, const std::vector<float*>& send, const std::vector<float*>& recv) {
  std::vector<CUstream> compute(r.local());
  std::vector<CUevent> done(r.local());
  for (int i = 0; i < r.local(); ++i) {
    CU_CHECK(g_cu.StreamCreate(&compute[i], kStreamNonBlocking));
    CU_CHECK(g_cu.EventCreate(&done[i], kEventDisableTiming));
    // The compute stream writes send[i] only after the collectives before have read it.
    CU_CHECK(g_cu.EventRecord(done[i], r.streams[i]));
    CU_CHECK(g_cu.StreamWaitEvent(compute[i], done[i], 0));
    Fill(send[i], kCount, 500.0f + static_cast<float>(r.base + i + 1), kComputeMs, compute[i]);
    CU_CHECK(g_cu.EventRecord(done[i], compute[i]));
    CU_CHECK(g_cu.StreamWaitEvent(r.streams[i], done[i], 0));
  }
  NCCL_CHECK(ncclGroupStart());
  for (int i = 0; i < r.local(); ++i) {
    NCCL_CHECK(ncclAllReduce(send[i], recv[i], kCount, ncclFloat32, ncclSum, r.comms[i], Nccl(r.streams[i])));
  }
  NCCL_CHECK(ncclGroupEnd());
  for (int i = 0; i < r.local(); ++i) {
    Check(FirstWrong(Read(recv[i], kCount, r.streams[i]),
                     [&](size_t e) { return r.nranks * 500.0f + RankSum(r.nranks) + r.nranks * static_cast<float>(e); }) < 0,
          "all-reduce after compute on another stream, rank " + std::to_string(r.base + i));
    CU_CHECK(g_cu.EventDestroy(done[i]));
    CU_CHECK(g_cu.StreamDestroy(compute[i]));
  }
}

int Local(int nranks) {
  Ranks r = AllHere(nranks);
  std::vector<float*> send(nranks), recv(nranks);
  for (int i = 0; i < nranks; ++i) {
    recv[i] = DeviceFloats(kCount * nranks);
    if (i == nranks - 1) {
      // ncclMemAlloc must give device memory (nccl-tests and PyTorch's allocator hooks
      // run kernels on it).
      void* p = nullptr;
      NCCL_CHECK(ncclMemAlloc(&p, kCount * nranks * sizeof(float)));
      unsigned type = 0;
      CU_CHECK(g_cu.PointerGetAttribute(&type, kPointerAttributeMemoryType, reinterpret_cast<CUdeviceptr>(p)));
      Check(type == kMemoryTypeDevice, "ncclMemAlloc returns device memory");
      send[i] = static_cast<float*>(p);
    } else {
      send[i] = DeviceFloats(kCount * nranks);
    }
  }
  AllReduceSum(r, send, recv, "all-reduce sum");
  AllGather(r, send, recv);
  OtherCollectives(r, send, recv);
  PreMulSumDeviceFactor(r, send, recv);
  AcrossStreams(r, send, recv);
  // Freed and allocated again (the same address, as CUDA's allocator often gives): the
  // daemon must not keep using its mapping of the freed allocation.
  int same = 0;
  for (int i = 0; i + 1 < nranks; ++i) {
    const float* old = send[i];
    CU_CHECK(g_cu.MemFree(reinterpret_cast<CUdeviceptr>(send[i])));
    send[i] = DeviceFloats(kCount * nranks);
    same += send[i] == old;
  }
  std::printf("device_probe: %d of %d re-allocations came back at the same address\n", same, nranks - 1);
  AllReduceSum(r, send, recv, "all-reduce sum after free and re-allocation");
  for (int i = 0; i < nranks; ++i) NCCL_CHECK(ncclCommDestroy(r.comms[i]));
  return g_failures == 0 ? 0 : 1;
}

// A reservation with `chunks` virtual-memory allocations of the granularity mapped back to
// back, as PyTorch's expandable segments are; `exportable`: created for POSIX descriptors
// (the first `exportable_pages` of them when that is not -1).
struct Segment {
  CUdeviceptr base = 0;
  size_t chunk = 0;
  int chunks = 0;
};

Segment MapSegment(int chunks, bool exportable, int exportable_pages = -1) {
  Segment seg;
  MemAllocationProp prop{};
  prop.type = kMemAllocationTypePinned;
  prop.requested_handle_types = exportable ? kMemHandleTypePosixFileDescriptor : 0;
  prop.location = {kMemLocationTypeDevice, 0};
  CU_CHECK(g_cu.MemGetAllocationGranularity(&seg.chunk, &prop, kMemAllocGranularityMinimum));
  seg.chunks = chunks;
  CU_CHECK(g_cu.MemAddressReserve(&seg.base, seg.chunk * chunks, 0, 0, 0));
  for (int i = 0; i < chunks; ++i) {
    if (i == exportable_pages) prop.requested_handle_types = 0;
    CUmemGenericAllocationHandle h = 0;
    CU_CHECK(g_cu.MemCreate(&h, seg.chunk, &prop, 0));
    CU_CHECK(g_cu.MemMap(seg.base + i * seg.chunk, seg.chunk, 0, h, 0));
    CU_CHECK(g_cu.MemRelease(h));  // the mapping keeps it
  }
  MemAccessDesc access{};
  access.location = prop.location;
  access.flags = kMemAccessFlagsProtReadWrite;
  CU_CHECK(g_cu.MemSetAccess(seg.base, seg.chunk * chunks, &access, 1));
  return seg;
}

void UnmapSegment(const Segment& seg) {
  for (int i = 0; i < seg.chunks; ++i) CU_CHECK(g_cu.MemUnmap(seg.base + i * seg.chunk, seg.chunk));
  CU_CHECK(g_cu.MemAddressFree(seg.base, seg.chunk * seg.chunks));
}

float* At(const Segment& seg, size_t offset) { return reinterpret_cast<float*>(seg.base + offset); }

// All-reduces on the same device buffers of `nranks` local ranks, back to back (each input
// filled by a short kernel, each result read back and checked), until `stop_file` exists:
// conduitd may be replaced meanwhile (a live upgrade), which the program must not notice.
// With `vmm`, the inputs are virtual-memory-managed allocations across two pages (conduitd
// maps the pages from file descriptors, and a span of both) and the outputs ordinary ones
// (CUDA IPC): a live upgrade moves all of them.
int Loop(int nranks, const std::string& stop_file, bool vmm) {
  Ranks r = AllHere(nranks);
  std::vector<float*> send(nranks), recv(nranks);
  for (int i = 0; i < nranks; ++i) {
    // Across two pages: conduitd maps both and the span of them, and a live upgrade moves all three.
    if (vmm) {
      const Segment seg = MapSegment(2, true);
      send[i] = At(seg, seg.chunk - 2000);
    } else {
      send[i] = DeviceFloats(kCount);
    }
    recv[i] = DeviceFloats(kCount);
  }
  long iterations = 0, wrong = 0;
  const Clock::time_point start = Clock::now();
  while (::access(stop_file.c_str(), F_OK) != 0 && MsSince(start) < 120000) {
    const float b = static_cast<float>(iterations % 1000);
    for (int i = 0; i < nranks; ++i) Fill(send[i], kCount, b + static_cast<float>(i + 1), 1, r.streams[i]);
    NCCL_CHECK(ncclGroupStart());
    for (int i = 0; i < nranks; ++i) {
      NCCL_CHECK(ncclAllReduce(send[i], recv[i], kCount, ncclFloat32, ncclSum, r.comms[i], Nccl(r.streams[i])));
    }
    NCCL_CHECK(ncclGroupEnd());
    for (int i = 0; i < nranks; ++i) {
      const long bad = FirstWrong(Read(recv[i], kCount, r.streams[i]), [&](size_t e) {
        return nranks * b + RankSum(nranks) + nranks * static_cast<float>(e);
      });
      if (bad >= 0 && wrong++ < 5) std::printf("device_probe: iteration %ld rank %d: element %ld wrong\n", iterations, i, bad);
    }
    if (++iterations == 1) {
      std::printf("device_probe: loop running\n");
      std::fflush(stdout);
    }
  }
  ncclResult_t async = ncclSuccess;
  for (int i = 0; i < nranks; ++i) {
    NCCL_CHECK(ncclCommGetAsyncError(r.comms[i], &async));
    Check(async == ncclSuccess, "no asynchronous error on rank " + std::to_string(i));
  }
  for (int i = 0; i < nranks; ++i) NCCL_CHECK(ncclCommDestroy(r.comms[i]));
  Check(iterations > 0 && wrong == 0,
        std::to_string(iterations) + " all-reduces in a loop, " + std::to_string(wrong) + " wrong results");
  return g_failures == 0 ? 0 : 1;
}

// Every rank sends its input to the next rank and receives the previous one's, in one
// group, while its input is still being computed (the pattern of pipeline parallelism).
void Ring(const Ranks& r, const std::vector<float*>& send, const std::vector<float*>& recv, const std::string& where) {
  const float b = FillSends(r, send, kCount);
  const std::vector<CUevent> filled = MarkInputs(r);
  const Clock::time_point start = Clock::now();
  NCCL_CHECK(ncclGroupStart());
  for (int i = 0; i < r.local(); ++i) {
    const int me = r.base + i;
    NCCL_CHECK(ncclSend(send[i], kCount, ncclFloat32, (me + 1) % r.nranks, r.comms[i], Nccl(r.streams[i])));
    NCCL_CHECK(ncclRecv(recv[i], kCount, ncclFloat32, (me + r.nranks - 1) % r.nranks, r.comms[i], Nccl(r.streams[i])));
  }
  NCCL_CHECK(ncclGroupEnd());
  const double call_ms = MsSince(start);
  // Returned before the inputs existed: every stream is still running the slow kernel that
  // computes them. Asked of the streams (an event after each fill) rather than of a share
  // of kComputeMs, which a loaded 2-core CI machine once took 99 ms of on the first ring
  // (2026-12-06).
  const bool computing = InputsComputing(filled);
  std::printf("device_probe: the send/recv calls %s returned after %.1f ms (inputs ready after %u ms)%s\n",
              where.c_str(), call_ms, kComputeMs, computing ? ", inputs still being computed" : "");
  if (AsyncExpected()) Check(computing, "send/recv " + where + " returned before their inputs existed");
  for (int i = 0; i < r.local(); ++i) {
    const int from = (r.base + i + r.nranks - 1) % r.nranks;
    auto want = [&](size_t e) { return b + static_cast<float>(from + 1) + static_cast<float>(e); };
    const std::vector<float> got = Read(recv[i], kCount, r.streams[i]);
    const long wrong = FirstWrong(got, want);
    Check(wrong < 0, "send/recv ring " + where + ", rank " + std::to_string(r.base + i) +
                         (wrong < 0 ? ""
                                    : " (element " + std::to_string(wrong) + " is " + std::to_string(got[wrong]) +
                                          ", not " + std::to_string(want(wrong)) + ")"));
  }
}

// ncclAlltoAll (a group of sends and receives to every rank, itself included): block j of
// rank i's input lands as block i of rank j's output.
void AlltoAll(const Ranks& r, const std::vector<float*>& send, const std::vector<float*>& recv) {
  auto first = [](int rank) { return 100000.0f * static_cast<float>(rank + 1); };
  for (int i = 0; i < r.local(); ++i) Fill(send[i], kCount * r.nranks, first(r.base + i), kComputeMs, r.streams[i]);
  NCCL_CHECK(ncclGroupStart());
  for (int i = 0; i < r.local(); ++i) {
    NCCL_CHECK(ncclAlltoAll(send[i], recv[i], kCount, ncclFloat32, r.comms[i], Nccl(r.streams[i])));
  }
  NCCL_CHECK(ncclGroupEnd());
  for (int j = 0; j < r.local(); ++j) {
    const int me = r.base + j;
    const long wrong = FirstWrong(Read(recv[j], kCount * r.nranks, r.streams[j]), [&](size_t e) {
      const size_t from = e / kCount;
      return first(static_cast<int>(from)) + static_cast<float>(static_cast<size_t>(me) * kCount + e % kCount);
    });
    Check(wrong < 0, "all-to-all, rank " + std::to_string(me) +
                         (wrong < 0 ? "" : " (first wrong element " + std::to_string(wrong) + ")"));
  }
}

// Keeps the communicators until the test releases them, at most `linger_ms` (a test reads
// conduitd's view of them meanwhile).
void Linger(int linger_ms, const std::string& release_file) {
  if (linger_ms <= 0) return;
  std::printf("device_probe: lingering (at most %d ms)\n", linger_ms);
  std::fflush(stdout);
  conduit::it::LingerUntilReleased(linger_ms, release_file);
}

int P2p(int nranks, int linger_ms, const std::string& release_file) {
  Ranks r = AllHere(nranks);
  std::vector<float*> send(nranks), recv(nranks);
  for (int i = 0; i < nranks; ++i) {
    send[i] = DeviceFloats(kCount * nranks);
    recv[i] = DeviceFloats(kCount * nranks);
  }
  // The first call on new buffers maps them in conduitd, a round trip per allocation: six
  // of them under ThreadSanitizer took 33-41 ms of the 75 ms Ring allows (beside two busy
  // loops on a 2-core machine), and passed it on CI. Mapping is not what Ring times.
  AllReduceSum(r, send, recv, "first all-reduce sum, mapping the buffers");
  Ring(r, send, recv, "on one host");
  AlltoAll(r, send, recv);
  // A collective after point-to-point groups on the same streams, and the ring again.
  AllReduceSum(r, send, recv, "all-reduce after point-to-point");
  Ring(r, send, recv, "after a collective");
  // The ring in place: each rank receives into the buffer it sends from, so conduitd takes
  // it through host memory (a receive must not overwrite bytes a peer has yet to read).
  Ring(r, send, send, "in place");
  Linger(linger_ms, release_file);
  for (int i = 0; i < nranks; ++i) NCCL_CHECK(ncclCommDestroy(r.comms[i]));
  return g_failures == 0 ? 0 : 1;
}

// Broadcasts in place (sendbuff == recvbuff at every rank, as torch.distributed.broadcast
// calls it) from each rank in turn, each result checked. Before each one it writes
// "broadcast root K" into the double's copy log ($CONDUIT_CUDA_DOUBLE_COPY_LOG), so a test
// can count the copies each broadcast cost the program.
void MarkCopyLog(const std::string& line) {
  const char* path = std::getenv("CONDUIT_CUDA_DOUBLE_COPY_LOG");
  if (path == nullptr) return;
  std::ofstream(path, std::ios::app) << line << "\n";
}

int BroadcastInPlace(int nranks) {
  Ranks r = AllHere(nranks);
  std::vector<float*> buf(nranks), recv(nranks);
  for (int i = 0; i < nranks; ++i) {
    buf[i] = DeviceFloats(kCount);
    recv[i] = DeviceFloats(kCount);
  }
  // The first group's reply tells the shim what this daemon counts (kReplyCountsInPlaceRoot).
  AllReduceSum(r, buf, recv, "all-reduce sum before the broadcasts");
  for (int root = 0; root < nranks; ++root) {
    const float b = FillSends(r, buf, kCount);
    for (int i = 0; i < nranks; ++i) CU_CHECK(g_cu.StreamSynchronize(r.streams[i]));  // the fills are no copies
    MarkCopyLog("broadcast root " + std::to_string(root));
    NCCL_CHECK(ncclGroupStart());
    for (int i = 0; i < nranks; ++i) {
      NCCL_CHECK(ncclBroadcast(buf[i], buf[i], kCount, ncclFloat32, root, r.comms[i], Nccl(r.streams[i])));
    }
    NCCL_CHECK(ncclGroupEnd());
    for (int i = 0; i < nranks; ++i) CU_CHECK(g_cu.StreamSynchronize(r.streams[i]));
    MarkCopyLog("checking");
    for (int i = 0; i < nranks; ++i) {
      Check(FirstWrong(Read(buf[i], kCount, r.streams[i]), [&](size_t e) { return b + static_cast<float>(root + 1) + e; }) < 0,
            "broadcast in place from rank " + std::to_string(root) + ", rank " + std::to_string(i));
    }
  }
  for (int i = 0; i < nranks; ++i) NCCL_CHECK(ncclCommDestroy(r.comms[i]));
  return g_failures == 0 ? 0 : 1;
}

int Hosts(int nranks, int base, int local, const std::string& id_file, int linger_ms,
          const std::string& release_file) {
  ncclUniqueId id;
  if (base == 0) {
    NCCL_CHECK(ncclGetUniqueId(&id));
    if (!conduit::it::WriteIdFile(id_file, id)) return 2;
  } else if (!conduit::it::ReadIdFile(id_file, 60, &id)) {
    std::printf("device_probe: no id in %s\n", id_file.c_str());
    return 2;
  }
  Ranks r;
  Init(&r, nranks, base, local, id);
  std::vector<float*> send(local), recv(local);
  for (int i = 0; i < local; ++i) {
    send[i] = DeviceFloats(kCount);
    recv[i] = DeviceFloats(kCount * nranks);
  }
  // The first call on new buffers maps them in conduitd (a round trip per allocation, slow
  // on a loaded CI machine): not what is timed below.
  AllReduceSum(r, send, recv, "first all-reduce sum across hosts");
  // The inputs are still being computed (150 ms) when the calls are made; across hosts the
  // data must then cross the network. Calls that return once conduitd has queued them
  // return while every stream still computes its input (asked of the streams, as the
  // ring's calls are, not of a share of the 150 ms).
  const CallsReturned calls = AllReduceSum(r, send, recv, "all-reduce sum across hosts");
  std::printf("device_probe: the all-reduce calls across hosts returned after %.1f ms (inputs ready after %u ms)%s\n",
              calls.ms, kComputeMs, calls.inputs_computing ? ", inputs still being computed" : "");
  if (AsyncExpected()) Check(calls.inputs_computing, "the calls returned before the GPU work they wait for");
  AllGather(r, send, recv);
  OtherCollectives(r, send, recv);
  Ring(r, send, recv, "across hosts");
  Linger(linger_ms, release_file);  // the communicators stay, so a test can read conduitd's trace of them
  for (int i = 0; i < local; ++i) NCCL_CHECK(ncclCommDestroy(r.comms[i]));
  return g_failures == 0 ? 0 : 1;
}

// Rank 0's all-reduce is accepted (the call returns), then rank 1 is aborted: the group
// fails inside conduitd. The failure must reach the program through ncclCommGetAsyncError,
// and rank 0's stream must not wait forever for the result.
int AsyncError() {
  Ranks r = AllHere(2);
  ncclComm_t* comms = r.comms.data();
  CUstream stream = r.streams[0];
  float* buf = DeviceFloats(kCount);
  Fill(buf, kCount, 1, 0, stream);
  const ncclResult_t called = ncclAllReduce(buf, buf, kCount, ncclFloat32, ncclSum, comms[0], Nccl(stream));
  ncclResult_t before = ncclInProgress;
  ncclCommGetAsyncError(comms[0], &before);
  NCCL_CHECK(ncclCommAbort(comms[1]));
  const Clock::time_point start = Clock::now();
  ncclResult_t state = ncclSuccess;
  while (MsSince(start) < 10000) {
    ncclCommGetAsyncError(comms[0], &state);
    if (state != ncclSuccess) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const double error_ms = MsSince(start);
  const std::string text = ncclGetLastError(comms[0]);
  const bool stream_idle = IdleBy(stream, start, 30000);
  std::printf("device_probe: async error: the call returned %d, then ncclCommGetAsyncError %d; after rank 1's abort "
              "%d within %.0f ms (\"%s\"); stream %s\n",
              static_cast<int>(called), static_cast<int>(before), static_cast<int>(state), error_ms, text.c_str(),
              stream_idle ? "idle" : "still waiting");
  Check(called == ncclSuccess && before == ncclSuccess, "the all-reduce call returned once accepted");
  Check(state != ncclSuccess && state != ncclInProgress && error_ms < 5000,
        "ncclCommGetAsyncError reports the failure of the accepted group");
  Check(text.find("accepted") != std::string::npos, "ncclGetLastError says an accepted collective failed");
  Check(stream_idle, "the stream is released after the failure");
  ncclCommAbort(comms[0]);
  return g_failures == 0 ? 0 : 1;
}

// Two ranks in this process; rank 0's all-reduce is accepted and waits in conduitd for
// rank 1, which never calls. Rank 0 then gives up on rank 1 and shrinks to itself: with
// ncclCommRevoke first and a plain shrink, or with NCCL_SHRINK_ABORT alone. Either way
// the parent's operation must stop (the stream released), the parent must refuse new
// operations, and the child must work.
bool RevokeAndShrink(bool shrink_abort) {
  const char* how = shrink_abort ? "NCCL_SHRINK_ABORT" : "ncclCommRevoke";
  Ranks r = AllHere(2);
  ncclComm_t* comms = r.comms.data();
  CUstream stream = r.streams[0];
  float* buf = DeviceFloats(kCount);
  Fill(buf, kCount, 1, 0, stream);
  NCCL_CHECK(ncclAllReduce(buf, buf, kCount, ncclFloat32, ncclSum, comms[0], Nccl(stream)));
  const Clock::time_point start = Clock::now();
  ncclComm_t child = nullptr;
  int exclude[] = {1};
  ncclResult_t revoked = ncclSuccess, state = ncclInProgress, refused = ncclSuccess;
  if (!shrink_abort) {
    revoked = ncclCommRevoke(comms[0], NCCL_REVOKE_DEFAULT);
    ncclCommGetAsyncError(comms[0], &state);
    refused = ncclAllReduce(buf, buf, kCount, ncclFloat32, ncclSum, comms[0], Nccl(stream));
  }
  const ncclResult_t shrunk =
      ncclCommShrink(comms[0], exclude, 1, &child, nullptr, shrink_abort ? NCCL_SHRINK_ABORT : NCCL_SHRINK_DEFAULT);
  const double ms = MsSince(start);
  const bool idle = IdleBy(stream, start, 30000);
  std::printf("device_probe: %s: revoke %d, state after %d, a new all-reduce %d, shrink %d, in %.0f ms; stream %s\n", how,
              static_cast<int>(revoked), static_cast<int>(state), static_cast<int>(refused), static_cast<int>(shrunk), ms,
              idle ? "idle" : "still waiting");
  bool ok = revoked == ncclSuccess && shrunk == ncclSuccess && child != nullptr && ms < 5000 && idle;
  if (!shrink_abort) ok = ok && state == ncclSuccess && refused == ncclInvalidUsage;
  if (ok) {
    int n = 0;
    ncclCommCount(child, &n);
    Fill(buf, kCount, 7, 0, stream);
    ok = n == 1 && ncclAllReduce(buf, buf, kCount, ncclFloat32, ncclSum, child, Nccl(stream)) == ncclSuccess &&
         FirstWrong(Read(buf, kCount, stream), [](size_t e) { return 7.0f + e; }) < 0;
    ncclCommDestroy(child);
  }
  ncclCommAbort(comms[1]);
  ncclCommDestroy(comms[0]);
  return ok;
}

// A host-memory all-reduce waits in the call on another thread (for a rank that never
// calls): ncclCommRevoke must end that call promptly too.
bool RevokeEndsAWaitingCall() {
  Ranks r = AllHere(2);
  ncclComm_t* comms = r.comms.data();
  std::vector<float> host(kCount, 1.0f);
  std::atomic<int> result{-1};
  std::atomic<double> call_ms{-1};
  const Clock::time_point start = Clock::now();
  std::thread caller([&] {
    result = ncclAllReduce(host.data(), host.data(), kCount, ncclFloat32, ncclSum, comms[0], nullptr);
    call_ms = MsSince(start);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const ncclResult_t revoked = ncclCommRevoke(comms[0], NCCL_REVOKE_DEFAULT);
  caller.join();
  ncclResult_t state = ncclInProgress;
  ncclCommGetAsyncError(comms[0], &state);
  // The revoke shut the parent's connection down to end the call: the shrink that follows
  // (what a program does next, without the rank that never called) must still work.
  ncclComm_t child = nullptr;
  int exclude[] = {1};
  const ncclResult_t shrunk = ncclCommShrink(comms[0], exclude, 1, &child, nullptr, NCCL_SHRINK_DEFAULT);
  bool child_works = false;
  if (shrunk == ncclSuccess && child != nullptr) {
    std::vector<float> data(kCount, 3.0f);
    child_works = ncclAllReduce(data.data(), data.data(), kCount, ncclFloat32, ncclSum, child, nullptr) == ncclSuccess &&
                  data[0] == 3.0f && data[kCount - 1] == 3.0f;
    ncclCommDestroy(child);
  }
  std::printf("device_probe: revoke during a waiting call: revoke %d, state %d; the call returned %d after %.0f ms; "
              "shrink %d (%s)\n",
              static_cast<int>(revoked), static_cast<int>(state), result.load(), call_ms.load(), static_cast<int>(shrunk),
              shrunk == ncclSuccess ? ncclGetErrorString(shrunk) : ncclGetLastError(nullptr));
  ncclCommAbort(comms[1]);
  ncclCommDestroy(comms[0]);
  return revoked == ncclSuccess && state == ncclSuccess && result != ncclSuccess && result != -1 && call_ms < 5300 &&
         child_works;
}

int Revoke() {
  Check(RevokeAndShrink(false), "ncclCommRevoke stops the in-flight all-reduce; shrink without the failed rank works");
  Check(RevokeAndShrink(true), "ncclCommShrink with NCCL_SHRINK_ABORT stops it and shrinks");
  Check(RevokeEndsAWaitingCall(), "ncclCommRevoke ends a call waiting on another thread; shrink works after it");
  return g_failures == 0 ? 0 : 1;
}

// Two ranks' all-reduces are accepted while their inputs are still being computed, and the
// process ends at once, without destroying anything: conduitd must neither crash (its
// kernel would run on mappings it closed) nor keep its stream waiting for a ready word the
// dead program's stream will never write.
int Vanish() {
  Ranks r = AllHere(2);
  std::vector<float*> send = {DeviceFloats(kCount), DeviceFloats(kCount)};
  for (int i = 0; i < 2; ++i) Fill(send[i], kCount, 1, 2 * kComputeMs, r.streams[i]);
  NCCL_CHECK(ncclGroupStart());
  for (int i = 0; i < 2; ++i) NCCL_CHECK(ncclAllReduce(send[i], send[i], kCount, ncclFloat32, ncclSum, r.comms[i], Nccl(r.streams[i])));
  NCCL_CHECK(ncclGroupEnd());
  std::printf("device_probe: vanishing with two accepted all-reduces\n");
  std::fflush(stdout);
  _exit(0);
}

// The names of the double's device memory in /proc/<pid>/maps: ordinary allocations, and
// virtual-memory-managed ones.
constexpr const char* kDeviceMappingName = "cuda-double-device";
constexpr const char* kVmmMappingName = "cuda-double-vmm";

// How many of conduitd's mappings are of the double's device memory (two per opened
// allocation; `kind` kVmmMappingName for virtual-memory-managed ones), read from /proc of
// the daemon that answers on $CONDUIT_SOCKET.
int DaemonDeviceMappings(const char* kind = kDeviceMappingName) {
  g_stage.store("DaemonDeviceMappings");
  const char* path = std::getenv("CONDUIT_SOCKET");
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path != nullptr ? path : "", sizeof(addr.sun_path) - 1);
  ucred cred{};
  socklen_t len = sizeof(cred);
  const bool ok = fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                  getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0;
  if (fd >= 0) close(fd);
  if (!ok) return -1;
  std::ifstream maps("/proc/" + std::to_string(cred.pid) + "/maps");
  int n = 0;
  for (std::string line; std::getline(maps, line);) n += line.find(kind) != std::string::npos;
  return n;
}

// conduitd's mappings of virtual-memory allocations once they are `want` or 5 s have
// passed: conduitd unmaps them on a thread of its own (cuMemUnmap may wait for the GPU),
// soon after the release that drops them, not within it.
int DaemonVmmMappingsSettle(int want) {
  int now = DaemonDeviceMappings(kVmmMappingName);
  for (const Clock::time_point start = Clock::now(); now != want && MsSince(start) < 5000;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    now = DaemonDeviceMappings(kVmmMappingName);
  }
  return now;
}

// ncclCommRegister and ncclCommWindowRegister of device buffers map them in conduitd at
// once (two mappings per allocation in the double), before any collective; host memory
// registers without a mapping; collectives on them are right; deregistration works and a
// handle that is not one is refused.
int Register() {
  Ranks r = AllHere(1);
  float* a = DeviceFloats(kCount);
  float* b = DeviceFloats(kCount);
  float* c = DeviceFloats(kCount);
  std::vector<float> host(kCount);
  // A first collective on another buffer: the connection's own setup (its sync words,
  // registered at the first asynchronous group) is done before counting.
  NCCL_CHECK(ncclAllReduce(c, c, kCount, ncclFloat32, ncclSum, r.comms[0], Nccl(r.streams[0])));
  CU_CHECK(g_cu.StreamSynchronize(r.streams[0]));
  const int before = DaemonDeviceMappings();
  void* handle = nullptr;
  void* host_handle = nullptr;
  ncclWindow_t win = nullptr;
  NCCL_CHECK(ncclCommRegister(r.comms[0], a, kCount * sizeof(float), &handle));
  NCCL_CHECK(ncclCommWindowRegister(r.comms[0], b, kCount * sizeof(float), &win, NCCL_WIN_COLL_SYMMETRIC));
  NCCL_CHECK(ncclCommRegister(r.comms[0], host.data(), kCount * sizeof(float), &host_handle));
  const int after = DaemonDeviceMappings();
  std::printf("device_probe: conduitd's mappings of device memory: %d before registering, %d after\n", before, after);
  Check(before >= 0 && after == before + 4, "registered device buffers are mapped in conduitd before a collective on them");
  Fill(a, kCount, 5, 1, r.streams[0]);
  NCCL_CHECK(ncclAllReduce(a, b, kCount, ncclFloat32, ncclSum, r.comms[0], Nccl(r.streams[0])));
  const long wrong = FirstWrong(Read(b, kCount, r.streams[0]), [](size_t e) { return 5 + static_cast<float>(e); });
  Check(wrong < 0, "all-reduce from a registered buffer into a window");
  Check(DaemonDeviceMappings() == after, "the collective needed no new mapping");
  NCCL_CHECK(ncclCommWindowDeregister(r.comms[0], win));
  NCCL_CHECK(ncclCommDeregister(r.comms[0], handle));
  NCCL_CHECK(ncclCommDeregister(r.comms[0], host_handle));
  // As PyTorch deregisters a segment before it frees it: conduitd has let go at once.
  Check(DaemonDeviceMappings() == before, "deregistered buffers are unmapped in conduitd at once (" +
                                              std::to_string(DaemonDeviceMappings()) + " mappings left)");
  // A range across two pages of a segment: both pages and the span of them are mapped at
  // registration (two mappings each page, four the span, in the double), a collective on a
  // buffer inside it needs none more, and deregistering lets go of all of them.
  const Segment seg = MapSegment(2, true);
  const int vmm_before = DaemonDeviceMappings(kVmmMappingName);
  NCCL_CHECK(ncclCommRegister(r.comms[0], At(seg, seg.chunk - 8192), 16384, &handle));
  const int vmm_after = DaemonDeviceMappings(kVmmMappingName);
  std::printf("device_probe: conduitd's mappings of virtual-memory allocations: %d before registering a range across "
              "two pages, %d after\n", vmm_before, vmm_after);
  Check(vmm_before >= 0 && vmm_after == vmm_before + 8, "a registered range across two pages is mapped with its span");
  float* across = At(seg, seg.chunk - 2000);
  Fill(across, kCount, 3, 1, r.streams[0]);
  NCCL_CHECK(ncclAllReduce(across, across, kCount, ncclFloat32, ncclSum, r.comms[0], Nccl(r.streams[0])));
  const long wrong_across = FirstWrong(Read(across, kCount, r.streams[0]), [](size_t e) { return 3 + static_cast<float>(e); });
  Check(wrong_across < 0, "all-reduce in place on a registered buffer across two pages");
  Check(DaemonDeviceMappings(kVmmMappingName) == vmm_after, "the collective across the pages needed no new mapping");
  NCCL_CHECK(ncclCommDeregister(r.comms[0], handle));
  const int vmm_left = DaemonVmmMappingsSettle(vmm_before);
  Check(vmm_left == vmm_before, "a deregistered range's pages and span are unmapped (" + std::to_string(vmm_left) +
                                    " mappings left)");
  UnmapSegment(seg);
  int bogus = 0;
  Check(ncclCommDeregister(r.comms[0], &bogus) == ncclInvalidArgument, "a handle that is not one is refused");
  ncclWindow_t no_win = nullptr;
  Check(ncclCommWindowRegister(r.comms[0], b, kCount * sizeof(float), &no_win, 0x80) == ncclInvalidArgument &&
            no_win == nullptr,
        "unknown window flags are refused");
  NCCL_CHECK(ncclCommDestroy(r.comms[0]));
  return g_failures == 0 ? 0 : 1;
}

// Allocations the program frees are released to conduitd, which drops its mappings, so
// the memory goes back to the GPU without a new registration in their place.
int Release() {
  Ranks r = AllHere(1);
  std::vector<float*> bufs = {DeviceFloats(kCount), DeviceFloats(kCount), DeviceFloats(kCount)};
  for (int i = 0; i < 2; ++i) {
    NCCL_CHECK(ncclAllReduce(bufs[i], bufs[i], kCount, ncclFloat32, ncclSum, r.comms[0], Nccl(r.streams[0])));
  }
  CU_CHECK(g_cu.StreamSynchronize(r.streams[0]));
  const int before = DaemonDeviceMappings();
  // The third buffer was allocated before these are freed: nothing takes their place.
  CU_CHECK(g_cu.MemFree(reinterpret_cast<CUdeviceptr>(bufs[0])));
  CU_CHECK(g_cu.MemFree(reinterpret_cast<CUdeviceptr>(bufs[1])));
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  NCCL_CHECK(ncclAllReduce(bufs[2], bufs[2], kCount, ncclFloat32, ncclSum, r.comms[0], Nccl(r.streams[0])));
  CU_CHECK(g_cu.StreamSynchronize(r.streams[0]));
  const int after = DaemonDeviceMappings();
  std::printf("device_probe: conduitd's mappings of device memory: %d before the frees, %d after\n", before, after);
  // Two allocations released (two mappings each), one registered (two).
  Check(before > 0 && after == before - 2, "conduitd drops the mappings of freed allocations");
  NCCL_CHECK(ncclCommDestroy(r.comms[0]));
  return g_failures == 0 ? 0 : 1;
}

// The same when the freed buffers were the last collectives' and none follows: conduitd
// drops the mappings its stream held for that finished work by itself (within a second or
// two: the shim's release check, then the daemon's sweep), not at a next collective.
int ReleaseIdle() {
  Ranks r = AllHere(1);
  std::vector<float*> bufs = {DeviceFloats(kCount), DeviceFloats(kCount)};
  for (float* b : bufs) {
    NCCL_CHECK(ncclAllReduce(b, b, kCount, ncclFloat32, ncclSum, r.comms[0], Nccl(r.streams[0])));
  }
  CU_CHECK(g_cu.StreamSynchronize(r.streams[0]));
  const int before = DaemonDeviceMappings();
  for (float* b : bufs) CU_CHECK(g_cu.MemFree(reinterpret_cast<CUdeviceptr>(b)));
  int after = before;
  const Clock::time_point start = Clock::now();
  while (after != before - 4 && MsSince(start) < 5000) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    after = DaemonDeviceMappings();
  }
  std::printf("device_probe: conduitd's mappings of device memory: %d before the frees, %d %.0f ms after, no "
              "collective since\n",
              before, after, MsSince(start));
  Check(before > 0 && after == before - 4, "conduitd drops the mappings of freed allocations without a new collective");
  NCCL_CHECK(ncclCommDestroy(r.comms[0]));
  return g_failures == 0 ? 0 : 1;
}

int Abort() {
  Ranks r = AllHere(2);
  ncclComm_t* comms = r.comms.data();
  CUstream stream = r.streams[0];
  float* buf = DeviceFloats(kCount);
  Fill(buf, kCount, 1, 0, stream);
  std::atomic<int> result{-1};
  std::atomic<double> call_ms{-1};
  const Clock::time_point start = Clock::now();
  std::thread caller([&] {
    result = ncclAllReduce(buf, buf, kCount, ncclFloat32, ncclSum, comms[0], Nccl(stream));
    call_ms = MsSince(start);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const Clock::time_point abort_start = Clock::now();
  const ncclResult_t aborted = ncclCommAbort(comms[0]);
  const double abort_ms = MsSince(abort_start);
  caller.join();
  ncclCommAbort(comms[1]);
  std::printf("device_probe: abort: ncclCommAbort=%d in %.0f ms; the all-reduce returned %d after %.0f ms\n",
              static_cast<int>(aborted), abort_ms, result.load(), call_ms.load());
  // The call either failed (it waited for rank 1 inside the daemon) or was enqueued and
  // returned: both are NCCL's contract; it must not hang, nor the abort.
  Check(aborted == ncclSuccess && abort_ms < 5000 && result != -1 && call_ms < 5300,
        "abort of a communicator with a device all-reduce in flight");
  // The stream must not be left waiting forever on work the daemon will never do.
  if (!IdleBy(stream, Clock::now(), 30000)) Check(false, "the caller's stream still waits 30 s after the abort");
  return g_failures == 0 ? 0 : 1;
}

// Whether a daemon answers on $CONDUIT_SOCKET (a connect to a dead one's socket is refused).
bool DaemonAnswers() {
  const char* path = std::getenv("CONDUIT_SOCKET");
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path != nullptr ? path : "", sizeof(addr.sun_path) - 1);
  const bool ok = fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  if (fd >= 0) close(fd);
  return ok;
}

// Two all-reduces accepted behind a long "kernel" of the program; then conduitd dies (the
// test kills it once this prints its line). Nobody will write the done word the stream
// waits on: the shim must release the stream itself, report ncclSystemError through
// ncclCommGetAsyncError, and let the communicator be destroyed.
int DaemonDies() {
  constexpr uint32_t kKernelMs = 4000;
  Ranks r = AllHere(1);
  CUstream stream = r.streams[0];
  float* buf = DeviceFloats(kCount);
  Fill(buf, kCount, 1, kKernelMs, stream);
  for (int i = 0; i < 2; ++i) {
    NCCL_CHECK(ncclAllReduce(buf, buf, kCount, ncclFloat32, ncclSum, r.comms[0], Nccl(stream)));
  }
  std::printf("device_probe: two all-reduces accepted behind a %u ms kernel; waiting for conduitd to die\n", kKernelMs);
  std::fflush(stdout);
  const Clock::time_point start = Clock::now();
  g_stage.store("waiting for conduitd to die");
  while (DaemonAnswers() && MsSince(start) < 20000) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const double died_ms = MsSince(start);
  // Still behind the kernel: conduitd cannot have written the done word before it died.
  const bool busy_at_death = g_cu.StreamQuery(stream) == kErrorNotReady;
  g_stage.store("waiting for the stream after conduitd died");
  const bool idle = IdleBy(stream, start, 30000);
  const double idle_ms = MsSince(start);
  ncclResult_t state = ncclSuccess;
  g_stage.store("ncclCommGetAsyncError after conduitd died");
  ncclCommGetAsyncError(r.comms[0], &state);
  const std::string text = ncclGetLastError(r.comms[0]);
  std::printf("device_probe: conduitd gone %.0f ms after the calls (stream %s then); stream %s at %.0f ms; "
              "ncclCommGetAsyncError %d (\"%s\")\n",
              died_ms, busy_at_death ? "still in the kernel" : "already idle", idle ? "idle" : "still waiting", idle_ms,
              static_cast<int>(state), text.c_str());
  Check(died_ms < 20000 && busy_at_death, "conduitd died while the stream waited for the kernel before its groups");
  Check(idle && idle_ms < kKernelMs + 5000, "the stream is released within moments of the kernel's end");
  Check(state == ncclSystemError, "ncclCommGetAsyncError reports ncclSystemError");
  Check(text.find("conduitd closed the connection") != std::string::npos, "ncclGetLastError says conduitd went away");
  const Clock::time_point destroy_start = Clock::now();
  g_stage.store("ncclCommDestroy after conduitd died");
  const ncclResult_t destroyed = ncclCommDestroy(r.comms[0]);
  Check(destroyed == ncclSuccess && MsSince(destroy_start) < 5000, "ncclCommDestroy returns at once");
  return g_failures == 0 ? 0 : 1;
}

int Vmm() {
  Ranks r = AllHere(2);
  const int before = DaemonDeviceMappings(kVmmMappingName);
  std::vector<Segment> segs = {MapSegment(2, true), MapSegment(2, true)};
  std::vector<float*> send(2), recv(2);
  for (int i = 0; i < 2; ++i) {
    send[i] = At(segs[i], 0);
    recv[i] = At(segs[i], segs[i].chunk / 2);
  }
  AllReduceSum(r, send, recv, "all-reduce sum on virtual-memory buffers");
  AllGather(r, send, recv);
  OtherCollectives(r, send, recv);
  const int mapped = DaemonDeviceMappings(kVmmMappingName);
  std::printf("device_probe: conduitd's mappings of virtual-memory allocations: %d before, %d after\n", before, mapped);
  // One allocation per rank holds both buffers: two mappings each in the double.
  Check(before >= 0 && mapped == before + 4, "conduitd maps each rank's allocation from its file descriptor");

  // Buffers that start in one allocation and end in the next: conduitd maps the second
  // page (its own registration) and the two pages back to back as a span.
  for (int i = 0; i < 2; ++i) {
    send[i] = At(segs[i], segs[i].chunk - 2000);
    recv[i] = At(segs[i], segs[i].chunk + 4096);
  }
  AllReduceSum(r, send, recv, "all-reduce of buffers across two allocations (a span)");
  AllGather(r, send, recv);
  const int spanned = DaemonDeviceMappings(kVmmMappingName);
  std::printf("device_probe: conduitd's mappings of virtual-memory allocations: %d before the spans, %d after\n", mapped,
              spanned);
  // Per rank: the second page (two mappings in the double) and the span of both pages (four).
  Check(spanned == mapped + 12, "conduitd maps each rank's second page and a span of both pages");
  // The same span again: no new mapping.
  AllReduceSum(r, send, recv, "all-reduce of the same buffers across two allocations");
  Check(DaemonDeviceMappings(kVmmMappingName) == spanned, "a span is mapped once");

  // A buffer from an exportable page into one that is not: staged (no span of half a buffer).
  std::vector<Segment> mixed = {MapSegment(2, true, 1), MapSegment(2, true, 1)};
  for (int i = 0; i < 2; ++i) {
    send[i] = At(mixed[i], mixed[i].chunk - 2000);
    recv[i] = At(mixed[i], 0);
  }
  AllReduceSum(r, send, recv, "all-reduce from an exportable page into one that is not (staged)");
  for (const Segment& seg : mixed) UnmapSegment(seg);

  // Allocations not created exportable: staged.
  std::vector<Segment> plain = {MapSegment(1, false), MapSegment(1, false)};
  for (int i = 0; i < 2; ++i) {
    send[i] = At(plain[i], 0);
    recv[i] = At(plain[i], plain[i].chunk / 2);
  }
  AllReduceSum(r, send, recv, "all-reduce on allocations CUDA will not export (staged)");

  // ncclMemAlloc makes such allocations too (as NCCL's).
  void* p = nullptr;
  NCCL_CHECK(ncclMemAlloc(&p, 4096));
  CUmemGenericAllocationHandle h = 0;
  const bool vmm = g_cu.MemRetainAllocationHandle(&h, p) == kSuccess;
  if (vmm) CU_CHECK(g_cu.MemRelease(h));
  Check(vmm, "ncclMemAlloc returns a virtual-memory-managed allocation");
  // As NCCL's: readable and writable by every GPU that can reach the allocating one (the
  // double's two GPUs reach each other).
  int gpus = 0;
  CU_CHECK(g_cu.DeviceGetCount(&gpus));
  Check(gpus >= 2, "this program sees two GPUs (CONDUIT_CUDA_DOUBLE_DEVICES=2)");
  for (int gpu = 0; gpu < gpus; ++gpu) {
    unsigned long long access = 0;
    const MemLocation where{kMemLocationTypeDevice, gpu};
    const bool rw = g_cu.MemGetAccess(&access, &where, reinterpret_cast<CUdeviceptr>(p)) == kSuccess &&
                    access == static_cast<unsigned long long>(kMemAccessFlagsProtReadWrite);
    Check(rw, "ncclMemAlloc's memory is readable and writable by GPU " + std::to_string(gpu));
  }
  NCCL_CHECK(ncclMemFree(p));

  // Unmapped by the program: conduitd lets go at the next call (the shim's free check).
  const int held = DaemonDeviceMappings(kVmmMappingName);
  for (const Segment& seg : segs) UnmapSegment(seg);
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  AllReduceSum(r, send, recv, "all-reduce after the segments were unmapped");
  for (int i = 0; i < 2; ++i) CU_CHECK(g_cu.StreamSynchronize(r.streams[i]));
  const int after = DaemonVmmMappingsSettle(before);
  std::printf("device_probe: conduitd's mappings of virtual-memory allocations: %d before the unmaps, %d after\n", held,
              after);
  Check(held > before && after == before, "conduitd drops its mappings of allocations the program unmapped");
  for (const Segment& seg : plain) UnmapSegment(seg);
  for (int i = 0; i < 2; ++i) NCCL_CHECK(ncclCommDestroy(r.comms[i]));
  return g_failures == 0 ? 0 : 1;
}

const char* Arg(int argc, char** argv, const char* name, const char* fallback) {
  for (int i = 2; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  }
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::printf("usage: device_probe local|hosts|abort [options]\n");
    return 2;
  }
  if (const char* limit = std::getenv("CONDUIT_PROBE_DEADLINE_S"); limit != nullptr && std::atoi(limit) > 0) {
    const int seconds = std::atoi(limit);
    std::thread([seconds] {
      std::this_thread::sleep_for(std::chrono::seconds(seconds));
      std::printf("device_probe: HUNG: still running after %d s, in %s\n", seconds, g_stage.load());
      std::fflush(stdout);
      _exit(124);
    }).detach();
  }
  LoadDriver();
  const std::string mode = argv[1];
  int rc = 2;
  if (mode == "local") {
    rc = Local(std::atoi(Arg(argc, argv, "--ranks", "3")));
  } else if (mode == "hosts") {
    rc = Hosts(std::atoi(Arg(argc, argv, "--nranks", "2")), std::atoi(Arg(argc, argv, "--base", "0")),
               std::atoi(Arg(argc, argv, "--ranks", "1")), Arg(argc, argv, "--id-file", ""),
               std::atoi(Arg(argc, argv, "--linger-ms", "0")), Arg(argc, argv, "--release-file", ""));
  } else if (mode == "abort") {
    rc = Abort();
  } else if (mode == "async-error") {
    rc = AsyncError();
  } else if (mode == "release") {
    rc = Release();
  } else if (mode == "release-idle") {
    rc = ReleaseIdle();
  } else if (mode == "revoke") {
    rc = Revoke();
  } else if (mode == "vanish") {
    rc = Vanish();
  } else if (mode == "register") {
    rc = Register();
  } else if (mode == "loop") {
    rc = Loop(std::atoi(Arg(argc, argv, "--ranks", "2")), Arg(argc, argv, "--stop-file", "/nonexistent"),
              std::strcmp(Arg(argc, argv, "--inputs", "device"), "vmm") == 0);
  } else if (mode == "daemon-dies") {
    rc = DaemonDies();
  } else if (mode == "vmm") {
    rc = Vmm();
  } else if (mode == "broadcast-in-place") {
    rc = BroadcastInPlace(std::atoi(Arg(argc, argv, "--ranks", "3")));
  } else if (mode == "p2p") {
    rc = P2p(std::atoi(Arg(argc, argv, "--ranks", "3")), std::atoi(Arg(argc, argv, "--linger-ms", "0")),
             Arg(argc, argv, "--release-file", ""));
  }
  std::printf("device_probe: %s\n", rc == 0 ? "all passed" : "FAILED");
  return rc;
}
