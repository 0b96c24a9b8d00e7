// Hand-offs of shim objects between threads that go through gRPC itself (a completion
// queue, an executor): ThreadSanitizer cannot see gRPC's synchronization (Debian's gRPC
// is not instrumented), so the shim states the ordering it relies on. No code in other
// builds.
#ifndef CONDUIT_LIBMRPC_GRPC_HANDOFF_H_
#define CONDUIT_LIBMRPC_GRPC_HANDOFF_H_

#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#endif

namespace conduit::grpcshim {

// Everything this thread did to `object` so far happens before what the next thread that
// receives it from gRPC does.
inline void HandOff(const void* object) {
#if defined(__SANITIZE_THREAD__)
  __tsan_release(const_cast<void*>(object));
#else
  (void)object;
#endif
}

// This thread receives `object` from gRPC.
inline void TakeOver(const void* object) {
#if defined(__SANITIZE_THREAD__)
  __tsan_acquire(const_cast<void*>(object));
#else
  (void)object;
#endif
}

// For an interposed entry point: takes the object over, and hands it off again on return.
class ProgramUse {
 public:
  explicit ProgramUse(const void* object) : object_(object) { TakeOver(object_); }
  ~ProgramUse() { HandOff(object_); }
  ProgramUse(const ProgramUse&) = delete;
  ProgramUse& operator=(const ProgramUse&) = delete;

 private:
  const void* object_;
};

}  // namespace conduit::grpcshim

#endif  // CONDUIT_LIBMRPC_GRPC_HANDOFF_H_
