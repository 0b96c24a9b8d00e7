#include "native_intake.h"

#include <utility>

#include "common/detached_thread.h"
#include "common/log.h"
#include "common/thread_guard.h"
#include "handoff.h"
#include "real_grpc.h"

namespace conduit::grpcshim {

NativeIntake::Arrival::Arrival() {
  Real().grpc_metadata_array_init(&metadata);
  Real().grpc_call_details_init(&details);
}

NativeIntake::Arrival::~Arrival() {
  const RealGrpc& g = Real();
  if (call != nullptr) {
    g.grpc_call_cancel_with_status(call, GRPC_STATUS_UNAVAILABLE, "server is shutting down", nullptr);
    g.grpc_call_unref(call);
  }
  if (payload != nullptr) g.grpc_byte_buffer_destroy(payload);
  g.grpc_metadata_array_destroy(&metadata);
  g.grpc_call_details_destroy(&details);
}

NativeIntake::NativeIntake(grpc_server* server, Handlers handlers)
    : server_(server), handlers_(std::move(handlers)) {
  // A queue that does no I/O polling: the intake's thread only waits for its completions.
  // (A polling one made it one more poller of the program's sockets, so the frames of
  // managed calls could be read on it and handed to the program's thread: one more hop.)
  grpc_completion_queue_attributes attr{GRPC_CQ_CURRENT_VERSION, GRPC_CQ_NEXT, GRPC_CQ_NON_POLLING, nullptr};
  cq_ = Real().grpc_completion_queue_create(Real().grpc_completion_queue_factory_lookup(&attr), &attr, nullptr);
  Real().grpc_server_register_completion_queue(server_, cq_, nullptr);
}

void NativeIntake::Start() {
  SpawnDetached("the native intake of a managed server", [self = shared_from_this()] { RunGuarded("the native intake of a managed server", [&] { self->Run(); }); });
}

bool NativeIntake::Request(void* method, bool with_payload, grpc_completion_queue* cq_bound) {
  auto a = std::make_unique<Arrival>();
  a->method = method;
  a->cq_bound = cq_bound;
  HandOff(a.get());  // taken over by the intake's thread, through gRPC's queue
  const RealGrpc& g = Real();
  grpc_call_error err =
      method != nullptr
          ? g.grpc_server_request_registered_call(server_, method, &a->call, &a->deadline, &a->metadata,
                                                  with_payload ? &a->payload : nullptr, cq_bound, cq_, a.get())
          : g.grpc_server_request_call(server_, &a->call, &a->details, &a->metadata, cq_bound, cq_, a.get());
  if (err != GRPC_CALL_OK) {
    if (!shutdown_called_.load()) CLOG_WARN("gRPC refused a request for native clients (error %d)", err);
    return false;
  }
  a.release();  // comes back through the queue
  return true;
}

void NativeIntake::Shutdown() {
  if (shutdown_called_.exchange(true)) return;
  Real().grpc_server_shutdown_and_notify(server_, cq_, &shutdown_called_);
}

void NativeIntake::Hand(std::unique_ptr<Arrival> a, grpc_call** call, gpr_timespec* deadline,
                        grpc_metadata_array* metadata, grpc_byte_buffer** payload, grpc_call_details* details) {
  *call = a->call;
  a->call = nullptr;
  if (deadline != nullptr) *deadline = a->deadline;
  // gRPC fills the arrays a request names; the program's own (empty) ones are released
  // with the Arrival.
  if (metadata != nullptr) std::swap(*metadata, a->metadata);
  if (payload != nullptr) {
    *payload = a->payload;
    a->payload = nullptr;
  }
  if (details != nullptr) std::swap(*details, a->details);
}

void NativeIntake::Run() {
  const RealGrpc& g = Real();
  for (;;) {
    grpc_event ev = g.grpc_completion_queue_next(cq_, g.gpr_inf_future(GPR_CLOCK_REALTIME), nullptr);
    if (ev.type == GRPC_QUEUE_SHUTDOWN) break;
    if (ev.type != GRPC_OP_COMPLETE) continue;
    if (ev.tag == &shutdown_called_) {
      handlers_.shutdown_done();
      g.grpc_completion_queue_shutdown(cq_);  // ends the loop once the failed requests are read
      continue;
    }
    TakeOver(ev.tag);
    std::unique_ptr<Arrival> a(static_cast<Arrival*>(ev.tag));
    if (ev.success != 0 && a->call != nullptr) {
      handlers_.arrived(std::move(a));
    } else {
      void* method = a->method;
      grpc_completion_queue* cq_bound = a->cq_bound;
      a.reset();
      handlers_.failed(method, cq_bound);
    }
  }
  g.grpc_completion_queue_destroy(cq_);
}

}  // namespace conduit::grpcshim
