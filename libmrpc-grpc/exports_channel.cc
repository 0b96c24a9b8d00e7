// Interposed channel and credentials functions of gRPC's C core.
#include <atomic>
#include <functional>
#include <mutex>
#include <thread>
#include <unordered_set>

#include "byte_buffers.h"
#include "call.h"
#include "call_credentials.h"
#include "channel.h"
#include "common/detached_thread.h"
#include "common/log.h"
#include "completion.h"
#include "credentials_registry.h"
#include "exports.h"
#include "handoff.h"
#include "native_parent.h"
#include "real_grpc.h"

namespace conduit::grpcshim {
namespace {

// A child call inherits its parent's deadline when that is earlier (GRPC_PROPAGATE_DEADLINE).
gpr_timespec InheritDeadline(grpc_call* parent, uint32_t mask, gpr_timespec deadline) {
  if (parent == nullptr || !ManagedCall::IsManaged(parent) || (mask & GRPC_PROPAGATE_DEADLINE) == 0) return deadline;
  gpr_timespec inherited = ManagedCall::From(parent)->deadline();
  const RealGrpc& g = Real();
  gpr_timespec mine = g.gpr_convert_clock_type(deadline, GPR_CLOCK_MONOTONIC);
  gpr_timespec theirs = g.gpr_convert_clock_type(inherited, GPR_CLOCK_MONOTONIC);
  if (theirs.tv_sec < mine.tv_sec || (theirs.tv_sec == mine.tv_sec && theirs.tv_nsec < mine.tv_nsec)) {
    return inherited;
  }
  return deadline;
}

// After a child call exists: a managed parent cancels it when it is cancelled itself
// (GRPC_PROPAGATE_CANCELLATION); a native parent's cancellation and deadline reach a managed
// child through a stand-in core call (native_parent.h).
// Both verify-options structs of gRPC's SSL constructors: is there a callback to run?
template <typename Options>
bool HasVerifyCallback(const Options* options) {
  return options != nullptr && options->verify_peer_callback != nullptr;
}

void LinkChild(grpc_call* parent, uint32_t mask, grpc_call* child) {
  if (parent == nullptr || child == nullptr) return;
  if (ManagedCall::IsManaged(parent)) {
    if (mask & GRPC_PROPAGATE_CANCELLATION) ManagedCall::From(parent)->AddChild(child);
  } else if (ManagedCall::IsManaged(child) && (mask & (GRPC_PROPAGATE_CANCELLATION | GRPC_PROPAGATE_DEADLINE))) {
    ManagedCall* managed = ManagedCall::From(child);
    managed->SetNativeParentWatch(WatchNativeParent(parent, mask, managed));
  }
}

grpc_call* NewManagedCall(const std::shared_ptr<ManagedChannel>& ch, grpc_call* parent, uint32_t mask,
                          grpc_completion_queue* cq, std::string method, std::string authority,
                          gpr_timespec deadline) {
  deadline = InheritDeadline(parent, mask, deadline);
  std::string why;
  std::shared_ptr<DaemonConnection> conn = ch->Connection(&why);
  ManagedCall* call =
      ManagedCall::NewClient(ch, std::move(conn), cq, std::move(method), std::move(authority), deadline, ch->limits());
  if (call == nullptr) return nullptr;
  LinkChild(parent, mask, call->AsGrpc());
  HandOff(call);
  return call->AsGrpc();
}

// A native call whose parent is one of ours: gRPC must not see the parent (it would read
// it as a core call), so the shim propagates deadline and cancellation itself.
grpc_call* NewNativeChild(grpc_call* parent, uint32_t mask, gpr_timespec deadline,
                          const std::function<grpc_call*(gpr_timespec)>& create) {
  grpc_call* child = create(InheritDeadline(parent, mask, deadline));
  LinkChild(parent, mask, child);
  return child;
}

}  // namespace

}  // namespace conduit::grpcshim

using conduit::grpcshim::ManagedCall;
using conduit::grpcshim::ManagedChannel;
using conduit::grpcshim::Real;

