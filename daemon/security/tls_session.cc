// TLS 1.3 handshakes over memory BIOs, keys from the exporter (see tls_session.h for why).
//
// OpenSSL keeps its errors in a per-thread queue: every call that can fail here starts
// from an empty queue (ERR_clear_error) and leaves it empty (the text goes into the
// Status), so one handshake's errors never show up in another's message.
#include "security/tls_session.h"

#include <arpa/inet.h>
#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstring>
#include <utility>

#include "security/openssl_errors.h"

namespace conduit {

namespace tls_internal {
void SslCtxFree::operator()(ssl_ctx_st* ctx) const { SSL_CTX_free(ctx); }
void SslFree::operator()(ssl_st* ssl) const { SSL_free(ssl); }
}  // namespace tls_internal

namespace {

template <typename T, void (*Free)(T*)>
struct Freer {
  void operator()(T* p) const { Free(p); }
};
using BioPtr = std::unique_ptr<BIO, Freer<BIO, BIO_free_all>>;
using X509Ptr = std::unique_ptr<X509, Freer<X509, X509_free>>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, Freer<EVP_PKEY, EVP_PKEY_free>>;
using StorePtr = std::unique_ptr<X509_STORE, Freer<X509_STORE, X509_STORE_free>>;
using NamesPtr = std::unique_ptr<GENERAL_NAMES, Freer<GENERAL_NAMES, GENERAL_NAMES_free>>;

constexpr char kExporterLabel[] = "EXPORTER-conduit-rpc-tls-v1";
constexpr size_t kKeyBlockBytes = 2 * (32 + 12);
// A PEM from a program's credentials: a full public root bundle is ~250 KiB, so this only
// stops a runaway buffer (and keeps lengths inside OpenSSL's int).
constexpr size_t kMaxPemBytes = 8u << 20;
// A key PEM is never encrypted here (gRPC hands over plain PEM); without this callback
// OpenSSL would prompt on the daemon's terminal for a passphrase.
int NoPassphrase(char*, int, int, void*) { return 0; }

std::string BioText(BIO* bio) {
  char* data = nullptr;
  long len = BIO_get_mem_data(bio, &data);
  return len > 0 ? std::string(data, static_cast<size_t>(len)) : std::string();
}

Status PemBio(std::string_view pem, const char* what, BioPtr* out) {
  if (pem.size() > kMaxPemBytes) {
    return InvalidArgument("the %s is %zu bytes, over the %zu-byte limit", what, pem.size(), kMaxPemBytes);
  }
  out->reset(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (*out == nullptr) return InternalError("no memory BIO for the %s", what);
  return Status::Ok();
}

// Every certificate of a PEM, in order; other PEM blocks are skipped by OpenSSL.
Status ReadCerts(std::string_view pem, const char* what, std::vector<X509Ptr>* out) {
  BioPtr bio;
  CONDUIT_RETURN_IF_ERROR(PemBio(pem, what, &bio));
  ERR_clear_error();
  for (;;) {
    X509* cert = PEM_read_bio_X509(bio.get(), nullptr, NoPassphrase, nullptr);
    if (cert != nullptr) {
      out->emplace_back(cert);
      continue;
    }
    // The end of the input reads as "no start line"; anything else is a broken block.
    unsigned long e = ERR_peek_last_error();
    if (ERR_GET_LIB(e) == ERR_LIB_PEM && ERR_GET_REASON(e) == PEM_R_NO_START_LINE) {
      ERR_clear_error();
      break;
    }
    return InvalidArgument("the %s is malformed: %s", what, DrainOpenSslErrors().c_str());
  }
  if (out->empty()) return InvalidArgument("no certificate in the %s", what);
  return Status::Ok();
}

Status ReadKey(std::string_view pem, const char* what, PkeyPtr* out) {
  BioPtr bio;
  CONDUIT_RETURN_IF_ERROR(PemBio(pem, what, &bio));
  ERR_clear_error();
  out->reset(PEM_read_bio_PrivateKey(bio.get(), nullptr, NoPassphrase, nullptr));
  if (*out == nullptr) {
    return InvalidArgument("no usable private key in the %s (encrypted keys are not supported): %s", what,
                           DrainOpenSslErrors().c_str());
  }
  return Status::Ok();
}

// Installs `who`'s key and chain (leaf first) as the certificate this side presents.
Status UseIdentity(SSL_CTX* ctx, const std::string& key_pem, const std::string& chain_pem, const char* who) {
  const std::string key_what = std::string(who) + " key PEM";
  const std::string chain_what = std::string(who) + " certificate chain PEM";
  PkeyPtr key;
  CONDUIT_RETURN_IF_ERROR(ReadKey(key_pem, key_what.c_str(), &key));
  std::vector<X509Ptr> chain;
  CONDUIT_RETURN_IF_ERROR(ReadCerts(chain_pem, chain_what.c_str(), &chain));
  ERR_clear_error();
  if (X509_check_private_key(chain[0].get(), key.get()) != 1) {
    ERR_clear_error();
    return InvalidArgument("%s key does not match its certificate (the first one in the chain PEM)", who);
  }
  // SSL_CTX_use_* also applies the security level (key sizes, signature digests).
  if (SSL_CTX_use_certificate(ctx, chain[0].get()) != 1 || SSL_CTX_use_PrivateKey(ctx, key.get()) != 1) {
    return InvalidArgument("the %s certificate or key is unusable for TLS: %s", who, DrainOpenSslErrors().c_str());
  }
  for (size_t i = 1; i < chain.size(); ++i) {
    if (SSL_CTX_add1_chain_cert(ctx, chain[i].get()) != 1) {
      return InvalidArgument("certificate %zu of the %s chain is unusable: %s", i + 1, who, DrainOpenSslErrors().c_str());
    }
  }
  return Status::Ok();
}

// Makes the certificates of `pem` the roots `ctx` verifies the other side's chain against.
Status UseRoots(SSL_CTX* ctx, const std::string& pem, const char* what) {
  std::vector<X509Ptr> roots;
  CONDUIT_RETURN_IF_ERROR(ReadCerts(pem, what, &roots));
  StorePtr store(X509_STORE_new());
  if (store == nullptr) return InternalError("no X509_STORE for the %s", what);
  ERR_clear_error();
  for (const X509Ptr& root : roots) {
    if (X509_STORE_add_cert(store.get(), root.get()) != 1) {
      return InvalidArgument("a certificate of the %s cannot be a root: %s", what, DrainOpenSslErrors().c_str());
    }
  }
  SSL_CTX_set_cert_store(ctx, store.release());  // the context owns it now
  return Status::Ok();
}

// What both sides share: TLS 1.3 only; no tickets, no session cache, so nothing follows
// the handshake and nothing is resumed without a fresh certificate check.
Status NewBaseContext(const SSL_METHOD* method, tls_internal::SslCtxPtr* out) {
  ERR_clear_error();
  out->reset(SSL_CTX_new(method));
  SSL_CTX* ctx = out->get();
  if (ctx == nullptr || SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) != 1 ||
      SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION) != 1 || SSL_CTX_set_num_tickets(ctx, 0) != 1) {
    return InternalError("cannot set up a TLS context: %s", DrainOpenSslErrors().c_str());
  }
  SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
  // The handshake bytes travel inside the daemon's frames, never past a middlebox as TLS,
  // so the dummy ChangeCipherSpec records of middlebox compatibility mode are just noise.
  SSL_CTX_clear_options(ctx, SSL_OP_ENABLE_MIDDLEBOX_COMPAT);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  // OpenSSL completes the chain this side presents from the roots it trusts, as it does
  // for gRPC's own TLS (which leaves auto-chaining on): the other side sees the chain, the
  // errors and the auth_context property x509_pem_cert_chain that native gRPC would show.
  return Status::Ok();
}

bool IsIpLiteral(const std::string& name) {
  unsigned char buf[16];
  return inet_pton(AF_INET, name.c_str(), buf) == 1 || inet_pton(AF_INET6, name.c_str(), buf) == 1;
}

Status CheckServerName(const std::string& name, bool* is_ip) {
  if (name.empty()) return InvalidArgument("server_name is empty: a TLS client must name the server it expects");
  if (name.find('\0') != std::string::npos || name.size() > 253) {
    return InvalidArgument("server_name is not a host name (%zu bytes, or a NUL byte in it)", name.size());
  }
  *is_ip = IsIpLiteral(name);
  if (!*is_ip && name.find_first_of(":/ []") != std::string::npos) {
    return InvalidArgument("server_name '%s' is neither a DNS name nor an IP address (give the host alone, no port)",
                           name.c_str());
  }
  return Status::Ok();
}

const char* ModeName(ClientCertMode mode) {
  switch (mode) {
    case ClientCertMode::kDontRequest: return "DONT_REQUEST_CLIENT_CERTIFICATE";
    case ClientCertMode::kRequestButDontVerify: return "REQUEST_CLIENT_CERTIFICATE_BUT_DONT_VERIFY";
    case ClientCertMode::kRequestAndVerify: return "REQUEST_CLIENT_CERTIFICATE_AND_VERIFY";
    case ClientCertMode::kRequireButDontVerify: return "REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_BUT_DONT_VERIFY";
    case ClientCertMode::kRequireAndVerify: return "REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY";
  }
  return nullptr;
}

bool ModeVerifies(ClientCertMode mode) {
  return mode == ClientCertMode::kRequestAndVerify || mode == ClientCertMode::kRequireAndVerify;
}

int ModeVerifyFlags(ClientCertMode mode) {
  switch (mode) {
    case ClientCertMode::kDontRequest: return SSL_VERIFY_NONE;
    case ClientCertMode::kRequestButDontVerify:
    case ClientCertMode::kRequestAndVerify: return SSL_VERIFY_PEER;
    case ClientCertMode::kRequireButDontVerify:
    case ClientCertMode::kRequireAndVerify: return SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
  }
  return SSL_VERIFY_NONE;
}

// ---- What the other side's leaf certificate says --------------------------------------

std::string AsnText(const ASN1_STRING* s) {
  return std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                     static_cast<size_t>(ASN1_STRING_length(s)));
}

