// What a server program's auth_context shows of a caller that TLS authenticated: the
// properties gRPC 1.51 makes of the peer's certificate (tsi's peer, then its SSL security
// connector), in its order: transport_security_type, x509_subject, x509_common_name,
// x509_pem_cert, for each SAN x509_subject_alternative_name and its typed twin (peer_dns,
// peer_email, peer_uri, peer_ip; grouped by kind here, where gRPC keeps the certificate's
// order), x509_pem_cert_chain, security_level, ssl_session_reused, peer_spiffe_id. They
// travel in the Start section to the server's shim (common/rpc_event.h, auth_bytes), which
// builds the grpc_auth_context and, as gRPC, makes the SANs the peer identity when there
// are any, else the common name.
#ifndef CONDUIT_DAEMON_RPC_AUTH_PROPERTIES_H_
#define CONDUIT_DAEMON_RPC_AUTH_PROPERTIES_H_

#include "rpc/event.h"
#include "security/tls_session.h"

namespace conduit::rpc {

Metadata AuthProperties(const TlsPeer& peer);

}  // namespace conduit::rpc

#endif  // CONDUIT_DAEMON_RPC_AUTH_PROPERTIES_H_