extern "C" {

CONDUIT_EXPORT grpc_channel_credentials* grpc_insecure_credentials_create() {
  grpc_channel_credentials* c = Real().grpc_insecure_credentials_create();
  conduit::grpcshim::NoteInsecure(c);
  return c;
}

// Call credentials: which are plugins, and at what level (call_credentials.h).
CONDUIT_EXPORT grpc_call_credentials* grpc_metadata_credentials_create_from_plugin(
    grpc_metadata_credentials_plugin plugin, grpc_security_level min_security_level, void* reserved) {
  grpc_call_credentials* c = Real().grpc_metadata_credentials_create_from_plugin(plugin, min_security_level, reserved);
  if (c != nullptr) conduit::grpcshim::NotePluginCredentials(c, plugin, min_security_level);
  return c;
}

CONDUIT_EXPORT grpc_call_credentials* grpc_access_token_credentials_create(const char* access_token,
                                                                          void* reserved) {
  grpc_call_credentials* c = Real().grpc_access_token_credentials_create(access_token, reserved);
  if (c != nullptr && access_token != nullptr) conduit::grpcshim::NoteAccessToken(c, access_token);
  return c;
}

CONDUIT_EXPORT grpc_call_credentials* grpc_composite_call_credentials_create(grpc_call_credentials* creds1,
                                                                           grpc_call_credentials* creds2,
                                                                           void* reserved) {
  grpc_call_credentials* c = Real().grpc_composite_call_credentials_create(creds1, creds2, reserved);
  if (c != nullptr) conduit::grpcshim::NoteCompositeCredentials(c, creds1, creds2);
  return c;
}

CONDUIT_EXPORT void grpc_call_credentials_release(grpc_call_credentials* creds) {
  conduit::grpcshim::ForgetCallCredentials(creds);
  Real().grpc_call_credentials_release(creds);
}

// SSL credentials: their PEM texts are noted, for the daemons' TLS handshake
// (credentials_registry.h).
CONDUIT_EXPORT grpc_channel_credentials* grpc_ssl_credentials_create(const char* pem_root_certs,
                                                                     grpc_ssl_pem_key_cert_pair* pem_key_cert_pair,
                                                                     const verify_peer_options* verify_options,
                                                                     void* reserved) {
  grpc_channel_credentials* c =
      Real().grpc_ssl_credentials_create(pem_root_certs, pem_key_cert_pair, verify_options, reserved);
  conduit::grpcshim::NoteSslChannel(c, pem_root_certs, pem_key_cert_pair,
                                    conduit::grpcshim::HasVerifyCallback(verify_options));
  return c;
}

CONDUIT_EXPORT grpc_channel_credentials* grpc_ssl_credentials_create_ex(
    const char* pem_root_certs, grpc_ssl_pem_key_cert_pair* pem_key_cert_pair,
    const grpc_ssl_verify_peer_options* verify_options, void* reserved) {
  grpc_channel_credentials* c =
      Real().grpc_ssl_credentials_create_ex(pem_root_certs, pem_key_cert_pair, verify_options, reserved);
  conduit::grpcshim::NoteSslChannel(c, pem_root_certs, pem_key_cert_pair,
                                    conduit::grpcshim::HasVerifyCallback(verify_options));
  return c;
}

CONDUIT_EXPORT grpc_server_credentials* grpc_ssl_server_credentials_create(
    const char* pem_root_certs, grpc_ssl_pem_key_cert_pair* pem_key_cert_pairs, size_t num_key_cert_pairs,
    int force_client_auth, void* reserved) {
  grpc_server_credentials* c = Real().grpc_ssl_server_credentials_create(pem_root_certs, pem_key_cert_pairs,
                                                                         num_key_cert_pairs, force_client_auth, reserved);
  conduit::grpcshim::NoteSslServer(c, pem_root_certs, pem_key_cert_pairs, num_key_cert_pairs,
                                   force_client_auth ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                                     : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  return c;
}

CONDUIT_EXPORT grpc_server_credentials* grpc_ssl_server_credentials_create_ex(
    const char* pem_root_certs, grpc_ssl_pem_key_cert_pair* pem_key_cert_pairs, size_t num_key_cert_pairs,
    grpc_ssl_client_certificate_request_type client_certificate_request, void* reserved) {
  grpc_server_credentials* c = Real().grpc_ssl_server_credentials_create_ex(
      pem_root_certs, pem_key_cert_pairs, num_key_cert_pairs, client_certificate_request, reserved);
  conduit::grpcshim::NoteSslServer(c, pem_root_certs, pem_key_cert_pairs, num_key_cert_pairs,
                                   static_cast<uint32_t>(client_certificate_request));
  return c;
}

CONDUIT_EXPORT void grpc_set_ssl_roots_override_callback(grpc_ssl_roots_override_callback cb) {
  conduit::grpcshim::NoteRootsOverride();
  Real().grpc_set_ssl_roots_override_callback(cb);
}

CONDUIT_EXPORT void grpc_server_credentials_set_auth_metadata_processor(grpc_server_credentials* creds,
                                                                       grpc_auth_metadata_processor processor) {
  if (processor.process != nullptr) {
    conduit::grpcshim::NoteNative(creds, "its credentials have an auth metadata processor, which runs in gRPC");
  }
  Real().grpc_server_credentials_set_auth_metadata_processor(creds, processor);
}

CONDUIT_EXPORT grpc_server_credentials* grpc_insecure_server_credentials_create() {
  grpc_server_credentials* c = Real().grpc_insecure_server_credentials_create();
  conduit::grpcshim::NoteInsecure(c);
  return c;
}

CONDUIT_EXPORT void grpc_channel_credentials_release(grpc_channel_credentials* creds) {
  conduit::grpcshim::ForgetCredentials(creds);
  Real().grpc_channel_credentials_release(creds);
}

CONDUIT_EXPORT void grpc_server_credentials_release(grpc_server_credentials* creds) {
  conduit::grpcshim::ForgetCredentials(creds);
  Real().grpc_server_credentials_release(creds);
}

CONDUIT_EXPORT grpc_channel* grpc_channel_create(const char* target, grpc_channel_credentials* creds,
                                                 const grpc_channel_args* args) {
  grpc_channel* ch = Real().grpc_channel_create(target, creds, args);
  if (ch == nullptr || target == nullptr) return ch;
  std::string why;
  if (conduit::grpcshim::IsInsecure(creds)) {
    ManagedChannel::Open(ch, target, args, nullptr);
  } else if (auto tls = conduit::grpcshim::TlsChannelOf(creds, &why)) {
    ManagedChannel::Open(ch, target, args, std::move(tls));
  } else {
    CLOG_INFO("channel to %s uses native gRPC: %s", target, why.c_str());
  }
  return ch;
}

CONDUIT_EXPORT void grpc_channel_destroy(grpc_channel* channel) {
  ManagedChannel::Forget(channel);
  Real().grpc_channel_destroy(channel);
}

CONDUIT_EXPORT void* grpc_channel_register_call(grpc_channel* channel, const char* method, const char* host,
                                                void* reserved) {
  if (auto ch = ManagedChannel::Find(channel)) return ch->RegisterMethod(method, host);
  return Real().grpc_channel_register_call(channel, method, host, reserved);
}

CONDUIT_EXPORT grpc_call* grpc_channel_create_call(grpc_channel* channel, grpc_call* parent_call,
                                                   uint32_t propagation_mask, grpc_completion_queue* cq,
                                                   grpc_slice method, const grpc_slice* host, gpr_timespec deadline,
                                                   void* reserved) {
  if (auto ch = ManagedChannel::Find(channel)) {
    std::string m(conduit::grpcshim::SliceView(method));
    std::string authority = host != nullptr ? std::string(conduit::grpcshim::SliceView(*host)) : ch->authority();
    return conduit::grpcshim::NewManagedCall(ch, parent_call, propagation_mask, cq, std::move(m),
                                             std::move(authority), deadline);
  }
  if (parent_call != nullptr && ManagedCall::IsManaged(parent_call)) {
    return conduit::grpcshim::NewNativeChild(parent_call, propagation_mask, deadline, [&](gpr_timespec d) {
      return Real().grpc_channel_create_call(channel, nullptr, propagation_mask, cq, method, host, d, reserved);
    });
  }
  return Real().grpc_channel_create_call(channel, parent_call, propagation_mask, cq, method, host, deadline, reserved);
}

CONDUIT_EXPORT grpc_call* grpc_channel_create_registered_call(grpc_channel* channel, grpc_call* parent_call,
                                                              uint32_t propagation_mask,
                                                              grpc_completion_queue* completion_queue,
                                                              void* registered_call_handle, gpr_timespec deadline,
                                                              void* reserved) {
  if (auto ch = ManagedChannel::Find(channel)) {
    auto* r = static_cast<ManagedChannel::Registered*>(registered_call_handle);
    return conduit::grpcshim::NewManagedCall(ch, parent_call, propagation_mask, completion_queue, r->method,
                                             r->host.empty() ? ch->authority() : r->host, deadline);
  }
  if (parent_call != nullptr && ManagedCall::IsManaged(parent_call)) {
    return conduit::grpcshim::NewNativeChild(parent_call, propagation_mask, deadline, [&](gpr_timespec d) {
      return Real().grpc_channel_create_registered_call(channel, nullptr, propagation_mask, completion_queue,
                                                        registered_call_handle, d, reserved);
    });
  }
  return Real().grpc_channel_create_registered_call(channel, parent_call, propagation_mask, completion_queue,
                                                    registered_call_handle, deadline, reserved);
}

CONDUIT_EXPORT grpc_connectivity_state grpc_channel_check_connectivity_state(grpc_channel* channel,
                                                                            int try_to_connect) {
  if (auto ch = ManagedChannel::Find(channel)) {
    std::string why;
    auto conn = ch->Connection(&why);
    return conn != nullptr && conn->alive() ? GRPC_CHANNEL_READY : GRPC_CHANNEL_TRANSIENT_FAILURE;
  }
  return Real().grpc_channel_check_connectivity_state(channel, try_to_connect);
}

CONDUIT_EXPORT void grpc_channel_watch_connectivity_state(grpc_channel* channel,
                                                          grpc_connectivity_state last_observed_state,
                                                          gpr_timespec deadline, grpc_completion_queue* cq,
                                                          void* tag) {
  auto ch = ManagedChannel::Find(channel);
  if (ch == nullptr) {
    Real().grpc_channel_watch_connectivity_state(channel, last_observed_state, deadline, cq, tag);
    return;
  }
  if (!conduit::grpcshim::BeginCompletion(cq, tag)) return;
  grpc_connectivity_state now = grpc_channel_check_connectivity_state(channel, 0);
  if (now != last_observed_state) {
    conduit::grpcshim::PostCompletion(cq, tag, true);
    return;
  }
  // A managed channel stays in its state; report the deadline passing, as gRPC would.
  gpr_timespec mono = Real().gpr_convert_clock_type(deadline, GPR_CLOCK_MONOTONIC);
  gpr_timespec start = Real().gpr_now(GPR_CLOCK_MONOTONIC);
  int64_t ms = (mono.tv_sec - start.tv_sec) * 1000 + (mono.tv_nsec - start.tv_nsec) / 1000000;
  conduit::SpawnDetached("a channel watch", [cq, tag, ms] {
    if (ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(std::min<int64_t>(ms, 1ll << 40)));
    conduit::grpcshim::PostCompletion(cq, tag, false);
  });
}

}  // extern "C"

// gRPC core's own clients (xDS, ALTS handshakes) make calls this way; a parent of ours
// is dropped (with its deadline applied) rather than read as a core call.
CONDUIT_EXPORT grpc_call* grpc_channel_create_pollset_set_call(grpc_channel* channel, grpc_call* parent_call,
                                                               uint32_t propagation_mask,
                                                               grpc_pollset_set* pollset_set,
                                                               const grpc_slice& method, const grpc_slice* host,
                                                               grpc_core::Timestamp deadline, void* reserved) {
  if (parent_call != nullptr && ManagedCall::IsManaged(parent_call)) {
    CLOG_WARN("a gRPC-internal call with a parent carried by conduitd: created without the parent");
    parent_call = nullptr;
  }
  return Real().grpc_channel_create_pollset_set_call(channel, parent_call, propagation_mask, pollset_set, method,
                                                     host, deadline, reserved);
}
