#include "native_parent.h"

#include <atomic>
#include <mutex>
#include <string>
#include <thread>

#include "common/detached_thread.h"
#include "common/log.h"
#include "common/thread_guard.h"
#include "handoff.h"
#include "real_grpc.h"

namespace conduit::grpcshim {
namespace {

// One stand-in: the core call, the managed child it answers for (referenced until the
// stand-in ends), and what its batch receives.
struct Watch {
  grpc_call* stand_in = nullptr;
  CallSink* child = nullptr;
  grpc_metadata_array trailers;
  grpc_status_code status = GRPC_STATUS_OK;
  grpc_slice details{};
  Watch() { Real().grpc_metadata_array_init(&trailers); }
  ~Watch() {
    const RealGrpc& g = Real();
    g.grpc_metadata_array_destroy(&trailers);
    g.grpc_slice_unref(details);
  }
};

// The channel every stand-in is made on, and the queue (with its thread) where they end.
// The target cannot be connected to (a path under a regular file), so wait-for-ready calls
// on it wait for their deadline or a cancellation, nothing else.
struct WatchQueue {
  grpc_channel* channel = nullptr;
  grpc_completion_queue* cq = nullptr;

  WatchQueue() {
    const RealGrpc& g = Real();
    grpc_channel_credentials* creds = g.grpc_insecure_credentials_create();
    channel = g.grpc_channel_create("unix:/dev/null/conduit-native-parent-watch", creds, nullptr);
    g.grpc_channel_credentials_release(creds);
    grpc_completion_queue_attributes attr{GRPC_CQ_CURRENT_VERSION, GRPC_CQ_NEXT, GRPC_CQ_DEFAULT_POLLING, nullptr};
    cq = g.grpc_completion_queue_create(g.grpc_completion_queue_factory_lookup(&attr), &attr, nullptr);
    SpawnDetached("the watcher of native parent calls", [this] { RunGuarded("the watcher of native parent calls", [&] { Run(); }); });
  }

  void Run() {
    const RealGrpc& g = Real();
    for (;;) {
      grpc_event ev = g.grpc_completion_queue_next(cq, g.gpr_inf_future(GPR_CLOCK_REALTIME), nullptr);
      if (ev.type == GRPC_QUEUE_SHUTDOWN) return;
      if (ev.type != GRPC_OP_COMPLETE) continue;
      Watch* w = static_cast<Watch*>(ev.tag);
      TakeOver(w);
      // Ended by core (the parent was cancelled or ran out of time) or by the child itself;
      // cancelling a child that already ended does nothing.
      if (w->status == GRPC_STATUS_CANCELLED || w->status == GRPC_STATUS_DEADLINE_EXCEEDED) {
        w->child->Cancel(w->status, w->status == GRPC_STATUS_CANCELLED ? "Cancelled (propagated from the parent call)"
                                                                       : "Deadline Exceeded (the parent call's)");
      }
      w->child->Unref();
      g.grpc_call_unref(w->stand_in);
      delete w;
    }
  }
};

WatchQueue& Queue() {
  static WatchQueue* q = new WatchQueue();
  return *q;
}

}  // namespace

grpc_call* WatchNativeParent(grpc_call* parent, uint32_t mask, CallSink* child) {
  const RealGrpc& g = Real();
  WatchQueue& q = Queue();
  const uint32_t propagate = mask & (GRPC_PROPAGATE_CANCELLATION | GRPC_PROPAGATE_DEADLINE);
  grpc_slice method = g.grpc_slice_from_static_buffer("/conduit.NativeParent/Watch", 27);
  grpc_call* stand_in = g.grpc_channel_create_call(q.channel, parent, propagate, q.cq, method, nullptr,
                                                   g.gpr_inf_future(GPR_CLOCK_REALTIME), nullptr);
  if (stand_in == nullptr) {
    CLOG_WARN("gRPC would not make a stand-in call to propagate a native parent call's cancellation; its child "
              "carried by conduitd is not cancelled with it");
    return nullptr;
  }
  auto w = new Watch();
  w->stand_in = stand_in;
  w->child = child;
  child->Ref();
  grpc_op ops[2] = {};
  ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
  ops[0].flags = GRPC_INITIAL_METADATA_WAIT_FOR_READY | GRPC_INITIAL_METADATA_WAIT_FOR_READY_EXPLICITLY_SET;
  ops[1].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
  ops[1].data.recv_status_on_client.trailing_metadata = &w->trailers;
  ops[1].data.recv_status_on_client.status = &w->status;
  ops[1].data.recv_status_on_client.status_details = &w->details;
  g.grpc_call_ref(stand_in);  // the child's, given back by EndNativeParentWatch
  HandOff(w);
  grpc_call_error err = g.grpc_call_start_batch(stand_in, ops, 2, w, nullptr);
  if (err != GRPC_CALL_OK) {
    TakeOver(w);
    CLOG_WARN("gRPC refused the stand-in call for a native parent (error %d); its child carried by conduitd is not "
              "cancelled with it",
              err);
    g.grpc_call_unref(stand_in);
    g.grpc_call_unref(stand_in);
    child->Unref();
    delete w;
    return nullptr;
  }
  return stand_in;
}

void EndNativeParentWatch(grpc_call* stand_in) {
  if (stand_in == nullptr) return;
  Real().grpc_call_cancel(stand_in, nullptr);
  Real().grpc_call_unref(stand_in);
}

}  // namespace conduit::grpcshim
