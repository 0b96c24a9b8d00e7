// The real gRPC C-core functions behind the ones this library interposes, and the few
// others it calls, found with dlsym(RTLD_NEXT) the first time they are needed. The shim
// does not link libgrpc: a program that never loads gRPC never resolves anything here.
#ifndef CONDUIT_LIBMRPC_GRPC_REAL_GRPC_H_
#define CONDUIT_LIBMRPC_GRPC_REAL_GRPC_H_

#include <grpc/byte_buffer.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/alloc.h>
#include <grpc/support/string_util.h>
#include <grpc/support/time.h>

#include <functional>

#include "absl/status/status.h"

// Exported by libgrpc.so.29 with C++ linkage (src/core/lib/surface/completion_queue.h):
// how anything posts its own completion into a completion queue.
struct grpc_cq_completion;
bool grpc_cq_begin_op(grpc_completion_queue* cq, void* tag);
void grpc_cq_end_op(grpc_completion_queue* cq, void* tag, absl::Status error,
                    void (*done)(void* done_arg, grpc_cq_completion* storage), void* done_arg,
                    grpc_cq_completion* storage, bool internal);

namespace grpc_core {
class Arena;
// The C++ server API (sync and callback services) asks the core server for calls through
// allocators instead of grpc_server_request_*; these are the structs they return (1.51).
class Server {
 public:
  struct BatchCallAllocation {
    void* tag;
    grpc_call** call;
    grpc_metadata_array* initial_metadata;
    grpc_call_details* details;
    grpc_completion_queue* cq;
  };
  struct RegisteredCallAllocation {
    void* tag;
    grpc_call** call;
    grpc_metadata_array* initial_metadata;
    gpr_timespec* deadline;
    grpc_byte_buffer** optional_payload;
    grpc_completion_queue* cq;
  };
  void SetBatchMethodAllocator(grpc_completion_queue* cq, std::function<BatchCallAllocation()> allocator);
  void SetRegisteredMethodAllocator(grpc_completion_queue* cq, void* method_tag,
                                    std::function<RegisteredCallAllocation()> allocator);
};
}  // namespace grpc_core

// The iomgr poller (src/core/lib/iomgr/ev_posix.h): the shim's socket to conduitd is
// polled by gRPC's own pollers. A grpc_closure starts {next, cb, cb_arg, error} (debug
// builds add fields after those; the shim zeroes 128 bytes).
struct grpc_fd;
struct grpc_closure;
grpc_fd* grpc_fd_create(int fd, const char* name, bool track_err);
void grpc_fd_notify_on_read(grpc_fd* fd, grpc_closure* closure);
void grpc_fd_orphan(grpc_fd* fd, grpc_closure* on_done, int* release_fd, const char* reason);

// Internal call accessors libgrpc++ uses (C++ linkage).
bool grpc_call_is_trailers_only(const grpc_call* call);
absl::string_view grpc_call_server_authority(const grpc_call* call);
grpc_core::Arena* grpc_call_get_arena(grpc_call* call);

// The other functions libgrpc.so.29 exports that take a grpc_call* (src/core/lib/surface/
// call.h, call_test_only.h, channel.h of 1.51). Nothing outside libgrpc should call most
// of them, but any may be handed one of our calls, so all are interposed
// (tests/rpc/shim_exports_test.py checks the list against libgrpc's exports).
struct grpc_call_stack;
struct grpc_pollset_set;
enum grpc_context_index { kConduitGrpcContextCount = 5 };  // GRPC_CONTEXT_COUNT in 1.51
namespace grpc_core {
class Timestamp {  // 1.51's: a trivially copyable wrapper of milliseconds
 public:
  int64_t millis_;
};
}  // namespace grpc_core
uint8_t grpc_call_is_client(grpc_call* call);
void grpc_call_set_completion_queue(grpc_call* call, grpc_completion_queue* cq);
grpc_call_stack* grpc_call_get_call_stack(grpc_call* call);
grpc_call_error grpc_call_start_batch_and_execute(grpc_call* call, const grpc_op* ops, size_t nops,
                                                  grpc_closure* closure);
