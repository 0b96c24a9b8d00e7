// Interposed call functions of gRPC's C core: managed calls are handled here, every other
// call goes to gRPC unchanged.
#include <atomic>

#include "call.h"
#include "common/log.h"
#include "exports.h"
#include "handoff.h"
#include "real_grpc.h"

using conduit::grpcshim::ManagedCall;
using conduit::grpcshim::ProgramUse;
using conduit::grpcshim::Real;

extern "C" {

CONDUIT_EXPORT grpc_call_error grpc_call_start_batch(grpc_call* call, const grpc_op* ops, size_t nops, void* tag,
                                                     void* reserved) {
  if (ManagedCall::IsManaged(call)) {
    ProgramUse use(call);
    if (reserved != nullptr) return GRPC_CALL_ERROR;
    return ManagedCall::From(call)->StartBatch(ops, nops, tag);
  }
  return Real().grpc_call_start_batch(call, ops, nops, tag, reserved);
}

CONDUIT_EXPORT grpc_call_error grpc_call_cancel(grpc_call* call, void* reserved) {
  if (ManagedCall::IsManaged(call)) {
    ProgramUse use(call);
    return ManagedCall::From(call)->Cancel(GRPC_STATUS_CANCELLED, "Cancelled");
  }
  return Real().grpc_call_cancel(call, reserved);
}

CONDUIT_EXPORT grpc_call_error grpc_call_cancel_with_status(grpc_call* call, grpc_status_code status,
                                                            const char* description, void* reserved) {
  if (ManagedCall::IsManaged(call)) {
    ProgramUse use(call);
    return ManagedCall::From(call)->Cancel(status, description);
  }
  return Real().grpc_call_cancel_with_status(call, status, description, reserved);
}

CONDUIT_EXPORT void grpc_call_ref(grpc_call* call) {
  if (ManagedCall::IsManaged(call)) {
    ProgramUse use(call);
    ManagedCall::From(call)->AppRef();
    return;
  }
  Real().grpc_call_ref(call);
}

CONDUIT_EXPORT void grpc_call_unref(grpc_call* call) {
  if (ManagedCall::IsManaged(call)) {
    ProgramUse use(call);
    ManagedCall::From(call)->AppUnref();
    return;
  }
  Real().grpc_call_unref(call);
}

CONDUIT_EXPORT char* grpc_call_get_peer(grpc_call* call) {
  if (ManagedCall::IsManaged(call)) {
    ProgramUse use(call);
    return ManagedCall::From(call)->Peer();
  }
  return Real().grpc_call_get_peer(call);
}

CONDUIT_EXPORT void* grpc_call_arena_alloc(grpc_call* call, size_t size) {
  if (ManagedCall::IsManaged(call)) {
    ProgramUse use(call);
    return ManagedCall::From(call)->ArenaAlloc(size);
  }
  return Real().grpc_call_arena_alloc(call, size);
}

CONDUIT_EXPORT grpc_call_error grpc_call_set_credentials(grpc_call* call, grpc_call_credentials* creds) {
  if (ManagedCall::IsManaged(call)) {
    static std::atomic<bool> logged{false};
    if (!logged.exchange(true)) CLOG_WARN("per-call credentials are ignored on calls carried by conduitd");
    return GRPC_CALL_OK;
  }
  return Real().grpc_call_set_credentials(call, creds);
}

CONDUIT_EXPORT grpc_auth_context* grpc_call_auth_context(grpc_call* call) {
  if (ManagedCall::IsManaged(call)) return nullptr;  // no transport security on managed calls
  return Real().grpc_call_auth_context(call);
}

CONDUIT_EXPORT void grpc_census_call_set_context(grpc_call* call, struct census_context* context) {
  if (ManagedCall::IsManaged(call)) return;
  Real().grpc_census_call_set_context(call, context);
}

CONDUIT_EXPORT struct census_context* grpc_census_call_get_context(grpc_call* call) {
  if (ManagedCall::IsManaged(call)) return nullptr;
  return Real().grpc_census_call_get_context(call);
}

CONDUIT_EXPORT int grpc_call_failed_before_recv_message(const grpc_call* c) {
  if (ManagedCall::IsManaged(c)) {
    ProgramUse use(c);
    return ManagedCall::From(c)->FailedBeforeRecvMessage();
  }
  return Real().grpc_call_failed_before_recv_message(c);
}

}  // extern "C"

CONDUIT_EXPORT bool grpc_call_is_trailers_only(const grpc_call* call) {
  if (ManagedCall::IsManaged(call)) {
    ProgramUse use(call);
    return ManagedCall::From(call)->TrailersOnly();
  }
  return Real().grpc_call_is_trailers_only(call);
}

CONDUIT_EXPORT absl::string_view grpc_call_server_authority(const grpc_call* call) {
  if (ManagedCall::IsManaged(call)) {
    ProgramUse use(call);
    return ManagedCall::From(call)->Authority();
  }
  return Real().grpc_call_server_authority(call);
}

CONDUIT_EXPORT grpc_core::Arena* grpc_call_get_arena(grpc_call* call) {
  if (ManagedCall::IsManaged(call)) {
    CLOG_ERROR("grpc_call_get_arena on a call carried by conduitd (call metric recording is not supported)");
    return nullptr;
  }
  return Real().grpc_call_get_arena(call);
}
