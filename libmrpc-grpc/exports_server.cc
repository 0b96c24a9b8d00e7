// Interposed server functions of gRPC's C core, and the grpc_core::Server allocator
// setters the C++ sync and callback APIs use.
#include "common/log.h"
#include "exports.h"
#include "real_grpc.h"
#include "server.h"

using conduit::grpcshim::ManagedServer;
using conduit::grpcshim::Real;

extern "C" {

CONDUIT_EXPORT grpc_server* grpc_server_create(const grpc_channel_args* args, void* reserved) {
  grpc_server* server = Real().grpc_server_create(args, reserved);
  if (server != nullptr) ManagedServer::Created(server, args);
  return server;
}

CONDUIT_EXPORT void* grpc_server_register_method(grpc_server* server, const char* method, const char* host,
                                                 grpc_server_register_method_payload_handling payload_handling,
                                                 uint32_t flags) {
  void* handle = Real().grpc_server_register_method(server, method, host, payload_handling, flags);
  if (handle != nullptr) {
    if (auto s = ManagedServer::Find(server)) s->RegisterMethod(handle, method, host, payload_handling);
  }
  return handle;
}

CONDUIT_EXPORT int grpc_server_add_http2_port(grpc_server* server, const char* addr, grpc_server_credentials* creds) {
  if (auto s = ManagedServer::Find(server)) return s->AddPort(addr, creds);
  return Real().grpc_server_add_http2_port(server, addr, creds);
}

CONDUIT_EXPORT void grpc_server_start(grpc_server* server) {
  auto s = ManagedServer::Find(server);
  if (s != nullptr) s->BeforeStart();
  Real().grpc_server_start(server);
  if (s != nullptr) s->AfterStart();
}

CONDUIT_EXPORT grpc_call_error grpc_server_request_call(grpc_server* server, grpc_call** call,
                                                        grpc_call_details* details,
                                                        grpc_metadata_array* request_metadata,
                                                        grpc_completion_queue* cq_bound_to_call,
                                                        grpc_completion_queue* cq_for_notification, void* tag_new) {
  auto s = ManagedServer::Find(server);
  if (s != nullptr && s->managed()) {
    return s->RequestCall(call, details, request_metadata, cq_bound_to_call, cq_for_notification, tag_new);
  }
  return Real().grpc_server_request_call(server, call, details, request_metadata, cq_bound_to_call,
                                         cq_for_notification, tag_new);
}

CONDUIT_EXPORT grpc_call_error grpc_server_request_registered_call(
    grpc_server* server, void* registered_method, grpc_call** call, gpr_timespec* deadline,
    grpc_metadata_array* request_metadata, grpc_byte_buffer** optional_payload,
    grpc_completion_queue* cq_bound_to_call, grpc_completion_queue* cq_for_notification, void* tag_new) {
  auto s = ManagedServer::Find(server);
  if (s != nullptr && s->managed()) {
    return s->RequestRegistered(registered_method, call, deadline, request_metadata, optional_payload,
                                cq_bound_to_call, cq_for_notification, tag_new);
  }
  return Real().grpc_server_request_registered_call(server, registered_method, call, deadline, request_metadata,
                                                    optional_payload, cq_bound_to_call, cq_for_notification,
                                                    tag_new);
}

CONDUIT_EXPORT void grpc_server_shutdown_and_notify(grpc_server* server, grpc_completion_queue* cq, void* tag) {
  auto s = ManagedServer::Find(server);
  if (s != nullptr && s->managed()) {
    s->ShutdownAndNotify(cq, tag);
    return;
  }
  Real().grpc_server_shutdown_and_notify(server, cq, tag);
}

CONDUIT_EXPORT void grpc_server_cancel_all_calls(grpc_server* server) {
  auto s = ManagedServer::Find(server);
  if (s != nullptr && s->managed()) s->CancelAll();
  Real().grpc_server_cancel_all_calls(server);
}

CONDUIT_EXPORT void grpc_server_destroy(grpc_server* server) {
  ManagedServer::Destroyed(server);
  Real().grpc_server_destroy(server);
}

}  // extern "C"

namespace grpc_core {

CONDUIT_EXPORT void Server::SetRegisteredMethodAllocator(grpc_completion_queue* cq, void* method_tag,
                                                         std::function<RegisteredCallAllocation()> allocator) {
  if (auto s = ManagedServer::FindCore(this)) {
    s->SetRegisteredAllocator(cq, method_tag, allocator);
  } else {
    CLOG_DEBUG("SetRegisteredMethodAllocator on an unknown core server %p", static_cast<void*>(this));
  }
  Real().set_registered_allocator(this, cq, method_tag, std::move(allocator));
}

CONDUIT_EXPORT void Server::SetBatchMethodAllocator(grpc_completion_queue* cq,
                                                    std::function<BatchCallAllocation()> allocator) {
  if (auto s = ManagedServer::FindCore(this)) s->SetBatchAllocator(cq, allocator);
  Real().set_batch_allocator(this, cq, std::move(allocator));
}

}  // namespace grpc_core