bool HasNul(const std::string& s) { return s.find('\0') != std::string::npos; }

std::string CommonName(X509* cert) {
  X509_NAME* subject = X509_get_subject_name(cert);
  int index = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
  if (index < 0) return "";
  unsigned char* utf8 = nullptr;
  int len = ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, index)));
  std::string cn;
  if (len > 0) cn.assign(reinterpret_cast<const char*>(utf8), static_cast<size_t>(len));
  OPENSSL_free(utf8);
  return HasNul(cn) ? "" : cn;
}

void AddName(std::string name, std::vector<std::string>* to) {
  if (!name.empty() && !HasNul(name)) to->push_back(std::move(name));
}

void ReadAltNames(X509* cert, TlsPeer* peer) {
  NamesPtr names(static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr)));
  if (names == nullptr) return;
  for (int i = 0; i < sk_GENERAL_NAME_num(names.get()); ++i) {
    const GENERAL_NAME* name = sk_GENERAL_NAME_value(names.get(), i);
    switch (name->type) {
      case GEN_DNS: AddName(AsnText(name->d.dNSName), &peer->dns_names); break;
      case GEN_URI: AddName(AsnText(name->d.uniformResourceIdentifier), &peer->uris); break;
      case GEN_EMAIL: AddName(AsnText(name->d.rfc822Name), &peer->emails); break;
      case GEN_IPADD: {
        const ASN1_OCTET_STRING* ip = name->d.iPAddress;
        char text[INET6_ADDRSTRLEN] = {};
        int family = ASN1_STRING_length(ip) == 4 ? AF_INET : ASN1_STRING_length(ip) == 16 ? AF_INET6 : 0;
        if (family != 0 && inet_ntop(family, ASN1_STRING_get0_data(ip), text, sizeof(text)) != nullptr) {
          peer->ips.push_back(text);
        }
        break;
      }
      default: break;  // other kinds (directory names, otherName) are not part of gRPC's view
    }
  }
}

