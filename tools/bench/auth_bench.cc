// conduit-auth-bench: what authenticating (and sealing) a daemon-to-daemon connection costs,
// per connection and per byte, next to mutual TLS 1.3 with a cluster CA, in one run on the
// same machine (loopback TCP, both ends in this process). The figures behind the choice in
// docs/security.md.
//
//   conduit-auth-bench [--connections N] [--mib M] [--round-trips R]
//
// Per connection: TCP connect+accept alone; Conduit's handshake (cluster key, unsealed);
// the handshake with sealing (adds X25519); TLS 1.3 with ECDSA P-256 certificates on both
// sides, verified against a CA (no resumption). Wall time per connection (both ends run
// concurrently) and CPU time of both ends together.
// Per byte: M MiB one way through a plain socket, a sealed Conn (AES-256-GCM records), and
// TLS 1.3 (AES-256-GCM): throughput and CPU seconds per GiB of both ends together.
// Per small message: 64-byte request/reply round trips (what one small RPC or control
// message costs a daemon connection) on a connection with no handshake (--insecure-peers),
// one authenticated with the cluster key (the default: unsealed afterwards), and a sealed
// one (--encrypt-peers): wall time and CPU time of both ends per round trip.
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "cli/number_arg.h"
#include "cli/usage.h"
#include "common/conn.h"
#include "common/net_addr.h"
#include "security/peer_security.h"
#include "transport/tcp.h"

namespace conduit {
namespace {

using Clock = std::chrono::steady_clock;

double CpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

[[noreturn]] void Die(const std::string& why) {
  fprintf(stderr, "conduit-auth-bench: %s\n", why.c_str());
  ERR_print_errors_fp(stderr);
  exit(1);
}

struct Listener {
  UniqueFd fd;
  std::string addr;
  Listener() {
    SockAddr bound;
    if (!TcpListen("127.0.0.1:0", &fd, &bound).ok()) Die("listen");
    addr = FormatSockAddr(bound);
  }
  UniqueFd Accept() const { return UniqueFd(accept4(fd.get(), nullptr, nullptr, SOCK_CLOEXEC)); }
};

UniqueFd Connect(const std::string& addr) {
  UniqueFd fd;
  if (!TcpConnect(addr, Deadline::AfterMs(5000), &fd).ok()) Die("connect");
  // TcpConnect leaves the socket non-blocking; OpenSSL's blocking calls want it blocking.
  fcntl(fd.get(), F_SETFL, fcntl(fd.get(), F_GETFL) & ~O_NONBLOCK);
  return fd;
}

// ---- TLS 1.3 with a cluster CA: one CA, a certificate for each side.

EVP_PKEY* NewKey() {
  EVP_PKEY* k = EVP_EC_gen("P-256");
  if (k == nullptr) Die("EC key");
  return k;
}

X509* NewCert(EVP_PKEY* key, const char* cn, X509* issuer, EVP_PKEY* issuer_key) {
  X509* c = X509_new();
  X509_set_version(c, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(c), rand());
  X509_gmtime_adj(X509_getm_notBefore(c), 0);
  X509_gmtime_adj(X509_getm_notAfter(c), 3600);
  X509_set_pubkey(c, key);
  X509_NAME* name = X509_get_subject_name(c);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(cn), -1, -1, 0);
  X509_set_issuer_name(c, issuer != nullptr ? X509_get_subject_name(issuer) : name);
  X509V3_CTX v3;
  X509V3_set_ctx_nodb(&v3);
  X509V3_set_ctx(&v3, issuer != nullptr ? issuer : c, c, nullptr, nullptr, 0);
  X509_EXTENSION* bc =
      X509V3_EXT_conf_nid(nullptr, &v3, NID_basic_constraints, issuer == nullptr ? "critical,CA:TRUE" : "CA:FALSE");
  X509_add_ext(c, bc, -1);
  X509_EXTENSION_free(bc);
  if (X509_sign(c, issuer_key != nullptr ? issuer_key : key, EVP_sha256()) == 0) Die("sign");
  return c;
}

struct Tls {
  SSL_CTX* server = nullptr;
  SSL_CTX* client = nullptr;
  Tls() {
    EVP_PKEY* ca_key = NewKey();
    X509* ca = NewCert(ca_key, "cluster-ca", nullptr, nullptr);
    server = Ctx(TLS_server_method(), ca, ca_key, "daemon-a");
    client = Ctx(TLS_client_method(), ca, ca_key, "daemon-b");
  }
  static SSL_CTX* Ctx(const SSL_METHOD* method, X509* ca, EVP_PKEY* ca_key, const char* cn) {
    SSL_CTX* ctx = SSL_CTX_new(method);
    EVP_PKEY* key = NewKey();
    X509* cert = NewCert(key, cn, ca, ca_key);
    SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
    SSL_CTX_set_ciphersuites(ctx, "TLS_AES_256_GCM_SHA384");
    SSL_CTX_set_num_tickets(ctx, 0);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    if (SSL_CTX_use_certificate(ctx, cert) != 1 || SSL_CTX_use_PrivateKey(ctx, key) != 1) Die("use cert");
    X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx), ca);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
    return ctx;
  }
};

