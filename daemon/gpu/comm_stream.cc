#include "gpu/comm_stream.h"

#include <time.h>

#include <algorithm>
#include <cstring>

#include "common/log.h"
#include "gpu/combine.h"
#include "reduce/reduce.h"

namespace conduit::gpu {
namespace {

constexpr unsigned kBlockThreads = 256;
constexpr unsigned kBlocksPerMultiprocessor = 8;

void SleepUs(long us) {
  timespec ts{0, us * 1000};
  nanosleep(&ts, nullptr);
}

}  // namespace

Status CommStream::Create(Runtime& runtime, int device, std::unique_ptr<CommStream>* out) {
  if (!runtime.available()) return InvalidUsage("this daemon has no GPU support: %s", runtime.unavailable_reason().c_str());
  std::unique_ptr<CommStream> s(new CommStream(runtime, device));
  const cuda::CudaDriver& d = runtime.driver();
  cuda::ScopedContext ctx(d, runtime.context(device));
  cuda::CUresult r = d.StreamCreate(&s->stream_, cuda::kStreamNonBlocking);
  if (r != cuda::kSuccess) return d.Error("cuStreamCreate for a communicator", r);
  r = d.EventCreate(&s->done_, cuda::kEventDisableTiming | cuda::kEventInterprocess);
  if (r != cuda::kSuccess) return d.Error("cuEventCreate (interprocess) for a communicator", r);
  r = d.IpcGetEventHandle(&s->done_handle_, s->done_);
  if (r != cuda::kSuccess) return d.Error("cuIpcGetEventHandle", r);
  *out = std::move(s);
  return Status::Ok();
}

CommStream::~CommStream() {
  cuda::ScopedContext ctx(driver_, context());
  // Programs may still have waits on `done` queued; let the stream finish first.
  if (stream_ != nullptr) {
    Status st = Drain(Deadline::AfterMs(10000));
    if (!st.ok()) {
      CLOG_WARN("destroying a communicator stream: %s; its programs' mappings stay open", st.message().c_str());
      // Work that may still run keeps what it uses: leaked, never closed under it.
      static auto* kept = new std::deque<Held>;
      for (Held& h : held_) kept->push_back(std::move(h));
      held_.clear();
    }
  }
  for (Held& h : held_) driver_.EventDestroy(h.after);
  held_.clear();
  for (cuda::CUevent e : spare_events_) driver_.EventDestroy(e);
  if (staging_ != nullptr) driver_.MemFreeHost(staging_);
  if (bounce_ != nullptr) driver_.MemFreeHost(bounce_);
  if (done_ != nullptr) driver_.EventDestroy(done_);
  if (stream_ != nullptr) driver_.StreamDestroy(stream_);
}

Status CommStream::WaitFor(cuda::CUevent ready) {
  cuda::CUresult r = driver_.StreamWaitEvent(stream_, ready, 0);
  return r == cuda::kSuccess ? Status::Ok() : driver_.Error("cuStreamWaitEvent on a program's ready event", r);
}

Status CommStream::WaitWord(uint64_t word, uint32_t value) {
  cuda::CUresult r = driver_.StreamWaitValue32(stream_, word, value, cuda::kStreamWaitValueGeq);
  return r == cuda::kSuccess ? Status::Ok() : driver_.Error("cuStreamWaitValue32 on a program's ready word", r);
}

Status CommStream::WriteWord(uint64_t word, uint32_t value) {
  cuda::CUresult r = driver_.StreamWriteValue32(stream_, word, value, cuda::kStreamWriteValueDefault);
  return r == cuda::kSuccess ? Status::Ok() : driver_.Error("cuStreamWriteValue32 of a program's done word", r);
}

Status CommStream::Copy(DeviceBuf dst, DeviceBuf src, size_t bytes) {
  if (bytes == 0 || dst.ptr == src.ptr) return Status::Ok();
  // Unified addressing: the driver finds each side's memory (peer, host or local).
  cuda::CUresult r = driver_.MemcpyAsync(dst.ptr, src.ptr, bytes, stream_);
  return r == cuda::kSuccess ? Status::Ok() : driver_.Error("cuMemcpyAsync", r);
}

Status CommStream::Launch(ncclDataType_t type, ncclRedOp_t op, uint64_t count, const std::vector<DeviceBuf>& in,
                          const std::vector<uint64_t>& scalars, const std::vector<uint64_t>& scalar_at,
                          uint32_t scale_mask, int divisor, const std::vector<DeviceBuf>& out) {
  cuda::CUfunction fn = nullptr;
  CONDUIT_RETURN_IF_ERROR(runtime_.Kernel(device_, type, op, &fn));
  CombineArgs args{};
  args.count = count;
  args.nin = static_cast<int32_t>(in.size());
  args.nout = static_cast<int32_t>(out.size());
  args.scale_mask = scale_mask;
  args.divisor = divisor;
  for (size_t i = 0; i < in.size(); ++i) {
    args.in[i] = reinterpret_cast<const void*>(in[i].ptr);
    args.scalars[i] = scalars.empty() ? 0 : scalars[i];
    args.scalar_at[i] = scalar_at.empty() ? nullptr : reinterpret_cast<const void*>(scalar_at[i]);
  }
  for (size_t i = 0; i < out.size(); ++i) args.out[i] = reinterpret_cast<void*>(out[i].ptr);
  const uint64_t want = (count + kBlockThreads - 1) / kBlockThreads;
  const uint64_t cap = static_cast<uint64_t>(runtime_.multiprocessors(device_)) * kBlocksPerMultiprocessor;
  const auto blocks = static_cast<unsigned>(std::max<uint64_t>(1, std::min(want, cap)));
  void* params[] = {&args};
  cuda::CUresult r = driver_.LaunchKernel(fn, blocks, 1, 1, kBlockThreads, 1, 1, 0, stream_, params, nullptr);
  return r == cuda::kSuccess ? Status::Ok() : driver_.Error("cuLaunchKernel (combine)", r);
}

Status CommStream::Combine(ncclDataType_t type, ncclRedOp_t op, uint64_t count, const std::vector<DeviceBuf>& in,
                           const std::vector<uint64_t>* scalars, int divisor, const std::vector<DeviceBuf>& out,
                           Deadline deadline, const std::vector<uint64_t>* scalar_at) {
  if (in.empty() || out.empty()) return InternalError("combine needs inputs and outputs");
  if (count == 0) return Status::Ok();
  const size_t bytes = count * DataTypeSize(type);
  if (in.size() == 1 && scalars == nullptr && divisor == 0) {
    // One input, nothing to scale or divide: the result is the input. A copy (the copy
    // engine or the driver's own kernel) moves it faster than a combine launch.
    for (const DeviceBuf& b : out) CONDUIT_RETURN_IF_ERROR(Copy(b, in[0], bytes));
    return Status::Ok();
  }
  std::vector<DeviceBuf> ins = in, outs = out;
  size_t bounced = 0;
  for (const DeviceBuf& b : in) bounced += Reachable(b) ? 0 : 1;
  for (const DeviceBuf& b : out) bounced += Reachable(b) ? 0 : 1;
  if (bounced > 0) {
    CONDUIT_RETURN_IF_ERROR(GrowPinned(&bounce_, &bounce_bytes_, bounced * bytes, deadline));
    size_t slot = 0;
    for (DeviceBuf& b : ins) {
      if (Reachable(b)) continue;
      DeviceBuf copy{reinterpret_cast<uint64_t>(bounce_ + slot++ * bytes), -1};
      CONDUIT_RETURN_IF_ERROR(Copy(copy, b, bytes));
      b = copy;
    }
    for (DeviceBuf& b : outs) {
      if (!Reachable(b)) b = DeviceBuf{reinterpret_cast<uint64_t>(bounce_ + slot++ * bytes), -1};
    }
  }
  // Left fold in launches of up to kCombineSlots inputs; later launches continue from the
  // first output, so the order (and every rounding) is the host path's.
  size_t next = 0;
  for (bool first = true;; first = false) {
    std::vector<DeviceBuf> lin;
    std::vector<uint64_t> lscalars, lscalar_at;
    uint32_t mask = 0;
    if (!first) {
      lin.push_back(outs[0]);
      lscalars.push_back(0);
      lscalar_at.push_back(0);
    }
    while (lin.size() < static_cast<size_t>(kCombineSlots) && next < ins.size()) {
      if (scalars != nullptr) mask |= 1u << lin.size();
      lscalars.push_back(scalars != nullptr ? (*scalars)[next] : 0);
      lscalar_at.push_back(scalars != nullptr && scalar_at != nullptr ? (*scalar_at)[next] : 0);
      lin.push_back(ins[next++]);
    }
    const bool last = next == ins.size();
    std::vector<DeviceBuf> lout(outs.begin(), outs.begin() + (last ? std::min<size_t>(outs.size(), kCombineSlots) : 1));
    CONDUIT_RETURN_IF_ERROR(Launch(type, op, count, lin, lscalars, lscalar_at, mask, last ? divisor : 0, lout));
    if (last) break;
  }
  for (size_t j = kCombineSlots; j < outs.size(); ++j) CONDUIT_RETURN_IF_ERROR(Copy(outs[j], outs[0], bytes));
  for (size_t j = 0; j < out.size(); ++j) CONDUIT_RETURN_IF_ERROR(Copy(out[j], outs[j], bytes));
  return Status::Ok();
}

Status CommStream::GrowPinned(uint8_t** buffer, size_t* have, size_t bytes, Deadline deadline) {
  if (*have >= bytes) return Status::Ok();
  if (*buffer != nullptr) {
    // Earlier collectives may still read or write it.
    CONDUIT_RETURN_IF_ERROR(Drain(deadline));
    driver_.MemFreeHost(*buffer);
    *buffer = nullptr;
    *have = 0;
  }
  size_t size = 1 << 20;
  while (size < bytes) size *= 2;
  void* p = nullptr;
  cuda::CUresult r = driver_.MemHostAlloc(&p, size, cuda::kMemHostAllocPortable | cuda::kMemHostAllocDeviceMap);
  if (r != cuda::kSuccess) return driver_.Error(("cuMemHostAlloc of " + std::to_string(size) + " pinned bytes").c_str(), r);
  *buffer = static_cast<uint8_t*>(p);
  *have = size;
  return Status::Ok();
}

Status CommStream::Staging(size_t bytes, Deadline deadline, uint8_t** data) {
  CONDUIT_RETURN_IF_ERROR(GrowPinned(&staging_, &staging_bytes_, bytes, deadline));
  *data = staging_;
  return Status::Ok();
}

Status CommStream::Drain(Deadline deadline, const std::function<Status()>& failed) {
  for (long pause_us = 10;; pause_us = std::min(pause_us * 2, 1000L)) {
    cuda::CUresult r = driver_.StreamQuery(stream_);
    if (r == cuda::kSuccess) return Status::Ok();
    if (r != cuda::kErrorNotReady) return driver_.Error("GPU work of a communicator failed (cuStreamQuery)", r);
    if (failed) CONDUIT_RETURN_IF_ERROR(failed());
    if (deadline.expired()) {
      return RemoteError("timed out waiting for GPU work (a program's stream never reached its collective, or a kernel hangs)");
    }
    SleepUs(pause_us);
  }
}

Status CommStream::Retain(std::vector<std::shared_ptr<const void>> held) {
  ReleaseFinished();
  if (held.empty()) return Status::Ok();
  Held h;
  // One event per collective: reused rather than created each time (the hot path).
  cuda::CUresult r = cuda::kSuccess;
  if (spare_events_.empty()) {
    r = driver_.EventCreate(&h.after, cuda::kEventDisableTiming);
  } else {
    h.after = spare_events_.back();
    spare_events_.pop_back();
  }
  if (r == cuda::kSuccess) r = driver_.EventRecord(h.after, stream_);
  if (r != cuda::kSuccess) {
    if (h.after != nullptr) driver_.EventDestroy(h.after);
    // Without an event, wait here: releasing the mappings early is worse than a stall.
    CONDUIT_RETURN_IF_ERROR(Drain(Deadline::AfterMs(60000)));
    return Status::Ok();
  }
  h.held = std::move(held);
  held_.push_back(std::move(h));
  return Status::Ok();
}

void CommStream::ReleaseFinished() {
  while (!held_.empty() && driver_.EventQuery(held_.front().after) != cuda::kErrorNotReady) {
    spare_events_.push_back(held_.front().after);
    held_.pop_front();
  }
}

Status CommStream::RecordDone() {
  cuda::CUresult r = driver_.EventRecord(done_, stream_);
  return r == cuda::kSuccess ? Status::Ok() : driver_.Error("cuEventRecord of a communicator's done event", r);
}

}  // namespace conduit::gpu
