#include "double_streams.h"

#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <map>
#include <set>
#include <vector>

#include "double_errors.h"

namespace cuda_double {
namespace {

using conduit::cuda::CUstream;
using conduit::cuda::IpcEventHandle;
using conduit::cuda::kSuccess;

void SleepUs(long us) {
  timespec ts{0, us * 1000};
  nanosleep(&ts, nullptr);
}

struct Streams {
  std::mutex mu;
  std::set<Stream*> live;
  std::vector<Stream*> retired;  // destroyed by the program, maybe still finishing work
  std::map<CUcontext, Stream*> defaults;
};

Streams& Registry() {
  static auto* streams = new Streams;  // never destroyed, nor are the streams: their
  return *streams;                     // threads may be waiting when the process exits
}

// The handle's 64 bytes for an interprocess event.
struct EventHandle {
  uint32_t magic;
  int32_t pid;
  int32_t fd;
  int32_t reserved;
  uint64_t inode;
};
static_assert(sizeof(EventHandle) <= sizeof(IpcEventHandle));
constexpr uint32_t kEventMagic = 0x45424443;  // "CDBE"

size_t CountersBytes() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

}  // namespace

void Stream::Stop() {
  std::lock_guard<std::mutex> lock(mu_);
  stopping_ = true;
  cv_.notify_all();
}

void Stream::Enqueue(Work work) {
  std::lock_guard<std::mutex> lock(mu_);
  queue_.push_back(std::move(work));
  if (!started_) {
    started_ = true;
    std::thread([this] { Run(); }).detach();
  }
  cv_.notify_all();
}

void Stream::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return !queue_.empty() || stopping_; });
    if (queue_.empty()) return;  // stopping, nothing left
    Work work = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    const bool poisoned = error_ != kSuccess;
    lock.unlock();
    // A poisoned stream runs nothing more, as a CUDA context after a fault.
    const CUresult r = poisoned ? kSuccess : work();
    lock.lock();
    busy_ = false;
    if (r != kSuccess && error_ == kSuccess) error_ = r;
    cv_.notify_all();
  }
}

CUresult Stream::Query() {
  std::lock_guard<std::mutex> lock(mu_);
  if (error_ != kSuccess) return error_;
  return queue_.empty() && !busy_ ? kSuccess : conduit::cuda::kErrorNotReady;
}

CUresult Stream::Synchronize(int timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  auto idle = [this] { return queue_.empty() && !busy_; };
  if (timeout_ms < 0) {
    cv_.wait(lock, idle);
  } else if (!cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), idle)) {
    return conduit::cuda::kErrorNotReady;
  }
  return error_;
}

CUresult Event::Create(CUcontext context, bool interprocess, Event** out) {
  if (context == nullptr) return kErrorInvalidContext;
  std::unique_ptr<Event> e(new Event);
  e->interprocess_ = interprocess;
  if (interprocess) {
    if (!CreateSharedFile("cuda-double-event", CountersBytes(), &e->file_)) return kErrorOutOfMemory;
    void* p = mmap(nullptr, CountersBytes(), PROT_READ | PROT_WRITE, MAP_SHARED, e->file_.fd, 0);
    if (p == MAP_FAILED) {
      close(e->file_.fd);
      return kErrorOutOfMemory;
    }
    // The memfd starts zeroed: both counters 0.
    e->counters_ = std::shared_ptr<EventCounters>(static_cast<EventCounters*>(p),
                                                  [](EventCounters* c) { munmap(c, CountersBytes()); });
  } else {
    e->counters_ = std::make_shared<EventCounters>();
    e->counters_->recorded = 0;
    e->counters_->completed = 0;
  }
  *out = e.release();
  return kSuccess;
}