// A client or server end of a TLS connection on `fd` (blocking), handshake done.
struct TlsEnd {
  UniqueFd fd;
  SSL* ssl = nullptr;
  ~TlsEnd() { SSL_free(ssl); }
};

void TlsDial(const Tls& tls, const std::string& addr, TlsEnd* end) {
  end->fd = Connect(addr);
  end->ssl = SSL_new(tls.client);
  SSL_set_fd(end->ssl, end->fd.get());
  if (SSL_connect(end->ssl) != 1) Die("SSL_connect");
}

void TlsAccept(const Tls& tls, UniqueFd fd, TlsEnd* end) {
  fcntl(fd.get(), F_SETFL, fcntl(fd.get(), F_GETFL) & ~O_NONBLOCK);
  end->fd = std::move(fd);
  end->ssl = SSL_new(tls.server);
  SSL_set_fd(end->ssl, end->fd.get());
  if (SSL_accept(end->ssl) != 1) Die("SSL_accept");
}

// ---- measurements

struct Cost {
  double wall_us;
  double cpu_us;
};

// Runs n connections through `dial` and `accept` (concurrently) and returns the per-connection cost.
Cost PerConnection(int n, const std::function<void(const std::string&)>& dial,
                   const std::function<void(UniqueFd)>& accept) {
  Listener l;
  double cpu0 = CpuSeconds();
  auto t0 = Clock::now();
  std::thread acceptor([&] {
    for (int i = 0; i < n; ++i) accept(l.Accept());
  });
  for (int i = 0; i < n; ++i) dial(l.addr);
  acceptor.join();
  double wall = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  return {wall / n, (CpuSeconds() - cpu0) * 1e6 / n};
}

struct Rate {
  double gbit_per_s;
  double cpu_s_per_gib;
};

Rate PerByte(size_t total, const std::function<void(const std::string&)>& send,
             const std::function<void(UniqueFd)>& receive) {
  Listener l;
  double cpu0 = CpuSeconds();
  auto t0 = Clock::now();
  std::thread receiver([&] { receive(l.Accept()); });
  send(l.addr);
  receiver.join();
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  double gib = total / double(1u << 30);
  return {total * 8 / secs / 1e9, (CpuSeconds() - cpu0) / gib};
}

// n round trips of `bytes` each way: the dialer writes, the acceptor echoes, the dialer reads.
Cost PingPong(int n, size_t bytes, const std::function<Conn(const std::string&)>& dial,
              const std::function<Conn(UniqueFd)>& accept) {
  Listener l;
  std::thread echo([&] {
    Conn c = accept(l.Accept());
    std::vector<char> m(bytes);
    for (int i = 0; i < n; ++i) {
      if (!c.ReadFull(m.data(), bytes, Deadline::AfterMs(60000)).ok() ||
          !c.Write(m.data(), bytes, Deadline::AfterMs(60000)).ok()) {
        Die("echo");
      }
    }
  });
  Conn c = dial(l.addr);
  std::vector<char> m(bytes, 'x');
  double cpu0 = CpuSeconds();
  auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) {
    if (!c.Write(m.data(), bytes, Deadline::AfterMs(60000)).ok() ||
        !c.ReadFull(m.data(), bytes, Deadline::AfterMs(60000)).ok()) {
      Die("ping");
    }
  }
  double wall = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  double cpu = (CpuSeconds() - cpu0) * 1e6;
  echo.join();
  return {wall / n, cpu / n};
}

std::unique_ptr<PeerSecurity> Security(const ClusterKey& key, const char* self, bool seal) {
  PeerSecurityOptions o;
  o.mode = PeerMode::kClusterKey;
  o.key = key;
  o.self = self;
  o.seal = seal;
  std::unique_ptr<PeerSecurity> s;
  if (!PeerSecurity::Create(o, &s).ok()) Die("security");
  return s;
}