void DescribeCertificate(X509* cert, TlsPeer* peer) {
  peer->has_certificate = true;
  peer->common_name = CommonName(cert);
  ReadAltNames(cert, peer);
  BioPtr subject(BIO_new(BIO_s_mem()));
  if (subject != nullptr && X509_NAME_print_ex(subject.get(), X509_get_subject_name(cert), 0, XN_FLAG_RFC2253) >= 0) {
    peer->subject = BioText(subject.get());
  }
  BioPtr pem(BIO_new(BIO_s_mem()));
  if (pem != nullptr && PEM_write_bio_X509(pem.get(), cert) == 1) peer->pem = BioText(pem.get());
}

// Moves what OpenSSL wrote for the other side onto the end of *out.
void AppendPending(BIO* wbio, std::string* out) {
  char buf[16 * 1024];
  for (;;) {
    int n = BIO_read(wbio, buf, sizeof(buf));
    if (n <= 0) break;
    out->append(buf, static_cast<size_t>(n));
  }
}

Status Prefixed(const char* prefix, const Status& st) { return Status(st.code(), prefix + st.message()); }

}  // namespace

// ---- Contexts ------------------------------------------------------------------------

Status TlsClientContext::Create(const TlsClientConfig& config, std::shared_ptr<const TlsClientContext>* out) {
  if (out == nullptr) return InvalidUsage("TlsClientContext::Create needs an output");
  if (config.root_pem.empty()) {
    return InvalidArgument("root_pem is empty: a TLS client needs the roots the server's certificate must lead to");
  }
  bool is_ip = false;
  CONDUIT_RETURN_IF_ERROR(CheckServerName(config.server_name, &is_ip));
  if (config.key_pem.empty() != config.chain_pem.empty()) {
    return InvalidArgument("a client identity needs both key_pem and chain_pem (%s is empty)",
                           config.key_pem.empty() ? "key_pem" : "chain_pem");
  }
  std::shared_ptr<TlsClientContext> ctx(new TlsClientContext());
  ctx->config_ = config;
  ctx->server_name_is_ip_ = is_ip;
  CONDUIT_RETURN_IF_ERROR(NewBaseContext(TLS_client_method(), &ctx->ctx_));
  CONDUIT_RETURN_IF_ERROR(UseRoots(ctx->ctx_.get(), config.root_pem, "roots PEM"));
  if (!config.key_pem.empty()) {
    CONDUIT_RETURN_IF_ERROR(UseIdentity(ctx->ctx_.get(), config.key_pem, config.chain_pem, "client"));
  }
  // The name check runs inside chain verification (every SSL copies these parameters), so
  // a mismatch fails the handshake like an untrusted chain does.
  X509_VERIFY_PARAM* param = SSL_CTX_get0_param(ctx->ctx_.get());
  ERR_clear_error();
  int set = 0;
  if (is_ip) {
    set = X509_VERIFY_PARAM_set1_ip_asc(param, config.server_name.c_str());
  } else {
    X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    set = X509_VERIFY_PARAM_set1_host(param, config.server_name.c_str(), config.server_name.size());
  }
  if (set != 1) {
    return InvalidArgument("server_name '%s' is unusable: %s", config.server_name.c_str(), DrainOpenSslErrors().c_str());
  }
  *out = std::move(ctx);
  return Status::Ok();
}