void grpc_call_cancel_internal(grpc_call* call);
void grpc_call_context_set(grpc_call* call, grpc_context_index elem, void* value, void (*destroy)(void* value));
void* grpc_call_context_get(grpc_call* call, grpc_context_index elem);
grpc_compression_algorithm grpc_call_compression_for_level(grpc_call* call, grpc_compression_level level);
grpc_compression_algorithm grpc_call_test_only_get_compression_algorithm(grpc_call* call);
uint32_t grpc_call_test_only_get_message_flags(grpc_call* call);
uint32_t grpc_call_test_only_get_encodings_accepted_by_peer(grpc_call* call);
grpc_call* grpc_channel_create_pollset_set_call(grpc_channel* channel, grpc_call* parent_call,
                                                uint32_t propagation_mask, grpc_pollset_set* pollset_set,
                                                const grpc_slice& method, const grpc_slice* host,
                                                grpc_core::Timestamp deadline, void* reserved);

namespace conduit::grpcshim {

using SetBatchAllocatorFn = void (*)(grpc_core::Server*, grpc_completion_queue*,
                                     std::function<grpc_core::Server::BatchCallAllocation()>);
using SetRegisteredAllocatorFn = void (*)(grpc_core::Server*, grpc_completion_queue*, void*,
                                          std::function<grpc_core::Server::RegisteredCallAllocation()>);

#define CONDUIT_REAL(name) decltype(&::name) name
struct RealGrpc {
  // Interposed.
  CONDUIT_REAL(grpc_insecure_credentials_create);
  CONDUIT_REAL(grpc_insecure_server_credentials_create);
  CONDUIT_REAL(grpc_ssl_credentials_create);
  CONDUIT_REAL(grpc_ssl_credentials_create_ex);
  CONDUIT_REAL(grpc_ssl_server_credentials_create);
  CONDUIT_REAL(grpc_ssl_server_credentials_create_ex);
  CONDUIT_REAL(grpc_set_ssl_roots_override_callback);
  CONDUIT_REAL(grpc_server_credentials_set_auth_metadata_processor);
  CONDUIT_REAL(grpc_channel_credentials_release);
  CONDUIT_REAL(grpc_server_credentials_release);
  CONDUIT_REAL(grpc_metadata_credentials_create_from_plugin);
  CONDUIT_REAL(grpc_composite_call_credentials_create);
  CONDUIT_REAL(grpc_access_token_credentials_create);
  CONDUIT_REAL(grpc_call_credentials_release);
  CONDUIT_REAL(grpc_channel_create);
  CONDUIT_REAL(grpc_channel_destroy);
  CONDUIT_REAL(grpc_channel_register_call);
  CONDUIT_REAL(grpc_channel_create_call);
  CONDUIT_REAL(grpc_channel_create_registered_call);
  CONDUIT_REAL(grpc_channel_check_connectivity_state);
  CONDUIT_REAL(grpc_channel_watch_connectivity_state);
  CONDUIT_REAL(grpc_call_start_batch);
  CONDUIT_REAL(grpc_call_cancel);
  CONDUIT_REAL(grpc_call_cancel_with_status);
  CONDUIT_REAL(grpc_call_ref);
  CONDUIT_REAL(grpc_call_unref);
  CONDUIT_REAL(grpc_call_get_peer);
  CONDUIT_REAL(grpc_call_arena_alloc);
  CONDUIT_REAL(grpc_call_set_credentials);
  CONDUIT_REAL(grpc_call_auth_context);
  // Used (auth_context.h).
  CONDUIT_REAL(grpc_auth_context_add_property);
  CONDUIT_REAL(grpc_auth_context_add_cstring_property);
  CONDUIT_REAL(grpc_auth_context_set_peer_identity_property_name);
  CONDUIT_REAL(grpc_auth_context_release);
  CONDUIT_REAL(grpc_census_call_set_context);
  CONDUIT_REAL(grpc_census_call_get_context);
  CONDUIT_REAL(grpc_call_failed_before_recv_message);
  CONDUIT_REAL(grpc_call_is_trailers_only);
  CONDUIT_REAL(grpc_call_server_authority);
  CONDUIT_REAL(grpc_call_get_arena);
  CONDUIT_REAL(grpc_call_is_client);
  CONDUIT_REAL(grpc_call_set_completion_queue);
  CONDUIT_REAL(grpc_call_get_call_stack);
  CONDUIT_REAL(grpc_call_start_batch_and_execute);
  CONDUIT_REAL(grpc_call_cancel_internal);
  CONDUIT_REAL(grpc_call_context_set);
  CONDUIT_REAL(grpc_call_context_get);
  CONDUIT_REAL(grpc_call_compression_for_level);
  CONDUIT_REAL(grpc_call_test_only_get_compression_algorithm);
  CONDUIT_REAL(grpc_call_test_only_get_message_flags);
  CONDUIT_REAL(grpc_call_test_only_get_encodings_accepted_by_peer);
  CONDUIT_REAL(grpc_channel_create_pollset_set_call);
  CONDUIT_REAL(grpc_server_create);
  CONDUIT_REAL(grpc_server_register_method);
  CONDUIT_REAL(grpc_server_add_http2_port);
  CONDUIT_REAL(grpc_server_start);
  CONDUIT_REAL(grpc_server_request_call);
  CONDUIT_REAL(grpc_server_request_registered_call);
  CONDUIT_REAL(grpc_server_shutdown_and_notify);
  CONDUIT_REAL(grpc_server_cancel_all_calls);
  CONDUIT_REAL(grpc_server_destroy);
  SetBatchAllocatorFn set_batch_allocator;
  SetRegisteredAllocatorFn set_registered_allocator;
  // Used, not interposed.
  CONDUIT_REAL(grpc_cq_begin_op);
  CONDUIT_REAL(grpc_cq_end_op);
  CONDUIT_REAL(grpc_slice_new_with_user_data);
  CONDUIT_REAL(grpc_slice_from_copied_buffer);
  CONDUIT_REAL(grpc_slice_from_static_buffer);
  CONDUIT_REAL(grpc_slice_unref);
  CONDUIT_REAL(grpc_raw_byte_buffer_create);
  CONDUIT_REAL(grpc_byte_buffer_destroy);
  CONDUIT_REAL(grpc_channel_get_target);
  CONDUIT_REAL(grpc_version_string);
  CONDUIT_REAL(gpr_malloc);
  CONDUIT_REAL(gpr_realloc);
  CONDUIT_REAL(gpr_free);
  CONDUIT_REAL(gpr_strdup);
  CONDUIT_REAL(gpr_now);
  CONDUIT_REAL(gpr_convert_clock_type);
  CONDUIT_REAL(gpr_inf_future);
  CONDUIT_REAL(grpc_fd_create);          // null when absent: the shim then reads on its own thread
  CONDUIT_REAL(grpc_fd_notify_on_read);
  CONDUIT_REAL(grpc_fd_orphan);
  CONDUIT_REAL(grpc_init);
  CONDUIT_REAL(grpc_shutdown);
  CONDUIT_REAL(grpc_shutdown_blocking);
  CONDUIT_REAL(grpc_server_register_completion_queue);  // the native intake (native_intake.h)
  CONDUIT_REAL(grpc_completion_queue_create);
  CONDUIT_REAL(grpc_completion_queue_factory_lookup);
  CONDUIT_REAL(grpc_completion_queue_next);
  CONDUIT_REAL(grpc_completion_queue_shutdown);
  CONDUIT_REAL(grpc_completion_queue_destroy);
  CONDUIT_REAL(grpc_metadata_array_init);
  CONDUIT_REAL(grpc_metadata_array_destroy);
  CONDUIT_REAL(grpc_call_details_init);
  CONDUIT_REAL(grpc_call_details_destroy);
};
#undef CONDUIT_REAL

// Resolved on first use; aborts with a clear message if gRPC is not loaded.
const RealGrpc& Real();

}  // namespace conduit::grpcshim

#endif  // CONDUIT_LIBMRPC_GRPC_REAL_GRPC_H_
