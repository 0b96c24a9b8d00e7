// The test double's streams and events.
//
// A stream is an ordered executor: one thread runs its work items in the order they were
// enqueued, while the caller goes on (as a GPU runs a stream's kernels and copies).
// An event is a pair of counters: cuEventRecord takes the next record number at the call
// and enqueues "completed = that number"; cuEventQuery and cuStreamWaitEvent look at the
// most recent record at their call, so a wait covers exactly the work before the record,
// and a never-recorded event is complete, as in CUDA. An interprocess event keeps the
// counters in a memfd that another process maps through its IPC handle, so a stream of
// one process can wait for work of another.
#ifndef CONDUIT_TESTS_CUDA_DOUBLE_DOUBLE_STREAMS_H_
#define CONDUIT_TESTS_CUDA_DOUBLE_DOUBLE_STREAMS_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "double_memory.h"

namespace cuda_double {

using conduit::cuda::CUcontext;

// Work on a stream: returns kSuccess or the error that poisons the stream (as a faulting
// kernel poisons a CUDA context: later queries and syncs report it).
using Work = std::function<CUresult()>;

class Stream {
 public:
  // Streams are never destroyed (cuStreamDestroy stops one): their threads are detached
  // and may be waiting on another process when this one exits.
  explicit Stream(CUcontext context) : context_(context) {}
  ~Stream() = delete;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  CUcontext context() const { return context_; }
  void Enqueue(Work work);
  // kSuccess when idle, kErrorNotReady while work remains, or the stream's error.
  CUresult Query();
  // Waits until idle (at most timeout_ms; < 0: no limit); the stream's error, or
  // kErrorNotReady on timeout.
  CUresult Synchronize(int timeout_ms = -1);
  // Runs what is queued, then ends the stream's thread (cuStreamDestroy).
  void Stop();

 private:
  void Run();

  const CUcontext context_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Work> queue_;
  bool busy_ = false;
  bool stopping_ = false;
  CUresult error_ = conduit::cuda::kSuccess;
  bool started_ = false;
};

// Counters of one event; in a memfd when the event is interprocess.
struct EventCounters {
  std::atomic<uint64_t> recorded;   // records made so far (record n is the n-th)
  std::atomic<uint64_t> completed;  // highest record whose preceding work has run
};

class Event {
 public:
  // A fresh event; `interprocess`: counters in a memfd others can open.
  static CUresult Create(CUcontext context, bool interprocess, Event** out);
  // The event another process exported (cuIpcOpenEventHandle).
  static CUresult Open(const conduit::cuda::IpcEventHandle& handle, CUcontext context, Event** out);
  ~Event();

  CUresult Export(conduit::cuda::IpcEventHandle* handle) const;
  void Record(Stream& stream);
  CUresult Query() const;
  // Makes `stream` wait for the most recent record's work.
  void WaitOn(Stream& stream);

 private:
  Event() = default;

  std::shared_ptr<EventCounters> counters_;  // shared with queued work
  SharedFile file_;                          // interprocess events
  bool interprocess_ = false;
};

// A stream handle as programs pass it: a stream the double created, or one of the special
// handles (nullptr, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD), which name the current
// context's default stream. nullptr when the handle is unknown or no context is current.
Stream* ResolveStream(conduit::cuda::CUstream handle, CUcontext current);
conduit::cuda::CUstream RegisterStream(Stream* stream);
CUresult DestroyStream(conduit::cuda::CUstream handle);

// Waits until every stream of this process is idle, at most timeout_ms: false if not.
bool SynchronizeAllStreams(int timeout_ms);

}  // namespace cuda_double

#endif  // CONDUIT_TESTS_CUDA_DOUBLE_DOUBLE_STREAMS_H_
