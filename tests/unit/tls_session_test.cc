// TLS 1.3 handshakes for gRPC programs' SSL credentials (daemon/security/tls_session.h),
// driven flight by flight the way two daemons carry them, and in memory: who is
// authenticated and what each side sees of the other, the keys the exporter gives each
// side, every client-certificate mode, the configuration errors, and hostile bytes.
// The certificates are made here with OpenSSL's API: a test CA, an unrelated CA, an
// intermediate, server and client leaves, a self-signed client.
#include "security/tls_session.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/uio.h>

#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "security/aead_record_cipher.h"

namespace conduit {
namespace {

struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct X509Free {
  void operator()(X509* p) const { X509_free(p); }
};
struct BioFree {
  void operator()(BIO* p) const { BIO_free_all(p); }
};
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;
using X509Ptr = std::unique_ptr<X509, X509Free>;
using BioPtr = std::unique_ptr<BIO, BioFree>;

std::string BioText(BIO* bio) {
  char* data = nullptr;
  long len = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<size_t>(len));
}

// A key and its certificate, with their PEMs.
struct Identity {
  PkeyPtr key;
  X509Ptr cert;
  std::string key_pem;
  std::string cert_pem;
};

PkeyPtr NewKey() { return PkeyPtr(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256")); }

void AddExtension(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  ASSERT_NE(ext, nullptr) << value;
  ASSERT_EQ(X509_add_ext(cert, ext, -1), 1);
  X509_EXTENSION_free(ext);
}

// A certificate for `cn` with subjectAltNames `san` ("DNS:a,IP:1.2.3.4", may be empty),
// signed by `issuer` (self-signed when null); a CA when `is_ca`.
Identity Make(const std::string& cn, const Identity* issuer, bool is_ca, const std::string& san) {
  static long serial = 1;
  Identity id;
  id.key = NewKey();
  id.cert.reset(X509_new());
  X509* x = id.cert.get();
  EXPECT_NE(id.key, nullptr);
  X509_set_version(x, X509_VERSION_3);
  ASN1_INTEGER_set(X509_get_serialNumber(x), serial++);
  X509_gmtime_adj(X509_getm_notBefore(x), -3600);
  X509_gmtime_adj(X509_getm_notAfter(x), 24 * 3600);
  X509_NAME* name = X509_get_subject_name(x);
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>("Conduit Test"), -1, -1,
                             0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509_set_issuer_name(x, issuer != nullptr ? X509_get_subject_name(issuer->cert.get()) : name);
  X509_set_pubkey(x, id.key.get());
  X509* signer = issuer != nullptr ? issuer->cert.get() : x;
  AddExtension(x, signer, NID_subject_key_identifier, "hash");
  if (issuer != nullptr) AddExtension(x, signer, NID_authority_key_identifier, "keyid:always");
  if (is_ca) {
    AddExtension(x, signer, NID_basic_constraints, "critical,CA:TRUE");
    AddExtension(x, signer, NID_key_usage, "critical,keyCertSign,cRLSign");
  } else {
    AddExtension(x, signer, NID_basic_constraints, "critical,CA:FALSE");
    AddExtension(x, signer, NID_key_usage, "critical,digitalSignature");
    AddExtension(x, signer, NID_ext_key_usage, "serverAuth,clientAuth");
  }
  if (!san.empty()) AddExtension(x, signer, NID_subject_alt_name, san.c_str());
  EXPECT_GT(X509_sign(x, issuer != nullptr ? issuer->key.get() : id.key.get(), EVP_sha256()), 0);

  BioPtr key_bio(BIO_new(BIO_s_mem()));
  EXPECT_EQ(PEM_write_bio_PrivateKey(key_bio.get(), id.key.get(), nullptr, nullptr, 0, nullptr, nullptr), 1);
  id.key_pem = BioText(key_bio.get());
  BioPtr cert_bio(BIO_new(BIO_s_mem()));
  EXPECT_EQ(PEM_write_bio_X509(cert_bio.get(), x), 1);
  id.cert_pem = BioText(cert_bio.get());
  return id;
}

// Everything the tests need, made once.
struct Pki {
  Identity ca = Make("Conduit Test CA", nullptr, true, "");
  Identity other_ca = Make("Unrelated CA", nullptr, true, "");
  Identity intermediate = Make("Conduit Intermediate CA", &ca, true, "");
  Identity server = Make("server.test.example.com", &ca, false,
                         "DNS:server.test.example.com,DNS:*.test.example.com,IP:192.168.1.3,IP:::1");
  Identity server_via_intermediate = Make("deep.example.net", &intermediate, false, "DNS:deep.example.net");
  Identity client = Make("client-1", &ca, false,
                         "DNS:client1.test,URI:spiffe://conduit.test/client-1,email:client1@example.com,IP:10.0.0.1");
  Identity self_signed_client = Make("lonely client", nullptr, false, "DNS:lonely.test");
  PkeyPtr stray_key = NewKey();
  std::string stray_key_pem;

  Pki() {
    BioPtr bio(BIO_new(BIO_s_mem()));
    PEM_write_bio_PrivateKey(bio.get(), stray_key.get(), nullptr, nullptr, 0, nullptr, nullptr);
    stray_key_pem = BioText(bio.get());
  }
};

const Pki& P() {
  static const Pki* pki = new Pki();  // lives to the end: reachable, not a leak
  return *pki;
}

std::shared_ptr<const TlsClientContext> Client(const std::string& roots, const std::string& server_name,
                                               const Identity* id = nullptr) {
  TlsClientConfig c;
  c.root_pem = roots;
  c.server_name = server_name;
  if (id != nullptr) {
    c.key_pem = id->key_pem;
    c.chain_pem = id->cert_pem;
  }
  std::shared_ptr<const TlsClientContext> ctx;
  Status st = TlsClientContext::Create(c, &ctx);
  EXPECT_TRUE(st.ok()) << st.message();
  return ctx;
}

std::shared_ptr<const TlsServerContext> Server(ClientCertMode mode = ClientCertMode::kDontRequest,
                                               const std::string& client_roots = "", const Identity& id = P().server,
                                               const std::string& extra_chain = "") {
  TlsServerConfig c;
  c.key_pem = id.key_pem;
  c.chain_pem = id.cert_pem + extra_chain;
  c.client_root_pem = client_roots;
  c.mode = mode;
  std::shared_ptr<const TlsServerContext> ctx;
  Status st = TlsServerContext::Create(c, &ctx);
  EXPECT_TRUE(st.ok()) << st.message();
  return ctx;
}

// One handshake carried flight by flight as two daemons carry it:
//   client Step("") -> A; server Step(A) -> B; client Step(B) -> C (client done);
//   server Step(C) -> nothing (server done).
// The first failure is returned with the side that reported it.
struct Stepped {
  std::unique_ptr<TlsHandshake> client;
  std::unique_ptr<TlsHandshake> server;
  Status status;
  std::string failed_side;  // "client" or "server" when status is not ok
};

Stepped RunStepped(std::shared_ptr<const TlsClientContext> cctx, std::shared_ptr<const TlsServerContext> sctx) {
  Stepped r;
  EXPECT_TRUE(TlsHandshake::NewClient(std::move(cctx), &r.client).ok());
  EXPECT_TRUE(TlsHandshake::NewServer(std::move(sctx), &r.server).ok());
  // One flight: false (and the failure recorded) when that side refused.
  auto step = [&r](const char* side, TlsHandshake* hs, const std::string& in, std::string* out) {
    Status st = hs->Step(in, out);
    if (!st.ok()) {
      r.failed_side = side;
      r.status = std::move(st);
    }
    return r.status.ok();
  };
  std::string a, b, c, d;
  if (!step("client", r.client.get(), "", &a)) return r;
  EXPECT_FALSE(a.empty());
  EXPECT_FALSE(r.client->done());
  if (!step("server", r.server.get(), a, &b)) return r;
  EXPECT_FALSE(b.empty());
  EXPECT_FALSE(r.server->done());
  if (!step("client", r.client.get(), b, &c)) return r;
  EXPECT_TRUE(r.client->done()) << "the client is done after its second Step";
  EXPECT_FALSE(c.empty()) << "the client's Finished still has to reach the server";
  EXPECT_FALSE(r.server->done());
  if (!step("server", r.server.get(), c, &d)) return r;
  EXPECT_TRUE(r.server->done());
  EXPECT_TRUE(d.empty()) << "the server sends nothing after the handshake (no tickets)";
  return r;
}

void ExpectSamePeer(const TlsPeer& a, const TlsPeer& b) {
  EXPECT_EQ(a.has_certificate, b.has_certificate);
  EXPECT_EQ(a.verified, b.verified);
  EXPECT_EQ(a.common_name, b.common_name);
  EXPECT_EQ(a.dns_names, b.dns_names);
  EXPECT_EQ(a.uris, b.uris);
  EXPECT_EQ(a.emails, b.emails);
  EXPECT_EQ(a.ips, b.ips);
  EXPECT_EQ(a.subject, b.subject);
  EXPECT_EQ(a.pem, b.pem);
  EXPECT_EQ(a.protocol, b.protocol);
  EXPECT_EQ(a.cipher, b.cipher);
}

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// ---- 1. Server authentication only ------------------------------------------------------

TEST(TlsSessionTest, ServerAuthenticatedKeysMirrorAcrossFlights) {
  Stepped r = RunStepped(Client(P().ca.cert_pem, "server.test.example.com"), Server());
  ASSERT_TRUE(r.status.ok()) << r.failed_side << ": " << r.status.message();

  DirectionKeys c_send, c_recv, s_send, s_recv;
  ASSERT_TRUE(r.client->Keys(&c_send, &c_recv).ok());
  ASSERT_TRUE(r.server->Keys(&s_send, &s_recv).ok());
  EXPECT_EQ(c_send.key, s_recv.key);
  EXPECT_EQ(c_send.salt, s_recv.salt);
  EXPECT_EQ(c_recv.key, s_send.key);
  EXPECT_EQ(c_recv.salt, s_send.salt);
  EXPECT_NE(c_send.key, c_recv.key);
  EXPECT_NE(c_send.salt, c_recv.salt);
  EXPECT_NE(c_send.key, (std::array<uint8_t, 32>{}));

  TlsPeer server = r.client->peer();
  EXPECT_TRUE(server.has_certificate);
  EXPECT_TRUE(server.verified);
  EXPECT_EQ(server.common_name, "server.test.example.com");
  EXPECT_EQ(server.dns_names, (std::vector<std::string>{"server.test.example.com", "*.test.example.com"}));
  EXPECT_EQ(server.ips, (std::vector<std::string>{"192.168.1.3", "::1"}));
  EXPECT_TRUE(server.uris.empty());
  EXPECT_TRUE(server.emails.empty());
  EXPECT_EQ(server.subject, "CN=server.test.example.com,O=Conduit Test");
  EXPECT_EQ(server.pem, P().server.cert_pem);
  EXPECT_EQ(server.protocol, "TLSv1.3");
  EXPECT_TRUE(server.cipher.rfind("TLS_", 0) == 0) << server.cipher;

  TlsPeer client = r.server->peer();
  EXPECT_FALSE(client.has_certificate);
  EXPECT_FALSE(client.verified);
  EXPECT_EQ(client.common_name, "");
  EXPECT_EQ(client.pem, "");
  EXPECT_EQ(client.protocol, "TLSv1.3");
  EXPECT_EQ(client.cipher, server.cipher);
}

// The exported keys work with the daemon's own record cipher, one direction each way.
TEST(TlsSessionTest, ExportedKeysSealAndOpenRecords) {
  Stepped r = RunStepped(Client(P().ca.cert_pem, "server.test.example.com"), Server());
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  DirectionKeys c_send, c_recv, s_send, s_recv;
  ASSERT_TRUE(r.client->Keys(&c_send, &c_recv).ok());
  ASSERT_TRUE(r.server->Keys(&s_send, &s_recv).ok());

  auto roundtrip = [](const DirectionKeys& seal_keys, const DirectionKeys& open_keys) {
    std::unique_ptr<RecordSealer> sealer;
    std::unique_ptr<RecordOpener> opener;
    EXPECT_TRUE(NewAesGcmSealer(seal_keys, &sealer).ok());
    EXPECT_TRUE(NewAesGcmOpener(open_keys, &opener).ok());
    std::string plain = "hello over the exported keys";
    const uint8_t aad[4] = {1, 2, 3, 4};
    iovec piece{plain.data(), plain.size()};
    std::vector<uint8_t> sealed(plain.size() + sealer->tag_bytes());
    EXPECT_TRUE(sealer->Seal(aad, sizeof(aad), &piece, 1, sealed.data()).ok());
    std::string opened(plain.size(), '\0');
    Status st = opener->Open(aad, sizeof(aad), sealed.data(), sealed.size(), reinterpret_cast<uint8_t*>(opened.data()));
    return st.ok() && opened == plain;
  };
  EXPECT_TRUE(roundtrip(c_send, s_recv));
  EXPECT_TRUE(roundtrip(s_send, c_recv));
  EXPECT_FALSE(roundtrip(c_send, c_recv)) << "the two directions use different keys";
}

TEST(TlsSessionTest, ServerChainWithIntermediate) {
  Stepped r =
      RunStepped(Client(P().ca.cert_pem, "deep.example.net"),
                 Server(ClientCertMode::kDontRequest, "", P().server_via_intermediate, P().intermediate.cert_pem));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_TRUE(r.client->peer().verified);
  EXPECT_EQ(r.client->peer().common_name, "deep.example.net");

  // Without the intermediate in the chain the client cannot reach its root.
  Stepped missing = RunStepped(Client(P().ca.cert_pem, "deep.example.net"),
                               Server(ClientCertMode::kDontRequest, "", P().server_via_intermediate));
  ASSERT_FALSE(missing.status.ok());
  EXPECT_EQ(missing.failed_side, "client");
  EXPECT_TRUE(Contains(missing.status.message(), "certificate verify failed: unable to get local issuer certificate"))
      << missing.status.message();
}

// ---- 2. Names ---------------------------------------------------------------------------

TEST(TlsSessionTest, WildcardSanMatches) {
  Stepped r = RunStepped(Client(P().ca.cert_pem, "foo.test.example.com"), Server());
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_TRUE(r.client->peer().verified);
}

TEST(TlsSessionTest, NameNotInCertificateFailsNamingIt) {
  for (const char* name : {"other.example.org", "a.b.test.example.com", "test.example.com"}) {
    Stepped r = RunStepped(Client(P().ca.cert_pem, name), Server());
    ASSERT_FALSE(r.status.ok()) << name;
    EXPECT_EQ(r.failed_side, "client");
    EXPECT_EQ(r.status.code(), ncclRemoteError);
    EXPECT_TRUE(Contains(r.status.message(), std::string("the server's certificate does not match '") + name + "'"))
        << r.status.message();
    EXPECT_FALSE(r.client->done());
  }
}

TEST(TlsSessionTest, IpSanMatches) {
  for (const char* ip : {"192.168.1.3", "::1"}) {
    Stepped r = RunStepped(Client(P().ca.cert_pem, ip), Server());
    ASSERT_TRUE(r.status.ok()) << ip << ": " << r.status.message();
    EXPECT_TRUE(r.client->peer().verified);
  }
  Stepped r = RunStepped(Client(P().ca.cert_pem, "10.9.9.9"), Server());
  ASSERT_FALSE(r.status.ok());
  EXPECT_TRUE(Contains(r.status.message(), "the server's certificate does not match '10.9.9.9'")) << r.status.message();
}

// ---- 3. Untrusted server --------------------------------------------------------------

TEST(TlsSessionTest, UnrelatedRootsFail) {
  Stepped r = RunStepped(Client(P().other_ca.cert_pem, "server.test.example.com"), Server());
  ASSERT_FALSE(r.status.ok());
  EXPECT_EQ(r.failed_side, "client");
  EXPECT_EQ(r.status.code(), ncclRemoteError);
  EXPECT_TRUE(Contains(r.status.message(), "certificate verify failed: unable to get local issuer certificate"))
      << r.status.message();
  // Every later Step repeats the failure.
  std::string out;
  EXPECT_EQ(r.client->Step("x", &out).message(), r.status.message());
}

// The alert a refusing client writes tells the server why.
TEST(TlsSessionTest, ServerLearnsWhyFromTheClientsAlert) {
  std::unique_ptr<TlsHandshake> c, s;
  ASSERT_TRUE(TlsHandshake::NewClient(Client(P().other_ca.cert_pem, "server.test.example.com"), &c).ok());
  ASSERT_TRUE(TlsHandshake::NewServer(Server(), &s).ok());
  std::string a, b, alert, d;
  ASSERT_TRUE(c->Step("", &a).ok());
  ASSERT_TRUE(s->Step(a, &b).ok());
  ASSERT_FALSE(c->Step(b, &alert).ok());
  ASSERT_FALSE(alert.empty());
  Status st = s->Step(alert, &d);
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(Contains(st.message(), "the client refused the handshake with the TLS alert")) << st.message();
}

// ---- 4. Client certificates -----------------------------------------------------------

TEST(TlsSessionTest, RequireAndVerifyWithCaSignedClient) {
  Stepped r = RunStepped(Client(P().ca.cert_pem, "server.test.example.com", &P().client),
                         Server(ClientCertMode::kRequireAndVerify, P().ca.cert_pem));
  ASSERT_TRUE(r.status.ok()) << r.failed_side << ": " << r.status.message();
  TlsPeer client = r.server->peer();
  EXPECT_TRUE(client.has_certificate);
  EXPECT_TRUE(client.verified);
  EXPECT_EQ(client.common_name, "client-1");
  EXPECT_EQ(client.dns_names, (std::vector<std::string>{"client1.test"}));
  EXPECT_EQ(client.uris, (std::vector<std::string>{"spiffe://conduit.test/client-1"}));
  EXPECT_EQ(client.emails, (std::vector<std::string>{"client1@example.com"}));
  EXPECT_EQ(client.ips, (std::vector<std::string>{"10.0.0.1"}));
  EXPECT_EQ(client.subject, "CN=client-1,O=Conduit Test");
  EXPECT_EQ(client.pem, P().client.cert_pem);
  EXPECT_EQ(client.protocol, "TLSv1.3");
  EXPECT_TRUE(r.client->peer().verified);
}

TEST(TlsSessionTest, RequireAndVerifyWithoutClientCertFailsAtServer) {
  Stepped r = RunStepped(Client(P().ca.cert_pem, "server.test.example.com"),
                         Server(ClientCertMode::kRequireAndVerify, P().ca.cert_pem));
  ASSERT_FALSE(r.status.ok());
  EXPECT_EQ(r.failed_side, "server");
  EXPECT_TRUE(r.client->done()) << "in TLS 1.3 the client is done before the server checks it";
  EXPECT_FALSE(r.server->done());
  EXPECT_TRUE(Contains(r.status.message(), "the server requires a client certificate")) << r.status.message();
}

TEST(TlsSessionTest, RequireAndVerifyRefusesUntrustedClient) {
  Stepped r = RunStepped(Client(P().ca.cert_pem, "server.test.example.com", &P().self_signed_client),
                         Server(ClientCertMode::kRequireAndVerify, P().ca.cert_pem));
  ASSERT_FALSE(r.status.ok());
  EXPECT_EQ(r.failed_side, "server");
  EXPECT_TRUE(Contains(r.status.message(), "the client's certificate was refused: certificate verify failed"))
      << r.status.message();
}

TEST(TlsSessionTest, RequireButDontVerifyAcceptsSelfSigned) {
  Stepped r = RunStepped(Client(P().ca.cert_pem, "server.test.example.com", &P().self_signed_client),
                         Server(ClientCertMode::kRequireButDontVerify));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  TlsPeer client = r.server->peer();
  EXPECT_TRUE(client.has_certificate);
  EXPECT_FALSE(client.verified);
  EXPECT_EQ(client.common_name, "lonely client");
  EXPECT_EQ(client.dns_names, (std::vector<std::string>{"lonely.test"}));

  // Still required.
  Stepped none =
      RunStepped(Client(P().ca.cert_pem, "server.test.example.com"), Server(ClientCertMode::kRequireButDontVerify));
  ASSERT_FALSE(none.status.ok());
  EXPECT_EQ(none.failed_side, "server");
  EXPECT_TRUE(Contains(none.status.message(), "the server requires a client certificate")) << none.status.message();
}

TEST(TlsSessionTest, RequestButDontVerify) {
  Stepped none =
      RunStepped(Client(P().ca.cert_pem, "server.test.example.com"), Server(ClientCertMode::kRequestButDontVerify));
  ASSERT_TRUE(none.status.ok()) << none.status.message();
  EXPECT_FALSE(none.server->peer().has_certificate);
  EXPECT_FALSE(none.server->peer().verified);

  Stepped self = RunStepped(Client(P().ca.cert_pem, "server.test.example.com", &P().self_signed_client),
                            Server(ClientCertMode::kRequestButDontVerify, P().ca.cert_pem));
  ASSERT_TRUE(self.status.ok()) << self.status.message();
  EXPECT_TRUE(self.server->peer().has_certificate);
  EXPECT_FALSE(self.server->peer().verified);

  // A chain that does verify against the configured roots is reported as verified.
  Stepped good = RunStepped(Client(P().ca.cert_pem, "server.test.example.com", &P().client),
                            Server(ClientCertMode::kRequestButDontVerify, P().ca.cert_pem));
  ASSERT_TRUE(good.status.ok()) << good.status.message();
  EXPECT_TRUE(good.server->peer().verified);
}

TEST(TlsSessionTest, RequestAndVerify) {
  Stepped none = RunStepped(Client(P().ca.cert_pem, "server.test.example.com"),
                            Server(ClientCertMode::kRequestAndVerify, P().ca.cert_pem));
  ASSERT_TRUE(none.status.ok()) << none.status.message();
  EXPECT_FALSE(none.server->peer().has_certificate);

  Stepped good = RunStepped(Client(P().ca.cert_pem, "server.test.example.com", &P().client),
                            Server(ClientCertMode::kRequestAndVerify, P().ca.cert_pem));
  ASSERT_TRUE(good.status.ok()) << good.status.message();
  EXPECT_TRUE(good.server->peer().verified);

  Stepped bad = RunStepped(Client(P().ca.cert_pem, "server.test.example.com", &P().client),
                           Server(ClientCertMode::kRequestAndVerify, P().other_ca.cert_pem));
  ASSERT_FALSE(bad.status.ok());
  EXPECT_EQ(bad.failed_side, "server");
  // The client presents its chain completed from its own roots (as gRPC's TLS does), so the
  // server meets a root it does not trust.
  EXPECT_TRUE(Contains(bad.status.message(), "certificate verify failed: self-signed certificate in certificate chain"))
      << bad.status.message();
}

TEST(TlsSessionTest, DontRequestIgnoresClientIdentity) {
  Stepped r = RunStepped(Client(P().ca.cert_pem, "server.test.example.com", &P().client),
                         Server(ClientCertMode::kDontRequest, P().ca.cert_pem));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_FALSE(r.server->peer().has_certificate);
}

// ---- 5. Configuration errors ----------------------------------------------------------

Status ClientError(TlsClientConfig c) {
  std::shared_ptr<const TlsClientContext> ctx;
  Status st = TlsClientContext::Create(c, &ctx);
  EXPECT_EQ(ctx == nullptr, !st.ok());
  return st;
}

Status ServerError(TlsServerConfig c) {
  std::shared_ptr<const TlsServerContext> ctx;
  Status st = TlsServerContext::Create(c, &ctx);
  EXPECT_EQ(ctx == nullptr, !st.ok());
  return st;
}

void ExpectInvalid(const Status& st, const std::string& part) {
  EXPECT_EQ(st.code(), ncclInvalidArgument) << st.message();
  EXPECT_TRUE(Contains(st.message(), part)) << "'" << st.message() << "' lacks '" << part << "'";
}

TEST(TlsSessionTest, ClientContextErrors) {
  TlsClientConfig good;
  good.root_pem = P().ca.cert_pem;
  good.server_name = "server.test.example.com";
  good.key_pem = P().client.key_pem;
  good.chain_pem = P().client.cert_pem;
  EXPECT_TRUE(ClientError(good).ok());

  TlsClientConfig c = good;
  c.key_pem = P().stray_key_pem;
  ExpectInvalid(ClientError(c), "client key does not match its certificate");
  c = good;
  c.root_pem = "this is not a PEM at all";
  ExpectInvalid(ClientError(c), "no certificate in the roots PEM");
  c = good;
  c.root_pem = "-----BEGIN CERTIFICATE-----\nnot*base64*\n-----END CERTIFICATE-----\n";
  ExpectInvalid(ClientError(c), "the roots PEM is malformed");
  c = good;
  c.root_pem = "";
  ExpectInvalid(ClientError(c), "root_pem is empty");
  c = good;
  c.server_name = "";
  ExpectInvalid(ClientError(c), "server_name is empty");
  c = good;
  c.server_name = "server.test.example.com:443";
  ExpectInvalid(ClientError(c), "no port");
  c = good;
  c.chain_pem = "";
  ExpectInvalid(ClientError(c), "both key_pem and chain_pem (chain_pem is empty)");
  c = good;
  c.key_pem = "garbage";
  ExpectInvalid(ClientError(c), "no usable private key in the client key PEM");
  c = good;
  c.chain_pem = "garbage";
  ExpectInvalid(ClientError(c), "no certificate in the client certificate chain PEM");
}

TEST(TlsSessionTest, ServerContextErrors) {
  TlsServerConfig good;
  good.key_pem = P().server.key_pem;
  good.chain_pem = P().server.cert_pem;
  good.client_root_pem = P().ca.cert_pem;
  good.mode = ClientCertMode::kRequireAndVerify;
  EXPECT_TRUE(ServerError(good).ok());

  TlsServerConfig c = good;
  c.key_pem = P().stray_key_pem;
  ExpectInvalid(ServerError(c), "server key does not match its certificate");
  c = good;
  c.key_pem = "";
  ExpectInvalid(ServerError(c), "server key_pem is empty");
  c = good;
  c.chain_pem = "";
  ExpectInvalid(ServerError(c), "server chain_pem is empty");
  c = good;
  c.chain_pem = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
  ExpectInvalid(ServerError(c), "the server certificate chain PEM is malformed");
  c = good;
  c.client_root_pem = "";
  ExpectInvalid(ServerError(c), "client_root_pem is empty but REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY");
  c = good;
  c.client_root_pem = "junk";
  ExpectInvalid(ServerError(c), "no certificate in the client roots PEM");
  c = good;
  c.mode = static_cast<ClientCertMode>(7);
  ExpectInvalid(ServerError(c), "unknown client certificate request type 7");
  c = good;
  c.client_root_pem = "";
  c.mode = ClientCertMode::kRequireButDontVerify;
  EXPECT_TRUE(ServerError(c).ok()) << "the DontVerify modes need no roots";
}

// ---- 6. Hostile bytes -----------------------------------------------------------------

TEST(TlsSessionTest, RandomBytesAreErrorsOnBothSides) {
  auto cctx = Client(P().ca.cert_pem, "server.test.example.com");
  auto sctx = Server(ClientCertMode::kRequireAndVerify, P().ca.cert_pem);
  std::mt19937 rng(20240611);
  std::uniform_int_distribution<size_t> size(1, 4096);
  for (int i = 0; i < 1000; ++i) {
    std::string junk(size(rng), '\0');
    for (char& ch : junk) ch = static_cast<char>(rng());
    // Half of them start like a handshake record so that the parser behind it is reached.
    if (i % 2 == 1 && junk.size() >= 5) {
      junk[0] = 0x16;
      junk[1] = 0x03;
      junk[2] = 0x03;
      junk[3] = static_cast<char>((junk.size() - 5) >> 8);
      junk[4] = static_cast<char>((junk.size() - 5) & 0xff);
    }
    std::unique_ptr<TlsHandshake> c, s;
    ASSERT_TRUE(TlsHandshake::NewClient(cctx, &c).ok());
    ASSERT_TRUE(TlsHandshake::NewServer(sctx, &s).ok());
    std::string hello, out;
    ASSERT_TRUE(c->Step("", &hello).ok());
    Status cs = c->Step(junk, &out);
    EXPECT_FALSE(cs.ok()) << "buffer " << i;
    EXPECT_FALSE(c->done());
    Status ss = s->Step(junk, &out);
    EXPECT_FALSE(ss.ok()) << "buffer " << i;
    EXPECT_FALSE(s->done());
    DirectionKeys k1, k2;
    EXPECT_EQ(c->Keys(&k1, &k2).code(), ncclInvalidUsage);
  }
}

TEST(TlsSessionTest, TruncatedAndTamperedFlightsAreErrors) {
  auto cctx = Client(P().ca.cert_pem, "server.test.example.com");
  auto sctx = Server();
  auto start = [&](std::unique_ptr<TlsHandshake>* c, std::string* hello, std::string* server_flight) {
    std::unique_ptr<TlsHandshake> s;
    hello->clear();
    server_flight->clear();
    ASSERT_TRUE(TlsHandshake::NewClient(cctx, c).ok());
    ASSERT_TRUE(TlsHandshake::NewServer(sctx, &s).ok());
    ASSERT_TRUE((*c)->Step("", hello).ok());
    ASSERT_TRUE(s->Step(*hello, server_flight).ok());
  };
  std::unique_ptr<TlsHandshake> c;
  std::string hello, flight, out;

  // A real ServerHello flight cut short: in the record header, in the first record, later.
  for (size_t cut : {size_t{3}, size_t{40}, size_t{0}}) {
    start(&c, &hello, &flight);
    out.clear();
    const size_t len = cut == 0 ? flight.size() - 1 : cut;
    Status st = c->Step(std::string_view(flight).substr(0, len), &out);
    ASSERT_FALSE(st.ok()) << len;
    EXPECT_EQ(st.code(), ncclRemoteError);
    EXPECT_TRUE(Contains(st.message(), "ends in the middle of a message")) << st.message();
  }
  // A truncated ClientHello.
  {
    std::unique_ptr<TlsHandshake> s;
    ASSERT_TRUE(TlsHandshake::NewServer(sctx, &s).ok());
    start(&c, &hello, &flight);
    Status st = s->Step(std::string_view(hello).substr(0, hello.size() / 2), &out);
    ASSERT_FALSE(st.ok());
    EXPECT_TRUE(Contains(st.message(), "ends in the middle of a message")) << st.message();
  }
  // One byte changed in the encrypted part of the server's flight.
  start(&c, &hello, &flight);
  flight[flight.size() - 10] ^= 0x40;
  Status st = c->Step(flight, &out);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), ncclRemoteError);
  EXPECT_TRUE(Contains(st.message(), "OpenSSL: ")) << st.message();

  // Bytes after the last handshake message.
  start(&c, &hello, &flight);
  st = c->Step(flight + "\x17\x03\x03\x00\x01z", &out);
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(Contains(st.message(), "bytes after its last TLS handshake message")) << st.message();
}

TEST(TlsSessionTest, OversizedFlightIsRefused) {
  const std::string big(300 * 1024, '\x16');
  std::unique_ptr<TlsHandshake> c, s;
  ASSERT_TRUE(TlsHandshake::NewClient(Client(P().ca.cert_pem, "server.test.example.com"), &c).ok());
  ASSERT_TRUE(TlsHandshake::NewServer(Server(), &s).ok());
  std::string out;
  ASSERT_TRUE(c->Step("", &out).ok());
  out.clear();
  Status cs = c->Step(big, &out);
  Status ss = s->Step(big, &out);
  for (const Status& st : {cs, ss}) {
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.code(), ncclRemoteError);
    EXPECT_TRUE(Contains(st.message(), "is over the 262144-byte limit")) << st.message();
  }
  EXPECT_TRUE(out.empty());
}

