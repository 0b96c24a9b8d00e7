// TLS 1.3 handshakes run by the daemon on behalf of gRPC programs whose SSL credentials it
// carries: the client program's channel credentials (roots, optional client identity, the
// name the server must prove) and the server program's server credentials (identity, roots
// for clients, gRPC's client-certificate-request mode). OpenSSL's libssl does the handshake;
// the daemon only carries its bytes, in frames between two daemons (TlsHandshake::Step) or
// in memory when both programs are on the same daemon (HandshakeInMemory).
//
// Only the handshake is TLS. The daemon-to-daemon connection already has framing and its
// own sealed records (aead_record_cipher.h), so the caller does not run TLS's record layer
// on top of it: it takes one AES-256-GCM key and nonce salt per direction from the TLS
// exporter (RFC 8446 section 7.5, Keys()). In TLS 1.3 the exporter secret is derived from
// the same master secret as TLS's own traffic keys and over the full handshake transcript
// (both Finished messages, the certificates and their signatures), so these keys are as
// bound to the certificates that were verified as TLS's own keys would be, and a party
// that did not complete this very handshake cannot compute them.
//
// Policy: TLS 1.3 only, no session tickets or resumption (nothing is sent after the
// handshake, and every handshake verifies certificates afresh), memory BIOs only.
#ifndef CONDUIT_DAEMON_SECURITY_TLS_SESSION_H_
#define CONDUIT_DAEMON_SECURITY_TLS_SESSION_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "security/aead_record_cipher.h"

// OpenSSL's types, kept out of this header.
struct ssl_ctx_st;         // SSL_CTX
struct ssl_st;             // SSL
struct bio_st;             // BIO
struct x509_store_ctx_st;  // X509_STORE_CTX

namespace conduit {

// gRPC's grpc_ssl_client_certificate_request_type values, as the shim passes them.
enum class ClientCertMode : uint32_t {
  kDontRequest = 0,
  kRequestButDontVerify = 1,
  kRequestAndVerify = 2,
  kRequireButDontVerify = 3,
  kRequireAndVerify = 4,
};

struct TlsClientConfig {
  std::string root_pem;   // roots the server's chain must lead to (non-empty)
  std::string key_pem;    // client identity: key and chain, both or neither
  std::string chain_pem;  // leaf first, then intermediates
  // The server's certificate must match it: a DNS name (wildcards as OpenSSL's
  // X509_check_host, no partial-label wildcards such as "f*.example.com"), or an IPv4/IPv6
  // literal (X509_check_ip). A host, without a port. Also sent as SNI when it is a DNS name.
  std::string server_name;
};

struct TlsServerConfig {
  std::string key_pem;          // required
  std::string chain_pem;        // required, leaf first
  std::string client_root_pem;  // may be empty; required by the two *AndVerify modes
  ClientCertMode mode = ClientCertMode::kDontRequest;
};

// What a finished handshake proved about the other side (the properties gRPC's
// auth_context shows for TLS).
struct TlsPeer {
  bool has_certificate = false;
  // The chain was verified against this side's roots (for a server in a *ButDontVerify
  // mode: true only when the client's chain happened to verify against client_root_pem).
  bool verified = false;
  std::string common_name;  // subject CN of the leaf, "" when none
  // The leaf's subjectAltNames by kind; ips as text ("10.0.0.1", "::1"). A name holding a
  // NUL byte (never legitimate, a classic spoofing trick) is left out, as is such a CN.
  std::vector<std::string> dns_names, uris, emails, ips;
  std::string subject;   // RFC 2253 one-line subject (X509_NAME_print_ex, XN_FLAG_RFC2253)
  std::string pem;       // the leaf certificate in PEM
  std::string chain_pem;  // the chain the peer sent, as OpenSSL keeps it (SSL_get_peer_cert_chain), in PEM
  std::string protocol;  // e.g. "TLSv1.3"
  std::string cipher;    // e.g. "TLS_AES_128_GCM_SHA256"
};

namespace tls_internal {
struct SslCtxFree {
  void operator()(ssl_ctx_st* ctx) const;
};
struct SslFree {
  void operator()(ssl_st* ssl) const;
};
using SslCtxPtr = std::unique_ptr<ssl_ctx_st, SslCtxFree>;
using SslPtr = std::unique_ptr<ssl_st, SslFree>;
}  // namespace tls_internal

// A parsed, checked client configuration: PEMs parsed once, the key matches its leaf.
// Errors are InvalidArgument naming what is wrong ("client key does not match its
// certificate", "no certificate in the roots PEM", "server_name is empty", ...).
// Immutable, shareable across threads (each handshake gets its own SSL from it).
class TlsClientContext {
 public:
  static Status Create(const TlsClientConfig& config, std::shared_ptr<const TlsClientContext>* out);

  const std::string& server_name() const { return config_.server_name; }
  bool server_name_is_ip() const { return server_name_is_ip_; }
  // What it was made from (a live upgrade hands it to the next process, which makes it again).
  const TlsClientConfig& config() const { return config_; }

