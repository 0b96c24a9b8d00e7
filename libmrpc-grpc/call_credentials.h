// Per-call credentials (ClientContext::set_credentials, grpc_call_set_credentials) on
// calls carried by conduitd, applied as gRPC applies them. On a TLS channel every level is
// sent: metadata plugins and access tokens add their metadata; gRPC's other kinds (JWT,
// Google, IAM, STS), which the shim cannot compute, fail the call with UNAUTHENTICATED and
// a message saying so. On an insecure channel:
//   * gRPC sends call credentials only over a channel at least as secure as their minimum
//     security level. Every credential gRPC itself makes (access tokens, JWT, Google, IAM,
//     STS; and composites holding one) requires privacy and integrity, so natively such a
//     call fails before it leaves the client: UNAUTHENTICATED, "Established channel does
//     not have a sufficient security level to transfer call credential."
//   * A metadata plugin made with GRPC_SECURITY_NONE (grpc::MetadataCredentialsFromPlugin
//     with that level) is asked for its metadata, which travels with the call's initial
//     metadata; a plugin's error fails the call with UNAVAILABLE, as natively.
// To know which is which, the shim notes the plugins and composites the program creates.
#ifndef CONDUIT_LIBMRPC_GRPC_CALL_CREDENTIALS_H_
#define CONDUIT_LIBMRPC_GRPC_CALL_CREDENTIALS_H_

#include <grpc/grpc_security.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace conduit::grpcshim {

// From the interposed constructors and release.
void NotePluginCredentials(const grpc_call_credentials* creds, const grpc_metadata_credentials_plugin& plugin,
                           grpc_security_level min_level);
void NoteAccessToken(const grpc_call_credentials* creds, const char* token);
void NoteCompositeCredentials(const grpc_call_credentials* composite, const grpc_call_credentials* first,
                              const grpc_call_credentials* second);
void ForgetCallCredentials(const grpc_call_credentials* creds);

struct CredentialsResult {
  grpc_status_code code = GRPC_STATUS_OK;  // not OK: the call fails with it
  std::string details;
  std::vector<std::pair<std::string, std::string>> metadata;  // to send, in order
};

// What `creds` give a call of `method` ("/pkg.Service/Method") to `authority` on a TLS or
// insecure channel. Waits at most `wait_ms` for a plugin that answers asynchronously.
CredentialsResult ApplyCallCredentials(const grpc_call_credentials* creds, std::string_view method,
                                       std::string_view authority, bool tls, int wait_ms);

}  // namespace conduit::grpcshim

#endif  // CONDUIT_LIBMRPC_GRPC_CALL_CREDENTIALS_H_