TEST(TlsSessionTest, MisuseIsInvalidUsage) {
  std::unique_ptr<TlsHandshake> c;
  ASSERT_TRUE(TlsHandshake::NewClient(Client(P().ca.cert_pem, "server.test.example.com"), &c).ok());
  std::string out;
  EXPECT_EQ(c->Step("hello", &out).code(), ncclInvalidUsage);
  DirectionKeys a, b;
  EXPECT_EQ(c->Keys(&a, &b).code(), ncclInvalidUsage);
  EXPECT_FALSE(c->peer().has_certificate);

  Stepped r = RunStepped(Client(P().ca.cert_pem, "server.test.example.com"), Server());
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.client->Step("more", &out).code(), ncclInvalidUsage);
  EXPECT_EQ(r.server->Step("more", &out).code(), ncclInvalidUsage);
  EXPECT_TRUE(r.client->Keys(&a, &b).ok()) << "a misused Step does not spoil a finished handshake";

  std::unique_ptr<TlsHandshake> s;
  ASSERT_TRUE(TlsHandshake::NewServer(Server(), &s).ok());
  EXPECT_EQ(s->Step("", &out).code(), ncclRemoteError) << "an empty flight from the client";
  EXPECT_EQ(TlsHandshake::NewClient(nullptr, &c).code(), ncclInvalidUsage);
}