Status TlsServerContext::Create(const TlsServerConfig& config, std::shared_ptr<const TlsServerContext>* out) {
  if (out == nullptr) return InvalidUsage("TlsServerContext::Create needs an output");
  if (ModeName(config.mode) == nullptr) {
    return InvalidArgument("unknown client certificate request type %u", static_cast<unsigned>(config.mode));
  }
  if (config.key_pem.empty()) return InvalidArgument("the server key_pem is empty: a TLS server needs its key");
  if (config.chain_pem.empty()) {
    return InvalidArgument("the server chain_pem is empty: a TLS server needs its certificate chain");
  }
  if (ModeVerifies(config.mode) && config.client_root_pem.empty()) {
    return InvalidArgument("client_root_pem is empty but %s verifies client certificates against it",
                           ModeName(config.mode));
  }
  std::shared_ptr<TlsServerContext> ctx(new TlsServerContext());
  ctx->config_ = config;
  CONDUIT_RETURN_IF_ERROR(NewBaseContext(TLS_server_method(), &ctx->ctx_));
  CONDUIT_RETURN_IF_ERROR(UseIdentity(ctx->ctx_.get(), config.key_pem, config.chain_pem, "server"));
  if (!config.client_root_pem.empty()) {
    CONDUIT_RETURN_IF_ERROR(UseRoots(ctx->ctx_.get(), config.client_root_pem, "client roots PEM"));
  }
  *out = std::move(ctx);
  return Status::Ok();
}

// ---- One handshake ---------------------------------------------------------------------

TlsHandshake::~TlsHandshake() = default;

