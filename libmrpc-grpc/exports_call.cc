// Interposed call functions of gRPC's C core: managed calls are handled here, every other
// call goes to gRPC unchanged.

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
  if (ManagedCall::IsManaged(call)) return ManagedCall::From(call)->SetCredentials(creds);
  return Real().grpc_call_set_credentials(call, creds);
}

CONDUIT_EXPORT grpc_auth_context* grpc_call_auth_context(grpc_call* call) {
  if (ManagedCall::IsManaged(call)) return ManagedCall::From(call)->AuthContext();
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

// The rest of libgrpc's functions that take a grpc_call* (real_grpc.h says why all).

CONDUIT_EXPORT uint8_t grpc_call_is_client(grpc_call* call) {
  if (ManagedCall::IsManaged(call)) return ManagedCall::From(call)->is_client() ? 1 : 0;
  return Real().grpc_call_is_client(call);
}

CONDUIT_EXPORT void grpc_call_set_completion_queue(grpc_call* call, grpc_completion_queue* cq) {
  if (ManagedCall::IsManaged(call)) {
    ProgramUse use(call);
    ManagedCall::From(call)->SetCompletionQueue(cq);
    return;
  }
  Real().grpc_call_set_completion_queue(call, cq);
}

CONDUIT_EXPORT grpc_call_stack* grpc_call_get_call_stack(grpc_call* call) {
  if (ManagedCall::IsManaged(call)) {
    CLOG_ERROR("grpc_call_get_call_stack on a call carried by conduitd: it has no filter stack");
    return nullptr;
  }
  return Real().grpc_call_get_call_stack(call);
}

CONDUIT_EXPORT grpc_call_error grpc_call_start_batch_and_execute(grpc_call* call, const grpc_op* ops, size_t nops,
                                                                 grpc_closure* closure) {
  if (ManagedCall::IsManaged(call)) {
    // Closure-based batches are gRPC core's own (its internal clients make their calls
    // themselves); a call of ours never reaches here from a program.
    CLOG_ERROR("grpc_call_start_batch_and_execute on a call carried by conduitd is not supported");
    return GRPC_CALL_ERROR;
  }
  return Real().grpc_call_start_batch_and_execute(call, ops, nops, closure);
}

CONDUIT_EXPORT void grpc_call_cancel_internal(grpc_call* call) {
  if (ManagedCall::IsManaged(call)) {
    ProgramUse use(call);
    ManagedCall::From(call)->Cancel(GRPC_STATUS_CANCELLED, "Cancelled");
    return;
  }
  Real().grpc_call_cancel_internal(call);
}

CONDUIT_EXPORT void grpc_call_context_set(grpc_call* call, grpc_context_index elem, void* value,
                                          void (*destroy)(void* value)) {
  if (ManagedCall::IsManaged(call)) {
    ManagedCall::From(call)->ContextSet(static_cast<int>(elem), value, destroy);
    return;
  }
  Real().grpc_call_context_set(call, elem, value, destroy);
}

CONDUIT_EXPORT void* grpc_call_context_get(grpc_call* call, grpc_context_index elem) {
  if (ManagedCall::IsManaged(call)) return ManagedCall::From(call)->ContextGet(static_cast<int>(elem));
  return Real().grpc_call_context_get(call, elem);
}

CONDUIT_EXPORT grpc_compression_algorithm grpc_call_compression_for_level(grpc_call* call,
                                                                         grpc_compression_level level) {
  if (ManagedCall::IsManaged(call)) return ManagedCall::From(call)->AlgorithmForLevel(level);
  return Real().grpc_call_compression_for_level(call, level);
}

CONDUIT_EXPORT grpc_compression_algorithm grpc_call_test_only_get_compression_algorithm(grpc_call* call) {
  if (ManagedCall::IsManaged(call)) return ManagedCall::From(call)->IncomingAlgorithm();
  return Real().grpc_call_test_only_get_compression_algorithm(call);
}

CONDUIT_EXPORT uint32_t grpc_call_test_only_get_message_flags(grpc_call* call) {
  if (ManagedCall::IsManaged(call)) return ManagedCall::From(call)->LastMessageFlags();
  return Real().grpc_call_test_only_get_message_flags(call);
}

CONDUIT_EXPORT uint32_t grpc_call_test_only_get_encodings_accepted_by_peer(grpc_call* call) {
  if (ManagedCall::IsManaged(call)) return ManagedCall::From(call)->PeerAcceptedEncodings();
  return Real().grpc_call_test_only_get_encodings_accepted_by_peer(call);
}