// ---- 7. In memory ---------------------------------------------------------------------

TEST(TlsSessionTest, InMemoryGivesTheSamePeersAsStepped) {
  struct Case {
    std::shared_ptr<const TlsClientContext> client;
    std::shared_ptr<const TlsServerContext> server;
  };
  std::vector<Case> cases = {
      {Client(P().ca.cert_pem, "server.test.example.com"), Server()},
      {Client(P().ca.cert_pem, "192.168.1.3", &P().client), Server(ClientCertMode::kRequireAndVerify, P().ca.cert_pem)},
      {Client(P().ca.cert_pem, "x.test.example.com", &P().self_signed_client),
       Server(ClientCertMode::kRequireButDontVerify)},
  };
  for (const Case& c : cases) {
    Stepped r = RunStepped(c.client, c.server);
    ASSERT_TRUE(r.status.ok()) << r.status.message();
    TlsPeer client_sees, server_sees;
    Status st = HandshakeInMemory(c.client, c.server, &client_sees, &server_sees);
    ASSERT_TRUE(st.ok()) << st.message();
    ExpectSamePeer(client_sees, r.client->peer());
    ExpectSamePeer(server_sees, r.server->peer());
    EXPECT_TRUE(client_sees.verified);
  }
}

TEST(TlsSessionTest, InMemorySaysWhichSideRefused) {
  TlsPeer a, b;
  Status st = HandshakeInMemory(Client(P().other_ca.cert_pem, "server.test.example.com"), Server(), &a, &b);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), ncclRemoteError);
  EXPECT_EQ(st.message().rfind("the client refused the handshake: ", 0), 0u) << st.message();
  EXPECT_TRUE(Contains(st.message(), "certificate verify failed")) << st.message();

  st = HandshakeInMemory(Client(P().ca.cert_pem, "server.test.example.com"),
                         Server(ClientCertMode::kRequireAndVerify, P().ca.cert_pem), &a, &b);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message().rfind("the server refused the handshake: ", 0), 0u) << st.message();
  EXPECT_TRUE(Contains(st.message(), "requires a client certificate")) << st.message();
}

// One pair of contexts serves handshakes on several threads at once.
TEST(TlsSessionTest, ContextsAreSharedAcrossThreads) {
  auto cctx = Client(P().ca.cert_pem, "server.test.example.com", &P().client);
  auto sctx = Server(ClientCertMode::kRequireAndVerify, P().ca.cert_pem);
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 10; ++i) {
        TlsPeer a, b;
        if (HandshakeInMemory(cctx, sctx, &a, &b).ok() && a.verified && b.common_name == "client-1") ++ok[t];
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(ok, (std::vector<int>{10, 10, 10, 10}));
}

}  // namespace
}  // namespace conduit