Status TlsHandshake::NewClient(std::shared_ptr<const TlsClientContext> ctx, std::unique_ptr<TlsHandshake>* out) {
  if (ctx == nullptr || out == nullptr) return InvalidUsage("TlsHandshake::NewClient needs a context and an output");
  std::unique_ptr<TlsHandshake> h(new TlsHandshake());
  h->is_client_ = true;
  h->client_ctx_ = std::move(ctx);
  ERR_clear_error();
  SSL* ssl = SSL_new(h->client_ctx_->ctx_.get());
  if (ssl == nullptr) return InternalError("cannot start a TLS client: %s", DrainOpenSslErrors().c_str());
  h->ssl_.reset(ssl);
  if (!h->client_ctx_->server_name_is_ip() &&
      SSL_set_tlsext_host_name(ssl, h->client_ctx_->server_name().c_str()) != 1) {
    return InternalError("cannot set the TLS server name: %s", DrainOpenSslErrors().c_str());
  }
  SSL_set_verify(ssl, SSL_VERIFY_PEER, &TlsHandshake::VerifyCallback);
  SSL_set_connect_state(ssl);
  CONDUIT_RETURN_IF_ERROR(h->Attach(ssl));
  *out = std::move(h);
  return Status::Ok();
}

Status TlsHandshake::NewServer(std::shared_ptr<const TlsServerContext> ctx, std::unique_ptr<TlsHandshake>* out) {
  if (ctx == nullptr || out == nullptr) return InvalidUsage("TlsHandshake::NewServer needs a context and an output");
  std::unique_ptr<TlsHandshake> h(new TlsHandshake());
  h->server_ctx_ = std::move(ctx);
  const ClientCertMode mode = h->server_ctx_->mode();
  h->accept_any_certificate_ =
      mode == ClientCertMode::kRequestButDontVerify || mode == ClientCertMode::kRequireButDontVerify;
  ERR_clear_error();
  SSL* ssl = SSL_new(h->server_ctx_->ctx_.get());
  if (ssl == nullptr) return InternalError("cannot start a TLS server: %s", DrainOpenSslErrors().c_str());
  h->ssl_.reset(ssl);
  const int flags = ModeVerifyFlags(mode);
  SSL_set_verify(ssl, flags, flags == SSL_VERIFY_NONE ? nullptr : &TlsHandshake::VerifyCallback);
  SSL_set_accept_state(ssl);
  CONDUIT_RETURN_IF_ERROR(h->Attach(ssl));
  *out = std::move(h);
  return Status::Ok();
}

// Gives the SSL its two memory BIOs (it owns them) and a way back to this object.
Status TlsHandshake::Attach(SSL* ssl) {
  BIO* rbio = BIO_new(BIO_s_mem());
  BIO* wbio = BIO_new(BIO_s_mem());
  if (rbio == nullptr || wbio == nullptr) {
    BIO_free(rbio);
    BIO_free(wbio);
    return InternalError("no memory BIOs for a TLS handshake");
  }
  SSL_set_bio(ssl, rbio, wbio);
  rbio_ = rbio;
  wbio_ = wbio;
  SSL_set_app_data(ssl, this);
  return Status::Ok();
}

// Remembers the first problem with the other side's chain (for the message, and so that
// `verified` is false when a *ButDontVerify server let a bad chain through).
int TlsHandshake::VerifyCallback(int preverify_ok, X509_STORE_CTX* store_ctx) {
  SSL* ssl = static_cast<SSL*>(X509_STORE_CTX_get_ex_data(store_ctx, SSL_get_ex_data_X509_STORE_CTX_idx()));
  TlsHandshake* self = ssl == nullptr ? nullptr : static_cast<TlsHandshake*>(SSL_get_app_data(ssl));
  if (self == nullptr) return 0;
  if (preverify_ok != 1 && self->verify_error_ == 0) {
    self->verify_error_ = X509_STORE_CTX_get_error(store_ctx);
    if (self->verify_error_ == 0) self->verify_error_ = X509_V_ERR_UNSPECIFIED;
  }
  return self->accept_any_certificate_ ? 1 : preverify_ok;
}

Status TlsHandshake::Fail(Status status) {
  failure_ = std::move(status);
  return failure_;
}

