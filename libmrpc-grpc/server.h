// ManagedServer: what the shim knows about one grpc_server, and, when conduitd serves it,
// how incoming managed calls reach the program.
//
// gRPC's C++ API asks the core server for calls in three ways, all interposed here:
// grpc_server_request_registered_call / grpc_server_request_call (async API), and the
// allocators of grpc_core::Server (sync and callback APIs), which the core calls whenever
// a call arrives. An incoming managed call takes the oldest request of its method (or of
// the generic, unregistered kind) or asks the allocator; with neither it waits, as in core.
//
// A server is managed when its listening port is insecure and the daemon accepts to serve
// that port for this program (grpc_server_add_http2_port). gRPC itself still binds the port
// too, for clients without the preload (native_intake.h), unless the daemon runs
// --rpc-managed-only: then the port takes calls only through conduitd. A server none of
// whose ports the daemon serves is native and everything passes through to gRPC.
#ifndef CONDUIT_LIBMRPC_GRPC_SERVER_H_
#define CONDUIT_LIBMRPC_GRPC_SERVER_H_

#include <grpc/grpc.h>

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "call.h"
#include "credentials_registry.h"
#include "daemon_connection.h"
#include "native_intake.h"
#include "real_grpc.h"

namespace conduit::grpcshim {

class ManagedServer final : public std::enable_shared_from_this<ManagedServer>,
                            public ServerCallObserver,
                            public IncomingCallHandler {
 public:
  static void Created(grpc_server* server, const grpc_channel_args* args);
  static std::shared_ptr<ManagedServer> Find(grpc_server* server);
  static std::shared_ptr<ManagedServer> FindCore(const void* core_server);
  static void Destroyed(grpc_server* server);

  bool managed() const { return managed_.load(); }

  // Interposed API (the caller already called the real function where that applies).
  void RegisterMethod(void* handle, const char* method, const char* host,
                      grpc_server_register_method_payload_handling payload);
  // grpc_server_add_http2_port: serves `addr` through conduitd where it can, binds it
  // natively where it must or may; returns what gRPC would (the port, 0 on failure).
  int AddPort(const char* addr, grpc_server_credentials* creds);
  // Around the real grpc_server_start: the native intake is set up before, started after.
  void BeforeStart();
  void AfterStart();
  void SetRegisteredAllocator(grpc_completion_queue* cq, void* method,
                              std::function<grpc_core::Server::RegisteredCallAllocation()> allocator);
  void SetBatchAllocator(grpc_completion_queue* cq, std::function<grpc_core::Server::BatchCallAllocation()> allocator);
  grpc_call_error RequestRegistered(void* method, grpc_call** call, gpr_timespec* deadline,
                                    grpc_metadata_array* metadata, grpc_byte_buffer** payload,
                                    grpc_completion_queue* cq_bound, grpc_completion_queue* cq_notify, void* tag);
  grpc_call_error RequestCall(grpc_call** call, grpc_call_details* details, grpc_metadata_array* metadata,
                              grpc_completion_queue* cq_bound, grpc_completion_queue* cq_notify, void* tag);
  void ShutdownAndNotify(grpc_completion_queue* cq, void* tag);
  void CancelAll();

  // From the connection and the calls.
  void OnIncomingCall(const std::shared_ptr<DaemonConnection>& conn, const rpc::CallEvent& start,
                      grpc_byte_buffer* message) override;
  void OnConnectionLost(const std::string& why) override;
  void OnWaitingCallChanged(ManagedCall* call) override;
  void OnCallFinished(ManagedCall* call) override;

 private:
  struct Request {
    void* tag = nullptr;
    grpc_completion_queue* cq_bound = nullptr;
    grpc_completion_queue* cq_notify = nullptr;
    grpc_call** call = nullptr;
    gpr_timespec* deadline = nullptr;
    grpc_metadata_array* metadata = nullptr;
    grpc_byte_buffer** payload = nullptr;
    grpc_call_details* details = nullptr;
  };
  // Per completion queue a request is bound to: the program's requests waiting there, and
  // the requests of ours the core server holds for native clients on it.
  struct QueueCount {
    int waiting = 0;
    int native_requested = 0;
  };
  struct Method {
    std::string name;
    void* handle = nullptr;  // the core server's; nullptr for the generic kind
    bool read_payload = false;
    std::deque<Request> requests;
    std::map<grpc_completion_queue*, QueueCount> by_cq;  // async requests only
    std::deque<std::unique_ptr<NativeIntake::Arrival>> native_waiting;
    std::deque<ManagedCall*> waiting;  // each holds a reference
    std::function<grpc_core::Server::RegisteredCallAllocation()> allocator;
    std::function<grpc_core::Server::BatchCallAllocation()> batch_allocator;
    grpc_completion_queue* allocator_cq = nullptr;
  };

  explicit ManagedServer(grpc_server* server) : server_(server) {}
  Method* MethodFor(const std::string& name);
  // Hands `call` to a request or allocator of `m`, or leaves it waiting. Takes the lock.
  void Match(Method* m, ManagedCall* call);
  void FinishShutdownIfIdle();
  // A program request (async API; its completion begun): a waiting managed or native call
  // takes it now, or it waits.
  grpc_call_error Take(Method* m, const Request& req);
  // The oldest request of `m` bound to `cq`, removed (nullopt when none). Takes no lock.
  std::optional<Request> TakeRequestLocked(Method* m, grpc_completion_queue* cq);
  void PushRequestLocked(Method* m, const Request& req);
  Request PopFrontLocked(Method* m);
  // Removes the request at `it`, keeping by_cq's count.
  Request EraseRequestLocked(Method* m, std::deque<Request>::iterator it);
  // A native call waiting for a request on `cq`, removed (nullptr when none).
  std::unique_ptr<NativeIntake::Arrival> TakeNativeLocked(Method* m, grpc_completion_queue* cq);
  // Whether to ask the core server for one more native call of `m` on `cq` (counted
  // already when true); then RequestNative does it without the lock.
  bool NeedNativeRequestLocked(Method* m, grpc_completion_queue* cq);
  void RequestNative(Method* m, grpc_completion_queue* cq);
  Method* MethodOfHandleLocked(void* handle);
  // From the intake's thread.
  void OnNativeArrival(std::unique_ptr<NativeIntake::Arrival> a);
  void OnNativeRequestFailed(void* method, grpc_completion_queue* cq);
  void OnNativeShutdownDone();
  // A port served through conduitd, and the host part of the address it was asked for
  // (the daemon carries calls to it only as a socket bound there would receive them).
  struct Port {
    int port;
    std::string host;
    std::shared_ptr<const TlsServerCreds> tls;  // nullptr: an insecure port
  };
  static Status RequestServe(const std::shared_ptr<DaemonConnection>& conn, uint64_t server, const Port& port);
  Status Serve(const std::shared_ptr<DaemonConnection>& conn, const std::vector<Port>& ports);

  grpc_server* server_;
  const void* core_server_ = nullptr;
  MessageLimits limits_;
  CompressionOptions compression_;
  std::atomic<bool> managed_{false};
  bool native_ = false;  // an earlier port went native: so do the others
  int real_ports_ = 0;   // ports gRPC itself listens on (native clients, TLS ports)
  bool started_ = false;
  std::shared_ptr<NativeIntake> intake_;  // set at start when real_ports_ and managed
  bool native_shutdown_done_ = false;
  bool shutdown_begun_ = false;  // the program's shutdown tag is begun on its queue
  uint64_t id_ = 0;

  std::mutex mu_;
  std::shared_ptr<DaemonConnection> conn_;
  std::vector<Port> ports_;
  std::map<void*, std::unique_ptr<Method>> by_handle_;
  std::map<std::string, Method*> by_name_;
  Method generic_;
  std::set<ManagedCall*> active_;  // handed to the program, not finished; each referenced
  bool shutting_down_ = false;
  bool shutdown_notified_ = false;
  grpc_completion_queue* shutdown_cq_ = nullptr;
  void* shutdown_tag_ = nullptr;
};

}  // namespace conduit::grpcshim

#endif  // CONDUIT_LIBMRPC_GRPC_SERVER_H_
