#include "completion.h"

#include "handoff.h"
#include "real_grpc.h"

namespace conduit::grpcshim {
namespace {

// Storage gRPC's queue links into its list until the program took the event; gRPC calls
// Done when it is finished with it. Larger than grpc_cq_completion (40 bytes in 1.51).
struct alignas(16) Completion {
  char storage[128];
  grpc_completion_queue* cq;
  void* tag;
  bool ok;
};

void Done(void* arg, grpc_cq_completion*) {
  TakeOver(arg);
  delete static_cast<Completion*>(arg);
}

void EndOp(void* arg) {
  auto* c = static_cast<Completion*>(arg);
  absl::Status status = c->ok ? absl::OkStatus() : absl::CancelledError("conduit: operation failed");
  HandOff(c);  // gRPC hands the storage back on the thread that takes the event
  Real().grpc_cq_end_op(c->cq, c->tag, std::move(status), Done, c, reinterpret_cast<grpc_cq_completion*>(c->storage),
                        false);
}

char g_marker[1];

// grpc_byte_buffer_destroy opens a gRPC ExecCtx, releases the buffer's slices inside it and
// flushes the context afterwards. A slice whose destructor is EndOp therefore ends the
// operation inside a proper execution context, using public API only.
}  // namespace

void RunInGrpcExecCtx(void (*fn)(void*), void* arg) {
  const RealGrpc& g = Real();
  grpc_slice slice = g.grpc_slice_new_with_user_data(g_marker, 1, fn, arg);
  grpc_byte_buffer* bb = g.grpc_raw_byte_buffer_create(&slice, 1);
  g.grpc_slice_unref(slice);
  g.grpc_byte_buffer_destroy(bb);
}

bool BeginCompletion(grpc_completion_queue* cq, void* tag) { return Real().grpc_cq_begin_op(cq, tag); }

void PostCompletion(grpc_completion_queue* cq, void* tag, bool ok) {
  auto* c = new Completion;
  c->cq = cq;
  c->tag = tag;
  c->ok = ok;
  RunInGrpcExecCtx(EndOp, c);
}

}  // namespace conduit::grpcshim