Status TlsHandshake::Step(std::string_view in, std::string* out) {
  if (out == nullptr) return InvalidUsage("TlsHandshake::Step needs an output string");
  if (!failure_.ok()) return failure_;
  if (done_) {
    return InvalidUsage("the TLS handshake is already done: nothing more comes from the %s", peer_name());
  }
  const bool first_client_step = is_client_ && steps_ == 0;
  if (first_client_step && !in.empty()) {
    return InvalidUsage("the TLS client's first Step takes no bytes: the client sends the first flight");
  }
  if (!first_client_step && in.empty()) return Fail(RemoteError("an empty TLS flight from the %s", peer_name()));
  if (in.size() > kMaxStepInput) {
    return Fail(RemoteError("a TLS flight of %zu bytes from the %s is over the %zu-byte limit", in.size(), peer_name(),
                            kMaxStepInput));
  }
  if (++steps_ > kMaxSteps) {
    return Fail(RemoteError("the TLS handshake with the %s did not finish in %d steps", peer_name(), kMaxSteps));
  }
  ERR_clear_error();
  if (!in.empty() && BIO_write(rbio_, in.data(), static_cast<int>(in.size())) != static_cast<int>(in.size())) {
    return Fail(InternalError("cannot buffer a TLS flight: %s", DrainOpenSslErrors().c_str()));
  }
  const int r = SSL_do_handshake(ssl_.get());
  const int ssl_error = r == 1 ? SSL_ERROR_NONE : SSL_get_error(ssl_.get(), r);
  const size_t before = out->size();
  AppendPending(wbio_, out);  // on failure: the alert, for the caller to forward if it likes
  if (r == 1) return Finish();
  if (ssl_error != SSL_ERROR_WANT_READ) return Fail(HandshakeError(ssl_error));
  // Every whole TLS 1.3 flight gets an answer or finishes the handshake; waiting for more
  // with nothing to say means the flight was cut short.
  if (out->size() == before && !first_client_step) {
    ERR_clear_error();
    return Fail(
        RemoteError("the TLS flight from the %s (%zu bytes) ends in the middle of a message", peer_name(), in.size()));
  }
  ERR_clear_error();
  return Status::Ok();
}

Status TlsHandshake::Finish() {
  ERR_clear_error();
  const size_t extra = BIO_ctrl_pending(rbio_);
  if (extra != 0) {
    return Fail(RemoteError("the %s sent %zu bytes after its last TLS handshake message", peer_name(), extra));
  }
  X509* cert = SSL_get0_peer_certificate(ssl_.get());
  if (is_client_ && (cert == nullptr || SSL_get_verify_result(ssl_.get()) != X509_V_OK || verify_error_ != 0)) {
    // Cannot happen with SSL_VERIFY_PEER; refuse rather than hand out unauthenticated keys.
    return Fail(InternalError("the TLS handshake finished without a verified server certificate"));
  }
  TlsPeer peer;
  if (cert != nullptr) {
    DescribeCertificate(cert, &peer);
    if (STACK_OF(X509)* chain = SSL_get_peer_cert_chain(ssl_.get())) {
      BioPtr text(BIO_new(BIO_s_mem()));
      for (int i = 0; text != nullptr && i < sk_X509_num(chain); ++i) PEM_write_bio_X509(text.get(), sk_X509_value(chain, i));
      if (text != nullptr) peer.chain_pem = BioText(text.get());
    }
    peer.verified = verify_error_ == 0 && SSL_get_verify_result(ssl_.get()) == X509_V_OK;
  }
  peer.protocol = SSL_get_version(ssl_.get());
  const SSL_CIPHER* cipher = SSL_get_current_cipher(ssl_.get());
  if (cipher != nullptr) peer.cipher = SSL_CIPHER_get_name(cipher);
  ERR_clear_error();
  peer_ = std::move(peer);
  done_ = true;
  return Status::Ok();
}

