#include "real_grpc.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

namespace conduit::grpcshim {
namespace {

template <typename Fn>
void Resolve(Fn* slot, const char* name) {
  void* sym = dlsym(RTLD_NEXT, name);
  if (sym == nullptr) {
    fprintf(stderr, "conduit: libmrpc-grpc cannot find the real %s (is libgrpc.so.29 loaded?): %s\n", name,
            dlerror());
    abort();
  }
  *slot = reinterpret_cast<Fn>(sym);
}

RealGrpc Load() {
  RealGrpc r{};
#define RESOLVE(name) Resolve(&r.name, #name)
  RESOLVE(grpc_insecure_credentials_create);
  RESOLVE(grpc_insecure_server_credentials_create);
  RESOLVE(grpc_ssl_credentials_create);
  RESOLVE(grpc_ssl_credentials_create_ex);
  RESOLVE(grpc_ssl_server_credentials_create);
  RESOLVE(grpc_ssl_server_credentials_create_ex);
  RESOLVE(grpc_set_ssl_roots_override_callback);
  RESOLVE(grpc_server_credentials_set_auth_metadata_processor);
  RESOLVE(grpc_channel_credentials_release);
  RESOLVE(grpc_server_credentials_release);
  RESOLVE(grpc_channel_create);
  RESOLVE(grpc_channel_destroy);
  RESOLVE(grpc_channel_register_call);
  RESOLVE(grpc_channel_create_call);
  RESOLVE(grpc_channel_create_registered_call);
  RESOLVE(grpc_channel_check_connectivity_state);
  RESOLVE(grpc_channel_watch_connectivity_state);
  RESOLVE(grpc_call_start_batch);
  RESOLVE(grpc_call_cancel);
  RESOLVE(grpc_call_cancel_with_status);
  RESOLVE(grpc_call_ref);
  RESOLVE(grpc_call_unref);
  RESOLVE(grpc_call_get_peer);
  RESOLVE(grpc_call_arena_alloc);
  RESOLVE(grpc_call_set_credentials);
  RESOLVE(grpc_call_auth_context);
  RESOLVE(grpc_auth_context_add_property);
  RESOLVE(grpc_auth_context_add_cstring_property);
  RESOLVE(grpc_auth_context_set_peer_identity_property_name);
  RESOLVE(grpc_auth_context_release);
  RESOLVE(grpc_census_call_set_context);
  RESOLVE(grpc_census_call_get_context);
  RESOLVE(grpc_call_failed_before_recv_message);
  RESOLVE(grpc_server_create);
  RESOLVE(grpc_server_register_method);
  RESOLVE(grpc_server_add_http2_port);
  RESOLVE(grpc_server_start);
  RESOLVE(grpc_server_request_call);
  RESOLVE(grpc_server_request_registered_call);
  RESOLVE(grpc_server_shutdown_and_notify);
  RESOLVE(grpc_server_cancel_all_calls);
  RESOLVE(grpc_server_destroy);
  RESOLVE(grpc_slice_new_with_user_data);
  RESOLVE(grpc_slice_from_copied_buffer);
  RESOLVE(grpc_slice_from_static_buffer);
  RESOLVE(grpc_slice_unref);
  RESOLVE(grpc_raw_byte_buffer_create);
  RESOLVE(grpc_byte_buffer_destroy);
  RESOLVE(grpc_channel_get_target);
  RESOLVE(grpc_version_string);
  RESOLVE(gpr_malloc);
  RESOLVE(gpr_realloc);
  RESOLVE(gpr_free);
  RESOLVE(gpr_strdup);
  RESOLVE(gpr_now);
  RESOLVE(gpr_convert_clock_type);
  RESOLVE(gpr_inf_future);
  RESOLVE(grpc_init);
  RESOLVE(grpc_shutdown);
  RESOLVE(grpc_shutdown_blocking);
  RESOLVE(grpc_metadata_credentials_create_from_plugin);
  RESOLVE(grpc_composite_call_credentials_create);
  RESOLVE(grpc_access_token_credentials_create);
  RESOLVE(grpc_call_credentials_release);
  RESOLVE(grpc_server_register_completion_queue);
  RESOLVE(grpc_completion_queue_create);
  RESOLVE(grpc_completion_queue_factory_lookup);
  RESOLVE(grpc_completion_queue_next);
  RESOLVE(grpc_completion_queue_shutdown);
  RESOLVE(grpc_completion_queue_destroy);
  RESOLVE(grpc_metadata_array_init);
  RESOLVE(grpc_metadata_array_destroy);
  RESOLVE(grpc_call_details_init);
  RESOLVE(grpc_call_details_destroy);
#undef RESOLVE
  // C++-linkage symbols of libgrpc.so.29 (names as mangled by GCC for gRPC 1.51).
  Resolve(&r.grpc_call_is_trailers_only, "_Z26grpc_call_is_trailers_onlyPK9grpc_call");
  Resolve(&r.grpc_call_server_authority, "_Z26grpc_call_server_authorityPK9grpc_call");
  Resolve(&r.grpc_call_get_arena, "_Z19grpc_call_get_arenaP9grpc_call");
  Resolve(&r.grpc_call_is_client, "_Z19grpc_call_is_clientP9grpc_call");
  Resolve(&r.grpc_call_set_completion_queue, "_Z30grpc_call_set_completion_queueP9grpc_callP21grpc_completion_queue");
  Resolve(&r.grpc_call_get_call_stack, "_Z24grpc_call_get_call_stackP9grpc_call");
  Resolve(&r.grpc_call_start_batch_and_execute,
          "_Z33grpc_call_start_batch_and_executeP9grpc_callPK7grpc_opmP12grpc_closure");
  Resolve(&r.grpc_call_cancel_internal, "_Z25grpc_call_cancel_internalP9grpc_call");
  Resolve(&r.grpc_call_context_set, "_Z21grpc_call_context_setP9grpc_call18grpc_context_indexPvPFvS2_E");
  Resolve(&r.grpc_call_context_get, "_Z21grpc_call_context_getP9grpc_call18grpc_context_index");
  Resolve(&r.grpc_call_compression_for_level, "_Z31grpc_call_compression_for_levelP9grpc_call22grpc_compression_level");
  Resolve(&r.grpc_call_test_only_get_compression_algorithm,
          "_Z45grpc_call_test_only_get_compression_algorithmP9grpc_call");
  Resolve(&r.grpc_call_test_only_get_message_flags, "_Z37grpc_call_test_only_get_message_flagsP9grpc_call");
  Resolve(&r.grpc_call_test_only_get_encodings_accepted_by_peer,
          "_Z50grpc_call_test_only_get_encodings_accepted_by_peerP9grpc_call");
  Resolve(&r.grpc_channel_create_pollset_set_call,
          "_Z36grpc_channel_create_pollset_set_callP12grpc_channelP9grpc_calljP16grpc_pollset_setRK10grpc_"
          "slicePS6_N9grpc_core9TimestampEPv");
  Resolve(&r.grpc_cq_begin_op, "_Z16grpc_cq_begin_opP21grpc_completion_queuePv");
  Resolve(&r.grpc_cq_end_op,
          "_Z14grpc_cq_end_opP21grpc_completion_queuePvN4absl7debian36StatusEPFvS1_P18grpc_cq_completionES1_S6_b");
  Resolve(&r.set_batch_allocator,
          "_ZN9grpc_core6Server23SetBatchMethodAllocatorEP21grpc_completion_queueSt8functionIFNS0_"
          "19BatchCallAllocationEvEE");
  Resolve(&r.set_registered_allocator,
          "_ZN9grpc_core6Server28SetRegisteredMethodAllocatorEP21grpc_completion_queuePvSt8functionIFNS0_"
          "24RegisteredCallAllocationEvEE");
  // Optional: without them the shim reads its socket on its own thread.
  r.grpc_fd_create = reinterpret_cast<decltype(r.grpc_fd_create)>(dlsym(RTLD_NEXT, "_Z14grpc_fd_createiPKcb"));
  r.grpc_fd_notify_on_read = reinterpret_cast<decltype(r.grpc_fd_notify_on_read)>(
      dlsym(RTLD_NEXT, "_Z22grpc_fd_notify_on_readP7grpc_fdP12grpc_closure"));
  r.grpc_fd_orphan = reinterpret_cast<decltype(r.grpc_fd_orphan)>(
      dlsym(RTLD_NEXT, "_Z14grpc_fd_orphanP7grpc_fdP12grpc_closurePiPKc"));
  return r;
}

}  // namespace

const RealGrpc& Real() {
  static const RealGrpc real = Load();
  return real;
}

}  // namespace conduit::grpcshim