CUresult Event::Open(const IpcEventHandle& handle, CUcontext context, Event** out) {
  if (context == nullptr) return kErrorInvalidContext;
  if (Injected("cuIpcOpenEventHandle")) return kErrorNotSupported;
  EventHandle h;
  memcpy(&h, handle.reserved, sizeof(h));
  if (h.magic != kEventMagic) return conduit::cuda::kErrorInvalidValue;
  int fd = OpenSharedFile(h.pid, h.fd, h.inode);
  if (fd < 0) return conduit::cuda::kErrorInvalidValue;
  void* p = mmap(nullptr, CountersBytes(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return conduit::cuda::kErrorInvalidValue;
  std::unique_ptr<Event> e(new Event);
  e->interprocess_ = true;
  e->counters_ = std::shared_ptr<EventCounters>(static_cast<EventCounters*>(p),
                                                [](EventCounters* c) { munmap(c, CountersBytes()); });
  *out = e.release();
  return kSuccess;
}

Event::~Event() {
  if (file_.fd >= 0) close(file_.fd);
}

CUresult Event::Export(IpcEventHandle* handle) const {
  if (!interprocess_ || file_.fd < 0) return kErrorInvalidHandle;
  EventHandle h{kEventMagic, static_cast<int32_t>(getpid()), file_.fd, 0, file_.inode};
  memset(handle->reserved, 0, sizeof(handle->reserved));
  memcpy(handle->reserved, &h, sizeof(h));
  return kSuccess;
}

void Event::Record(Stream& stream) {
  const uint64_t number = counters_->recorded.fetch_add(1) + 1;
  stream.Enqueue([counters = counters_, number] {
    uint64_t seen = counters->completed.load();
    while (seen < number && !counters->completed.compare_exchange_weak(seen, number)) {
    }
    return kSuccess;
  });
}

CUresult Event::Query() const {
  return counters_->completed.load() >= counters_->recorded.load() ? kSuccess : conduit::cuda::kErrorNotReady;
}

void Event::WaitOn(Stream& stream) {
  const uint64_t target = counters_->recorded.load();
  if (target == 0) return;  // never recorded: nothing to wait for
  stream.Enqueue([counters = counters_, target] {
    // The recording stream may be in another process: poll, briefly at first.
    for (long pause_us = 5; counters->completed.load() < target; pause_us = std::min(pause_us * 2, 500L)) {
      SleepUs(pause_us);
    }
    return kSuccess;
  });
}

Stream* ResolveStream(CUstream handle, CUcontext current) {
  Streams& s = Registry();
  std::lock_guard<std::mutex> lock(s.mu);
  if (handle == nullptr || handle == conduit::cuda::LegacyStream() || handle == conduit::cuda::PerThreadStream()) {
    if (current == nullptr) return nullptr;
    Stream*& def = s.defaults[current];
    if (def == nullptr) def = new Stream(current);
    return def;
  }
  auto* stream = reinterpret_cast<Stream*>(handle);
  return s.live.count(stream) ? stream : nullptr;
}

CUstream RegisterStream(Stream* stream) {
  Streams& s = Registry();
  std::lock_guard<std::mutex> lock(s.mu);
  s.live.insert(stream);
  return reinterpret_cast<CUstream>(stream);
}

CUresult DestroyStream(CUstream handle) {
  Streams& s = Registry();
  std::lock_guard<std::mutex> lock(s.mu);
  auto* stream = reinterpret_cast<Stream*>(handle);
  if (s.live.erase(stream) == 0) return kErrorInvalidHandle;
  // As in CUDA, work already queued still runs; the stream is only kept, never freed.
  s.retired.push_back(stream);
  stream->Stop();
  return kSuccess;
}

bool SynchronizeAllStreams(int timeout_ms) {
  std::vector<Stream*> all;
  {
    Streams& s = Registry();
    std::lock_guard<std::mutex> lock(s.mu);
    all.assign(s.live.begin(), s.live.end());
    all.insert(all.end(), s.retired.begin(), s.retired.end());
    for (auto& [ctx, stream] : s.defaults) all.push_back(stream);
  }
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (Stream* stream : all) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
    if (stream->Synchronize(static_cast<int>(std::max<long>(0, left.count()))) == conduit::cuda::kErrorNotReady) {
      return false;
    }
  }
  return true;
}

}  // namespace cuda_double
