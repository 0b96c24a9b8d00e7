// NativeIntake: how a managed server also serves clients without the preload.
//
// A managed server keeps its ports bound by gRPC itself beside the daemon's path (unless
// the daemon says --rpc-managed-only), so plain clients, health checkers and grpcurl reach
// it during a gradual rollout. Their calls arrive at gRPC's own core server:
//   * the sync and callback APIs take calls through allocators, which the shim passes on
//     to the core server as well: a native call simply runs, nothing to do here;
//   * the async API's requests (grpc_server_request_call / _registered_call) are held by
//     the shim, which matches them with managed calls. For native clients the shim asks the
//     core server on the program's behalf: one request of ours per request of the program
//     that waits, bound to the program's queue (the native call's operations complete
//     where the program expects them), notified on the intake's own queue. Whichever comes
//     first, a managed call or a native one, takes the program's request; a native call
//     that finds none waits for the next one on its queue.
// The intake's queue also receives the core server's shutdown notification, so that the
// program's shutdown completes only when native and managed calls are both done.
#ifndef CONDUIT_LIBMRPC_GRPC_NATIVE_INTAKE_H_
#define CONDUIT_LIBMRPC_GRPC_NATIVE_INTAKE_H_

#include <grpc/grpc.h>

#include <atomic>
#include <functional>
#include <memory>
#include <thread>

namespace conduit::grpcshim {

class NativeIntake : public std::enable_shared_from_this<NativeIntake> {
 public:
  // A native call one of our requests returned, with what came with it.
  struct Arrival {
    Arrival();
    // Releases whatever was not handed to the program: a call still here is cancelled
    // (UNAVAILABLE) and released.
    ~Arrival();
    Arrival(const Arrival&) = delete;
    Arrival& operator=(const Arrival&) = delete;

    void* method = nullptr;  // the registered method's handle; nullptr: the generic kind
    grpc_completion_queue* cq_bound = nullptr;
    grpc_call* call = nullptr;
    gpr_timespec deadline{};
    grpc_metadata_array metadata{};
    grpc_byte_buffer* payload = nullptr;
    grpc_call_details details{};
  };

  struct Handlers {
    std::function<void(std::unique_ptr<Arrival>)> arrived;
    // A request came back without a call (the core server is shutting down).
    std::function<void(void* method, grpc_completion_queue* cq_bound)> failed;
    // The core server's shutdown completed (no native call left).
    std::function<void()> shutdown_done;
  };

  // Registers the intake's queue with `server`: before grpc_server_start.
  NativeIntake(grpc_server* server, Handlers handlers);
  NativeIntake(const NativeIntake&) = delete;
  NativeIntake& operator=(const NativeIntake&) = delete;

  // After grpc_server_start: starts the thread that reads the intake's queue. It ends
  // after the shutdown completed.
  void Start();
  // One request of the core server, for `method` (nullptr: generic), bound to `cq_bound`.
  // False when the core server refused it (then nothing arrives for it).
  bool Request(void* method, bool with_payload, grpc_completion_queue* cq_bound);
  // Shuts the core server down (it stops listening at once); handlers.shutdown_done runs
  // when its calls are over.
  void Shutdown();

  // Hands a native call to the program's request: moves it into the request's outputs
  // (those the request has; the others stay null).
  static void Hand(std::unique_ptr<Arrival> a, grpc_call** call, gpr_timespec* deadline,
                   grpc_metadata_array* metadata, grpc_byte_buffer** payload, grpc_call_details* details);

 private:
  void Run();

  grpc_server* server_;
  Handlers handlers_;
  grpc_completion_queue* cq_ = nullptr;
  std::atomic<bool> shutdown_called_{false};
};

}  // namespace conduit::grpcshim

#endif  // CONDUIT_LIBMRPC_GRPC_NATIVE_INTAKE_H_