int Main(int argc, char** argv) {
  int connections = 1000, round_trips = 100000;
  size_t mib = 1024;
  const char* usage =
      "usage: conduit-auth-bench [--connections N (1000)] [--mib M (1024)] [--round-trips R (100000)]\n"
      "what authenticating and sealing a daemon connection costs per connection, per small\n"
      "message and per byte, next to mutual TLS 1.3 (loopback; docs/benchmarks.md)\n";
  tools::ExitWithUsageIfAsked(argc, argv, usage);
  for (int i = 1; i < argc; i += 2) {
    if (i + 1 >= argc) {
      fprintf(stderr, "%s needs a value\n%s", argv[i], usage);
      return 2;
    }
    // Bounds: what one run on one machine can hold (file descriptors, memory, minutes).
    int64_t n = 0;
    const bool connections_flag = strcmp(argv[i], "--connections") == 0;
    const bool mib_flag = strcmp(argv[i], "--mib") == 0;
    const bool round_trips_flag = strcmp(argv[i], "--round-trips") == 0;
    if (!connections_flag && !mib_flag && !round_trips_flag) {
      fprintf(stderr, "unknown flag %s\n%s", argv[i], usage);
      return 2;
    }
    const int64_t hi = connections_flag ? 100000 : mib_flag ? 65536 : 100000000;
    if (!tools::ParseIntArg(argv[i + 1], 1, hi, &n)) {
      fprintf(stderr, "%s: '%s' is not a whole number from 1 to %lld\n%s", argv[i], argv[i + 1],
              static_cast<long long>(hi), usage);
      return 2;
    }
    if (connections_flag) connections = static_cast<int>(n);
    else if (mib_flag) mib = static_cast<size_t>(n);
    else round_trips = static_cast<int>(n);
  }
  ClusterKey key;
  if (!EphemeralClusterKey(&key).ok()) Die("key");
  auto a = Security(key, "10.0.0.1:7650", false), b = Security(key, "10.0.0.2:7650", false);
  auto as = Security(key, "10.0.0.1:7650", true), bs = Security(key, "10.0.0.2:7650", true);
  Tls tls;

  printf("# per connection (%d connections each, loopback, both ends in one process)\n", connections);
  printf("%-34s %12s %12s\n", "", "wall us", "cpu us");
  auto row = [](const char* what, Cost c) { printf("%-34s %12.1f %12.1f\n", what, c.wall_us, c.cpu_us); };
  row("tcp connect+accept", PerConnection(connections, [](const std::string& addr) { Connect(addr); },
                                          [](UniqueFd) {}));
  auto conduit = [&](const PeerSecurity& dialer, const PeerSecurity& acceptor, bool sealable) {
    return PerConnection(
        connections,
        [&](const std::string& addr) {
          Conn c;
          PeerIdentity p;
          if (!dialer.Dial(addr, Deadline::AfterMs(5000), sealable, &c, &p).ok()) Die("dial");
        },
        [&](UniqueFd fd) {
          Conn c;
          PeerIdentity p;
          if (!acceptor.Accept(std::move(fd), "bench", &c, &p).ok()) Die("accept");
        });
  };
  row("conduit handshake (key)", conduit(*a, *b, false));
  row("conduit handshake (key + seal)", conduit(*as, *bs, true));
  row("tls 1.3 mutual, ecdsa p-256", PerConnection(
                                          connections,
                                          [&](const std::string& addr) {
                                            TlsEnd end;
                                            TlsDial(tls, addr, &end);
                                          },
                                          [&](UniqueFd fd) {
                                            TlsEnd end;
                                            TlsAccept(tls, std::move(fd), &end);
                                            // Reads the client's Finished (TLS 1.3 completes it there).
                                            char c;
                                            SSL_peek(end.ssl, &c, 0);
                                          }));

  // All three through PeerSecurity::Dial/Accept, so the sockets are set up alike; the modes
  // take turns, five passes, so that a drift in the machine's speed shows as spread.
  constexpr int kPasses = 5;
  printf("\n# per small message (%d round trips of 64 B each way, loopback, %d passes, medians)\n", round_trips,
         kPasses);
  printf("%-34s %12s %12s %20s\n", "", "wall us", "cpu us", "wall us, each pass");
  std::unique_ptr<PeerSecurity> insecure;
  {
    PeerSecurityOptions o;
    o.mode = PeerMode::kInsecure;
    o.self = "10.0.0.1:7650";
    if (!PeerSecurity::Create(o, &insecure).ok()) Die("security");
  }
  auto ping_pong = [&](const PeerSecurity& dialer, const PeerSecurity& acceptor, bool sealable) {
    return PingPong(
        round_trips, 64,
        [&](const std::string& addr) {
          Conn c;
          PeerIdentity p;
          if (!dialer.Dial(addr, Deadline::AfterMs(5000), sealable, &c, &p).ok()) Die("dial");
          return c;
        },
        [&](UniqueFd fd) {
          Conn c;
          PeerIdentity p;
          if (!acceptor.Accept(std::move(fd), "bench", &c, &p).ok()) Die("accept");
          return c;
        });
  };
  const char* names[3] = {"no handshake (--insecure-peers)", "cluster key (unsealed after)", "cluster key + seal"};
  std::vector<Cost> passes[3];
  for (int pass = 0; pass < kPasses; ++pass) {
    passes[0].push_back(ping_pong(*insecure, *insecure, true));
    passes[1].push_back(ping_pong(*a, *b, true));
    passes[2].push_back(ping_pong(*as, *bs, true));
  }
  for (int m = 0; m < 3; ++m) {
    std::vector<double> wall, cpu;
    std::string each;
    for (const Cost& c : passes[m]) {
      wall.push_back(c.wall_us);
      cpu.push_back(c.cpu_us);
      if (!each.empty()) each += ' ';
      each += std::to_string(static_cast<int>(c.wall_us + 0.5));
    }
    std::sort(wall.begin(), wall.end());
    std::sort(cpu.begin(), cpu.end());
    printf("%-34s %12.1f %12.1f %20s\n", names[m], wall[kPasses / 2], cpu[kPasses / 2], each.c_str());
  }

  const size_t total = mib << 20, piece = 1 << 20;
  std::vector<char> buf(piece, 'x');
  printf("\n# per byte (%zu MiB one way, 1 MiB writes, loopback)\n", mib);
  printf("%-34s %12s %12s\n", "", "Gbit/s", "cpu s/GiB");
  auto rate = [](const char* what, Rate r) { printf("%-34s %12.2f %12.3f\n", what, r.gbit_per_s, r.cpu_s_per_gib); };
  rate("plain socket", PerByte(total,
                               [&](const std::string& addr) {
                                 UniqueFd fd = Connect(addr);
                                 for (size_t sent = 0; sent < total; sent += piece) {
                                   if (!WriteFull(fd.get(), buf.data(), piece, Deadline::AfterMs(60000)).ok()) Die("w");
                                 }
                               },
                               [&](UniqueFd fd) {
                                 std::vector<char> in(piece);
                                 for (size_t got = 0; got < total; got += piece) {
                                   if (!ReadFull(fd.get(), in.data(), piece, Deadline::AfterMs(60000)).ok()) Die("r");
                                 }
                               }));
  rate("conduit sealed conn (aes-256-gcm)",
       PerByte(total,
               [&](const std::string& addr) {
                 Conn c;
                 PeerIdentity p;
                 if (!as->Dial(addr, Deadline::AfterMs(5000), true, &c, &p).ok()) Die("dial");
                 for (size_t sent = 0; sent < total; sent += piece) {
                   if (!c.Write(buf.data(), piece, Deadline::AfterMs(60000)).ok()) Die("w");
                 }
               },
               [&](UniqueFd fd) {
                 Conn c;
                 PeerIdentity p;
                 if (!bs->Accept(std::move(fd), "bench", &c, &p).ok()) Die("accept");
                 std::vector<char> in(piece);
                 for (size_t got = 0; got < total; got += piece) {
                   if (!c.ReadFull(in.data(), piece, Deadline::AfterMs(60000)).ok()) Die("r");
                 }
               }));
  rate("tls 1.3 (aes-256-gcm)", PerByte(total,
                                        [&](const std::string& addr) {
                                          TlsEnd end;
                                          TlsDial(tls, addr, &end);
                                          for (size_t sent = 0; sent < total; sent += piece) {
                                            if (SSL_write(end.ssl, buf.data(), static_cast<int>(piece)) <= 0) {
                                              Die("SSL_write");
                                            }
                                          }
                                        },
                                        [&](UniqueFd fd) {
                                          TlsEnd end;
                                          TlsAccept(tls, std::move(fd), &end);
                                          std::vector<char> in(piece);
                                          for (size_t got = 0; got < total;) {
                                            int r = SSL_read(end.ssl, in.data(), static_cast<int>(piece));
                                            if (r <= 0) Die("SSL_read");
                                            got += static_cast<size_t>(r);
                                          }
                                        }));
  return 0;
}

}  // namespace
}  // namespace conduit

int main(int argc, char** argv) { return conduit::Main(argc, argv); }
