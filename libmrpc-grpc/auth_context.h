// auth_context() on a managed server call: the caller's TLS identity, as the server's
// daemon established it in its handshake and sent it with the call's Start
// (daemon/rpc/auth_properties.h), turned into a real grpc_auth_context.
//
// gRPC has no public constructor for grpc_auth_context, and its C++ API takes and drops
// references with code inlined into libgrpc++ (RefCountedPtr, SecureAuthContext), which
// also runs the context's inline destructor when it drops the last one. So the shim makes
// an object with the context's exact layout, filled by libgrpc's own exported functions
// (grpc_auth_context_add_property, grpc_auth_context_set_peer_identity_property_name): every
// function and destructor that touches it is gRPC's. The layout (is the reference count
// preceded by a trace pointer, as in builds without NDEBUG?) is learned once, at run time,
// by letting libgrpc add a property to a zeroed probe and seeing where it wrote; anything
// unexpected and auth_context() stays empty, with one log line, never a crash.
#ifndef CONDUIT_LIBMRPC_GRPC_AUTH_CONTEXT_H_
#define CONDUIT_LIBMRPC_GRPC_AUTH_CONTEXT_H_

#include <grpc/grpc_security.h>

#include <string>
#include <utility>
#include <vector>

namespace conduit::grpcshim {

using AuthProperties = std::vector<std::pair<std::string, std::string>>;

// A new context holding `props` (in order), its peer identity the SANs when there are any,
// else the common name (as gRPC picks it). The caller owns one reference
// (grpc_auth_context_release). nullptr when props is empty or the layout is unknown.
grpc_auth_context* NewAuthContext(const AuthProperties& props);
// Takes one more reference (what grpc_call_auth_context returns).
grpc_auth_context* RefAuthContext(grpc_auth_context* ctx);

}  // namespace conduit::grpcshim

#endif  // CONDUIT_LIBMRPC_GRPC_AUTH_CONTEXT_H_
