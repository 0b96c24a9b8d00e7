// What the program's channel and server credentials are, as far as conduitd can carry
// them: the shim notes every credentials object the program creates through the
// interposed constructors (insecure, SSL) and forgets it at release. A channel or port
// whose credentials are not noted here (ALTS, local, xDS, TLS with a verify callback, a
// roots override callback, an auth metadata processor, several server certificates, ...)
// stays native, with one log line saying why.
//
// For SSL credentials the shim keeps the PEM texts the program gave gRPC; conduitd runs
// the TLS handshake with them between the daemons (docs/rpc-design.md, "TLS").
#ifndef CONDUIT_LIBMRPC_GRPC_CREDENTIALS_REGISTRY_H_
#define CONDUIT_LIBMRPC_GRPC_CREDENTIALS_REGISTRY_H_

#include <grpc/grpc_security.h>

#include <cstdint>
#include <memory>
#include <string>

namespace conduit::grpcshim {

// A program's SSL channel credentials (grpc_ssl_credentials_create).
struct TlsChannelCreds {
  std::string roots;  // the program's, or gRPC's default roots when it gave none
  std::string key;    // client identity, both or neither
  std::string chain;
};

// A program's SSL server credentials (grpc_ssl_server_credentials_create[_ex]).
struct TlsServerCreds {
  std::string key;
  std::string chain;
  std::string roots;  // for client certificates; may be empty
  uint32_t client_cert_mode = GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE;
};

void NoteInsecure(const void* creds);
bool IsInsecure(const void* creds);
// From the arguments of grpc_ssl_credentials_create[_ex]: SSL credentials conduitd can
// carry, or native ones with the reason. Without roots, gRPC's own default applies
// (GRPC_DEFAULT_SSL_ROOTS_FILE_PATH, else its installed roots file), read here once.
void NoteSslChannel(const void* creds, const char* roots, const grpc_ssl_pem_key_cert_pair* pair,
                    bool verify_callback);
// From the arguments of grpc_ssl_server_credentials_create[_ex].
void NoteSslServer(const void* creds, const char* roots, const grpc_ssl_pem_key_cert_pair* pairs, size_t num_pairs,
                   uint32_t client_cert_mode);
// Credentials that must stay native after all (e.g. an auth metadata processor was set).
void NoteNative(const void* creds, const std::string& why);
void ForgetCredentials(const void* creds);

// nullptr (and *why) when `creds` are not SSL credentials conduitd can carry.
std::shared_ptr<const TlsChannelCreds> TlsChannelOf(const void* creds, std::string* why);
std::shared_ptr<const TlsServerCreds> TlsServerOf(const void* creds, std::string* why);

// grpc_set_ssl_roots_override_callback was called: default roots are the program's
// callback's business, so channels without roots stay native.
void NoteRootsOverride();

}  // namespace conduit::grpcshim

#endif  // CONDUIT_LIBMRPC_GRPC_CREDENTIALS_REGISTRY_H_
