// Shared by the interposed entry points (exports_*.cc): what makes a symbol visible to the
// dynamic linker, and the credentials this process created as insecure.
#ifndef CONDUIT_LIBMRPC_GRPC_EXPORTS_H_
#define CONDUIT_LIBMRPC_GRPC_EXPORTS_H_

#define CONDUIT_EXPORT __attribute__((visibility("default")))

namespace conduit::grpcshim {

// Credentials objects made by grpc_insecure_*credentials_create and not yet released:
// only channels and ports using them can be carried by conduitd (it does not do TLS).
void NoteInsecure(const void* creds);
void ForgetCredentials(const void* creds);
bool IsInsecure(const void* creds);

}  // namespace conduit::grpcshim

#endif  // CONDUIT_LIBMRPC_GRPC_EXPORTS_H_