// Turns a failed SSL_do_handshake into a message a human can act on, OpenSSL's text last.
Status TlsHandshake::HandshakeError(int ssl_error) const {
  std::vector<unsigned long> codes;
  const std::string text = DrainOpenSslErrors(&codes);
  bool no_peer_cert = false;
  int alert = -1;
  for (unsigned long e : codes) {
    if (ERR_GET_LIB(e) != ERR_LIB_SSL) continue;
    const int reason = ERR_GET_REASON(e);
    if (reason == SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE) no_peer_cert = true;
    // A TLS alert the other side sent shows as a reason code in this range.
    if (reason >= SSL_AD_REASON_OFFSET && reason < SSL_AD_REASON_OFFSET + 256) alert = reason - SSL_AD_REASON_OFFSET;
  }

  const std::string peer = peer_name();
  std::string what;
  if (verify_error_ != 0 && !accept_any_certificate_) {
    if (is_client_ &&
        (verify_error_ == X509_V_ERR_HOSTNAME_MISMATCH || verify_error_ == X509_V_ERR_IP_ADDRESS_MISMATCH)) {
      what = "the server's certificate does not match '" + client_ctx_->server_name() + "'";
    } else {
      what = "the " + peer +
             "'s certificate was refused: certificate verify failed: " + X509_verify_cert_error_string(verify_error_);
    }
  } else if (no_peer_cert) {
    what = "the server requires a client certificate and the client sent none";
  } else if (alert == SSL_AD_CERTIFICATE_REQUIRED) {
    what =
        "the server requires a client certificate (it refused the handshake with the TLS alert 'certificate required')";
  } else if (alert >= 0) {
    what = "the " + peer + " refused the handshake with the TLS alert '" + SSL_alert_desc_string_long(alert) + "'";
  } else if (ssl_error == SSL_ERROR_SSL) {
    what = "a malformed or unexpected TLS handshake message from the " + peer;
  } else {
    what = "the TLS handshake with the " + peer + " failed (SSL_get_error " + std::to_string(ssl_error) + ")";
  }
  return Status(ncclRemoteError, what + " (OpenSSL: " + text + ")");
}

Status TlsHandshake::Keys(DirectionKeys* send, DirectionKeys* recv) const {
  if (send == nullptr || recv == nullptr) return InvalidUsage("TlsHandshake::Keys needs two outputs");
  if (!done_) return InvalidUsage("TLS record keys asked for before the handshake is done");
  uint8_t block[kKeyBlockBytes];
  ERR_clear_error();
  if (SSL_export_keying_material(ssl_.get(), block, sizeof(block), kExporterLabel, sizeof(kExporterLabel) - 1, nullptr,
                                 0, 0) != 1) {
    return InternalError("the TLS exporter failed: %s", DrainOpenSslErrors().c_str());
  }
  const uint8_t* client_to_server = block;
  const uint8_t* server_to_client = block + kKeyBlockBytes / 2;
  const uint8_t* mine = is_client_ ? client_to_server : server_to_client;
  const uint8_t* theirs = is_client_ ? server_to_client : client_to_server;
  std::memcpy(send->key.data(), mine, 32);
  std::memcpy(send->salt.data(), mine + 32, 12);
  std::memcpy(recv->key.data(), theirs, 32);
  std::memcpy(recv->salt.data(), theirs + 32, 12);
  OPENSSL_cleanse(block, sizeof(block));
  return Status::Ok();
}

// ---- Both ends in one process ------------------------------------------------------------

Status HandshakeInMemory(std::shared_ptr<const TlsClientContext> client, std::shared_ptr<const TlsServerContext> server,
                         TlsPeer* client_sees, TlsPeer* server_sees) {
  if (client_sees == nullptr || server_sees == nullptr) return InvalidUsage("HandshakeInMemory needs two outputs");
  std::unique_ptr<TlsHandshake> c;
  std::unique_ptr<TlsHandshake> s;
  CONDUIT_RETURN_IF_ERROR(TlsHandshake::NewClient(std::move(client), &c));
  CONDUIT_RETURN_IF_ERROR(TlsHandshake::NewServer(std::move(server), &s));
  std::string to_server;
  std::string to_client;
  Status st = c->Step("", &to_server);
  if (!st.ok()) return Prefixed("the client refused the handshake: ", st);
  // The client sends first and last; each round is one flight each way.
  for (int round = 0; round < TlsHandshake::kMaxSteps && !s->done(); ++round) {
    to_client.clear();
    st = s->Step(to_server, &to_client);
    if (!st.ok()) return Prefixed("the server refused the handshake: ", st);
    to_server.clear();
    if (c->done()) {
      if (!to_client.empty()) return InternalError("the TLS server sent a flight after the client was done");
      continue;
    }
    st = c->Step(to_client, &to_server);
    if (!st.ok()) return Prefixed("the client refused the handshake: ", st);
  }
  if (!c->done() || !s->done()) return InternalError("the in-memory TLS handshake did not finish");
  *client_sees = c->peer();
  *server_sees = s->peer();
  return Status::Ok();
}

}  // namespace conduit