 private:
  friend class TlsHandshake;
  TlsClientContext() = default;

  tls_internal::SslCtxPtr ctx_;
  TlsClientConfig config_;
  bool server_name_is_ip_ = false;
};

// A parsed, checked server configuration; errors and sharing as TlsClientContext.
class TlsServerContext {
 public:
  static Status Create(const TlsServerConfig& config, std::shared_ptr<const TlsServerContext>* out);

  ClientCertMode mode() const { return config_.mode; }
  // What it was made from (a live upgrade hands it to the next process, which makes it again).
  const TlsServerConfig& config() const { return config_; }

 private:
  friend class TlsHandshake;
  TlsServerContext() = default;

  tls_internal::SslCtxPtr ctx_;
  TlsServerConfig config_;
};

// One handshake, driven by the caller, one flight at a time. Step() takes the flight the
// other side sent (empty for the client's first call, and only then) and appends to *out
// the flight that must go to the other side (possibly nothing).
//
// Who sends last: the client. A full handshake is
//   client Step("")  -> A (ClientHello)
//   server Step(A)   -> B (ServerHello ... server Finished)
//   client Step(B)   -> C (client Certificate if asked ... client Finished); client done()
//   server Step(C)   -> nothing;                                             server done()
// (a HelloRetryRequest adds one round trip before B). So the client is done first and
// must still hand C to the server; the server never sends anything once it is done, and
// nothing is expected from the other side by a side that is done. The client learns that
// the server refused its certificate only from the caller (the server's Step fails after
// the client is already done).
//
// Each `in` must be one whole flight, as the other side's Step produced it: a flight that
// leaves this side waiting for more bytes is refused as truncated. Step refuses an `in`
// larger than 256 KiB and a 17th Step. A failed verification or a malformed message is a
// RemoteError whose message a human can act on ("the server's certificate does not match
// 'foo.test.google.fr'", "certificate verify failed: unable to get local issuer
// certificate", "the server requires a client certificate ...") with OpenSSL's error text.
// On failure *out may hold a TLS alert, which the caller may forward so that the other side
// learns why; the handshake is then dead and every later Step returns the same failure.
// Misuse (Step after done(), a non-empty first client flight) is InvalidUsage.
// Not thread-safe: one thread at a time.
class TlsHandshake {
 public:
  static Status NewClient(std::shared_ptr<const TlsClientContext> ctx, std::unique_ptr<TlsHandshake>* out);
  static Status NewServer(std::shared_ptr<const TlsServerContext> ctx, std::unique_ptr<TlsHandshake>* out);
  ~TlsHandshake();
  TlsHandshake(const TlsHandshake&) = delete;
  TlsHandshake& operator=(const TlsHandshake&) = delete;

  static constexpr size_t kMaxStepInput = 256 * 1024;
  static constexpr int kMaxSteps = 16;

  Status Step(std::string_view in, std::string* out);
  bool done() const { return done_; }
  bool is_client() const { return is_client_; }

  // After done(): the other side (an empty TlsPeer before), and this side's record keys
  // from the exporter with label "EXPORTER-conduit-rpc-tls-v1", no context, 88 bytes:
  // bytes [0,44) = client->server key(32)+salt(12), [44,88) = server->client. `send` and
  // `recv` are from this side's point of view, so one side's send is the other's recv.
  TlsPeer peer() const { return peer_; }
  Status Keys(DirectionKeys* send, DirectionKeys* recv) const;

 private:
  TlsHandshake() = default;
  Status Attach(ssl_st* ssl);
  const char* peer_name() const { return is_client_ ? "server" : "client"; }
  static int VerifyCallback(int preverify_ok, x509_store_ctx_st* store_ctx);
  Status Fail(Status status);
  Status HandshakeError(int ssl_error) const;
  Status Finish();

  std::shared_ptr<const TlsClientContext> client_ctx_;
  std::shared_ptr<const TlsServerContext> server_ctx_;
  tls_internal::SslPtr ssl_;
  bio_st* rbio_ = nullptr;  // owned by ssl_: what the other side sent
  bio_st* wbio_ = nullptr;  // owned by ssl_: what goes to the other side
  bool is_client_ = false;
  bool accept_any_certificate_ = false;  // a server in a *ButDontVerify mode
  int verify_error_ = 0;                 // first X509_V_ERR_* seen on the peer's chain
  int steps_ = 0;
  bool done_ = false;
  Status failure_;
  TlsPeer peer_;
};

// Same host: both ends in one process; runs the two handshakes against each other in
// memory. *client_sees = the server as the client saw it, *server_sees = the client as the
// server saw it. On failure the Status says which side refused and why ("the client refused
// the handshake: ...", "the server refused the handshake: ...").
Status HandshakeInMemory(std::shared_ptr<const TlsClientContext> client, std::shared_ptr<const TlsServerContext> server,
                         TlsPeer* client_sees, TlsPeer* server_sees);

}  // namespace conduit

#endif  // CONDUIT_DAEMON_SECURITY_TLS_SESSION_H_
