#include "credentials_registry.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "protocol/rpc_protocol.h"

namespace conduit::grpcshim {
namespace {

// Where Debian's libgrpc looks for its default roots (GRPC_ROOT_PEM_PATH of its build).
constexpr const char* kInstalledRoots = "/usr/share/grpc/roots.pem";

enum class Kind { kUnknown, kInsecure, kTls, kNative };

struct Entry {
  Kind kind = Kind::kUnknown;
  std::shared_ptr<const TlsChannelCreds> channel;
  std::shared_ptr<const TlsServerCreds> server;
  std::string why;  // native: why
};

struct Registry {
  std::mutex mu;
  std::unordered_map<const void*, Entry> entries;
};

Registry& Creds() {
  static Registry* r = new Registry();
  return *r;
}

std::atomic<bool> g_roots_override{false};

void Put(const void* creds, Entry e) {
  if (creds == nullptr) return;
  std::lock_guard<std::mutex> lock(Creds().mu);
  Creds().entries[creds] = std::move(e);
}

Entry Get(const void* creds) {
  std::lock_guard<std::mutex> lock(Creds().mu);
  auto it = Creds().entries.find(creds);
  return it == Creds().entries.end() ? Entry{} : it->second;
}

bool ReadSmallFile(const char* path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream text;
  text << in.rdbuf();
  *out = text.str();
  return !out->empty() && out->size() <= rpcproto::kMaxTlsPemBytes;
}

bool FitsPem(const char* text) { return text == nullptr || strlen(text) <= rpcproto::kMaxTlsPemBytes; }

std::string Describe(const Entry& e) {
  if (e.kind == Kind::kNative) return e.why;
  return "conduitd carries insecure and SSL credentials only";
}

std::shared_ptr<const TlsChannelCreds> MakeTlsChannelCreds(const char* roots, const grpc_ssl_pem_key_cert_pair* pair,
                                                           bool verify_callback, std::string* why) {
  if (verify_callback) {
    *why = "its SSL credentials have a verify_peer callback, which runs in the program";
    return nullptr;
  }
  auto tls = std::make_shared<TlsChannelCreds>();
  if (roots != nullptr) {
    tls->roots = roots;
  } else if (g_roots_override.load()) {
    *why = "its default SSL roots come from the program's roots override callback";
    return nullptr;
  } else {
    const char* path = getenv("GRPC_DEFAULT_SSL_ROOTS_FILE_PATH");
    if (path == nullptr || *path == '\0') path = kInstalledRoots;
    if (!ReadSmallFile(path, &tls->roots)) {
      *why = std::string("cannot read gRPC's default SSL roots from ") + path;
      return nullptr;
    }
  }
  if (pair != nullptr) {
    if (pair->private_key == nullptr || pair->cert_chain == nullptr) {
      *why = "its SSL key/certificate pair misses a part";
      return nullptr;
    }
    tls->key = pair->private_key;
    tls->chain = pair->cert_chain;
  }
  if (tls->roots.empty() || tls->roots.size() > rpcproto::kMaxTlsPemBytes ||
      tls->key.size() > rpcproto::kMaxTlsPemBytes || tls->chain.size() > rpcproto::kMaxTlsPemBytes) {
    *why = "its SSL roots or certificates are empty or larger than conduitd takes";
    return nullptr;
  }
  return tls;
}

std::shared_ptr<const TlsServerCreds> MakeTlsServerCreds(const char* roots, const grpc_ssl_pem_key_cert_pair* pairs,
                                                         size_t num_pairs, uint32_t client_cert_mode,
                                                         std::string* why) {
  if (num_pairs != 1 || pairs == nullptr || pairs[0].private_key == nullptr || pairs[0].cert_chain == nullptr) {
    *why = "conduitd serves TLS with exactly one key and certificate (these credentials have " +
           std::to_string(num_pairs) + ")";
    return nullptr;
  }
  if (client_cert_mode > GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY) {
    *why = "unknown client certificate request type " + std::to_string(client_cert_mode);
    return nullptr;
  }
  if (!FitsPem(roots) || !FitsPem(pairs[0].private_key) || !FitsPem(pairs[0].cert_chain)) {
    *why = "its SSL roots or certificates are larger than conduitd takes";
    return nullptr;
  }
  auto tls = std::make_shared<TlsServerCreds>();
  tls->key = pairs[0].private_key;
  tls->chain = pairs[0].cert_chain;
  tls->roots = roots != nullptr ? roots : "";
  tls->client_cert_mode = client_cert_mode;
  return tls;
}

}  // namespace

void NoteInsecure(const void* creds) { Put(creds, Entry{Kind::kInsecure, nullptr, nullptr, ""}); }

bool IsInsecure(const void* creds) { return Get(creds).kind == Kind::kInsecure; }

void NoteNative(const void* creds, const std::string& why) { Put(creds, Entry{Kind::kNative, nullptr, nullptr, why}); }

void ForgetCredentials(const void* creds) {
  std::lock_guard<std::mutex> lock(Creds().mu);
  Creds().entries.erase(creds);
}

std::shared_ptr<const TlsChannelCreds> TlsChannelOf(const void* creds, std::string* why) {
  Entry e = Get(creds);
  if (e.channel == nullptr) *why = Describe(e);
  return e.channel;
}

std::shared_ptr<const TlsServerCreds> TlsServerOf(const void* creds, std::string* why) {
  Entry e = Get(creds);
  if (e.server == nullptr) *why = Describe(e);
  return e.server;
}

void NoteSslChannel(const void* creds, const char* roots, const grpc_ssl_pem_key_cert_pair* pair,
                    bool verify_callback) {
  if (creds == nullptr) return;
  std::string why;
  if (auto tls = MakeTlsChannelCreds(roots, pair, verify_callback, &why)) {
    Put(creds, Entry{Kind::kTls, std::move(tls), nullptr, ""});
  } else {
    NoteNative(creds, why);
  }
}

void NoteSslServer(const void* creds, const char* roots, const grpc_ssl_pem_key_cert_pair* pairs, size_t num_pairs,
                   uint32_t client_cert_mode) {
  if (creds == nullptr) return;
  std::string why;
  if (auto tls = MakeTlsServerCreds(roots, pairs, num_pairs, client_cert_mode, &why)) {
    Put(creds, Entry{Kind::kTls, nullptr, std::move(tls), ""});
  } else {
    NoteNative(creds, why);
  }
}

void NoteRootsOverride() { g_roots_override.store(true); }

}  // namespace conduit::grpcshim
