// Every kind of call an unmodified gRPC C++ program makes, carried by conduitd between two
// hosts (network namespaces, one daemon each): unary and streaming, sync/async/callback
// clients and servers, 16 MiB messages, deadlines, cancellation, errors with details and
// trailers, many calls at once, and a call between two programs of the same host. The
// same programs without the preload are the baseline. The daemons run --encrypt-peers, so
// every call here crosses a sealed link (the other RPC suites run unsealed).
#include <gtest/gtest.h>

#include <map>
#include <thread>

#include "greeter_rig.h"
#include "integration_env.h"

namespace conduit::it {
namespace {

constexpr int kSyncPort = 50051;
constexpr int kAsyncPort = 50052;
constexpr int kCallbackPort = 50053;
constexpr int kNativePort = 50054;
constexpr int kRelayToManagedPort = 50055;  // SayHello passed on to kSyncPort (a managed channel)
constexpr int kRelayToNativePort = 50056;   // ... to kNativePort (a native channel)
constexpr int kTlsPort = 50057;             // TLS, preloaded
constexpr int kMutualTlsPort = 50058;       // TLS requiring a client certificate, preloaded
constexpr int kNativeMutualTlsPort = 50059; // the same, not preloaded
constexpr const char* k16MiB = "16777216";

class RpcCallsTest : public SharedClusterTest<RpcCallsTest> {
 protected:
  static void SetUpTestSuite() {
    ClusterConfig c;
    c.prefix = "rcl";
    c.subnet = "10.231.44";
    c.hosts = 2;
    c.encrypt = true;
    StartSuite(c, [](GreeterRig& rig, std::string* error) {
      return MakeCertificates(error) &&
             (tls_server_ = rig.StartServer(1, kTlsPort, "sync", /*preload=*/true, error, {}, ServerTls(false))) !=
                 nullptr &&
             (mutual_tls_server_ =
                  rig.StartServer(1, kMutualTlsPort, "sync", /*preload=*/true, error, {}, ServerTls(true))) != nullptr &&
             (native_mutual_tls_server_ = rig.StartServer(1, kNativeMutualTlsPort, "sync", /*preload=*/false, error,
                                                          {}, ServerTls(true))) != nullptr &&
             (sync_server_ = rig.StartServer(1, kSyncPort, "sync", /*preload=*/true, error)) != nullptr &&
             rig.StartServer(1, kAsyncPort, "async", /*preload=*/true, error) != nullptr &&
             rig.StartServer(1, kCallbackPort, "callback", /*preload=*/true, error) != nullptr &&
             (native_server_ = rig.StartServer(1, kNativePort, "sync", /*preload=*/false, error)) != nullptr &&
             StartRelay(rig, kRelayToManagedPort, kSyncPort, error) &&
             StartRelay(rig, kRelayToNativePort, kNativePort, error);
    });
  }

  // A CA, a server certificate for host 1's address and 127.0.0.1, a client certificate
  // from the same CA, and one from a CA nobody trusts (openssl, EC P-256).
  static std::string Pem(const std::string& name) { return "/tmp/conduit-it-rcl-tls/" + name; }
  static bool MakeCertificates(std::string* error) {
    return MakeTestCertificates(Pem(""), suite_.cluster->Ip(1), error);
  }
  static std::vector<std::string> ServerTls(bool require_client) {
    std::vector<std::string> args = {"--tls-cert", Pem("server.pem"), "--tls-key", Pem("server.key")};
    if (require_client) args.insert(args.end(), {"--tls-client-roots", Pem("ca.pem")});
    return args;
  }
  static std::vector<std::string> ClientTls(const std::string& identity) {
    std::vector<std::string> args = {"--tls-roots", Pem("ca.pem")};
    if (!identity.empty()) args.insert(args.end(), {"--tls-cert", Pem(identity + ".pem"), "--tls-key", Pem(identity + ".key")});
    return args;
  }

  // The line a greeter server printed for the caller named `name` ("" when none).
  static std::string SeenBy(Subprocess* server, const std::string& name) {
    std::string out = server->Output();
    size_t at = out.find("server: ping-" + name + " sees ");
    return at == std::string::npos ? "" : out.substr(at, out.find('\n', at) - at);
  }
  static std::string Field(const std::string& line, const std::string& name) {
    size_t at = line.find(name + "=[");
    if (at == std::string::npos) return "<none>";
    at += name.size() + 2;
    return line.substr(at, line.find(']', at) - at);
  }

  // A preloaded sync greeter on host 1 whose SayHello calls the server on `to` as a child
  // call of the call it serves.
  static bool StartRelay(GreeterRig& rig, int port, int to, std::string* error) {
    return rig.StartServer(1, port, "sync", /*preload=*/true, error,
                           {}, {"--relay", suite_.cluster->Ip(1) + ":" + std::to_string(to)}) != nullptr;
  }

  inline static Subprocess* sync_server_ = nullptr;
  inline static Subprocess* native_server_ = nullptr;
  inline static Subprocess* tls_server_ = nullptr;
  inline static Subprocess* mutual_tls_server_ = nullptr;
  inline static Subprocess* native_mutual_tls_server_ = nullptr;

  // A managed call from host 0 to the server on `port` of host 1 that must pass.
  void ExpectManagedPass(int port, std::vector<std::string> args) {
    ClientRun run = rig_->RunClient(0, rig_->Target(1, port), args, /*preload=*/true);
    EXPECT_TRUE(run.passed()) << run.output << cluster_->Describe();
    EXPECT_TRUE(run.managed()) << "the channel was not carried by conduitd:\n" << run.output;
  }
};

// What a server sees of its caller is what native gRPC shows: the same user-agent, the
// caller's address as its peer, and none of gRPC's own keys (grpc-accept-encoding ...).
TEST_F(RpcCallsTest, ServerSeesCallerAsNativeGrpcShowsIt) {
  ClientRun native = rig_->RunClient(0, rig_->Target(1, kNativePort), {"--case", "unary", "--name", "inspect-native"},
                                     /*preload=*/false);
  ASSERT_TRUE(Passed(native));
  ExpectManagedPass(kSyncPort, {"--case", "unary", "--name", "inspect-managed"});
  std::string seen_native = SeenBy(native_server_, "inspect-native");
  std::string seen_managed = SeenBy(sync_server_, "inspect-managed");
  ASSERT_FALSE(seen_native.empty()) << native_server_->Output();
  ASSERT_FALSE(seen_managed.empty()) << sync_server_->Output();
  EXPECT_EQ(Field(seen_managed, "user-agent"), Field(seen_native, "user-agent"));
  EXPECT_NE(Field(seen_managed, "user-agent").find("grpc-c++/"), std::string::npos) << seen_managed;
  EXPECT_EQ(Field(seen_managed, "keys"), Field(seen_native, "keys"));
  std::string caller = "ipv4:" + cluster_->Ip(0) + ":";
  EXPECT_EQ(Field(seen_native, "peer").rfind(caller, 0), 0u) << seen_native;
  EXPECT_EQ(Field(seen_managed, "peer").rfind(caller, 0), 0u) << seen_managed;
}

// Per-call credentials behave as gRPC makes them behave on an insecure channel (which a
// managed channel is): gRPC's own kinds (an access token) fail the call UNAUTHENTICATED
// before it leaves the client, a plugin allowed at security level NONE adds its metadata
// (the server sees what the plugin was told: service URL and method), a failing plugin
// fails the call UNAVAILABLE. Native and managed side by side.
TEST_F(RpcCallsTest, CallCredentialsAsOnAnInsecureChannel) {
  for (auto [port, preload, who] : {std::tuple{kNativePort, false, "native"}, std::tuple{kSyncPort, true, "managed"}}) {
    SCOPED_TRACE(who);
    std::string target = rig_->Target(1, port);
    ClientRun token = rig_->RunClient(0, target, {"--case", "unary", "--call-creds", "token", "--expect", "16"}, preload);
    EXPECT_TRUE(Passed(token));
    EXPECT_NE(token.output.find("does not have a sufficient security level to transfer call credential"),
              std::string::npos) << token.output;
    ClientRun failing =
        rig_->RunClient(0, target, {"--case", "unary", "--call-creds", "failing-plugin", "--expect", "14"}, preload);
    EXPECT_TRUE(Passed(failing));
    EXPECT_NE(failing.output.find("Getting metadata from plugin failed with error: no token today"), std::string::npos)
        << failing.output;
    std::string name = std::string("inspect-creds-") + who;
    ClientRun plugin = rig_->RunClient(0, target, {"--case", "unary", "--call-creds", "plugin", "--name", name}, preload);
    ASSERT_TRUE(Passed(plugin));
    EXPECT_EQ(plugin.managed(), preload) << plugin.output;
    Subprocess* server = preload ? sync_server_ : native_server_;
    EXPECT_EQ(Field(SeenBy(server, name), "x-creds"), "url=://" + target + "/conduit.test.Greeter method=SayHello")
        << server->Output();
  }
}

// TLS with the programs' own certificates, managed across hosts and on one host, next to
// native gRPC: a server that requires a client certificate takes a client with one from
// its CA and refuses one without or from another CA, exactly as the native server does
// (the preloaded client's channel then stays native, and native gRPC fails the call); the
// server's auth_context() shows the client's certificate as the native server's does. An
// access token, which gRPC sends only over TLS, reaches the server on a managed TLS
// channel, as does a plugin's metadata with the https:// service URL.
TEST_F(RpcCallsTest, MutualTlsAndCallCredentialsAsNativeTls) {
  struct Case {
    std::string identity;  // the client's certificate: "client", "rogue" or none
    bool passes;
  };
  std::map<std::string, std::string> seen_auth;  // by configuration, for the client with a good certificate
  for (const Case& c : {Case{"client", true}, Case{"", false}, Case{"rogue", false}}) {
    for (auto [host, port, preload, who] :
         {std::tuple{0, kMutualTlsPort, true, "cross-host"}, std::tuple{1, kMutualTlsPort, true, "same-host"},
          std::tuple{0, kNativeMutualTlsPort, false, "native"}}) {
      SCOPED_TRACE(std::string(who) + " with client certificate '" + c.identity + "'");
      // An address, not "localhost": gRPC's resolver (c-ares) leaks a few bytes when a
      // channel to a name fails, which LeakSanitizer would blame on the client.
      std::string target = host == 1 ? "127.0.0.1:" + std::to_string(port) : rig_->Target(1, port);
      std::string name = std::string("inspect-mtls-") + who + "-" + c.identity;
      std::vector<std::string> args = {"--case", "unary", "--deadline-ms", "10000", "--name", name};
      std::vector<std::string> tls = ClientTls(c.identity);
      args.insert(args.end(), tls.begin(), tls.end());
      if (!c.passes) args.insert(args.end(), {"--expect", "14"});
      ClientRun run = rig_->RunClient(host, target, args, preload);
      EXPECT_TRUE(Passed(run));
      if (preload) {
        EXPECT_EQ(run.managed(), c.passes) << run.output;
        if (c.passes) {
          EXPECT_NE(run.output.find("is carried by conduitd (TLS)"), std::string::npos) << run.output;
        }
      }
      if (c.passes) {
        Subprocess* server = preload ? mutual_tls_server_ : native_mutual_tls_server_;
        seen_auth[who] = Field(SeenBy(server, name), "auth");
      }
    }
  }
  // What the server saw of the client's certificate: the native server's view, exactly.
  EXPECT_NE(seen_auth["native"].find("authenticated identity-name=x509_subject_alternative_name "
                                     "identity=greeter-client; transport_security_type=ssl"),
            std::string::npos)
      << seen_auth["native"];
  EXPECT_NE(seen_auth["native"].find("x509_common_name=client"), std::string::npos) << seen_auth["native"];
  EXPECT_EQ(seen_auth["cross-host"], seen_auth["native"]);
  EXPECT_EQ(seen_auth["same-host"], seen_auth["native"]);
  for (auto [host, who] : {std::tuple{0, "cross-host"}, std::tuple{1, "same-host"}}) {
    SCOPED_TRACE(who);
    std::string target = host == 1 ? "127.0.0.1:" + std::to_string(kTlsPort) : rig_->Target(1, kTlsPort);
    std::vector<std::string> tls = ClientTls("");
    std::vector<std::string> token_args = {"--case", "unary", "--call-creds", "token", "--name",
                                           std::string("inspect-tls-token-") + who};
    token_args.insert(token_args.end(), tls.begin(), tls.end());
    ClientRun token = rig_->RunClient(host, target, token_args, /*preload=*/true);
    ASSERT_TRUE(Passed(token));
    EXPECT_TRUE(token.managed()) << token.output;
    EXPECT_NE(Field(SeenBy(tls_server_, std::string("inspect-tls-token-") + who), "keys").find("authorization,"),
              std::string::npos)
        << tls_server_->Output();
    std::vector<std::string> plugin_args = {"--case", "unary", "--call-creds", "plugin", "--name",
                                            std::string("inspect-tls-plugin-") + who};
    plugin_args.insert(plugin_args.end(), tls.begin(), tls.end());
    ClientRun plugin = rig_->RunClient(host, target, plugin_args, /*preload=*/true);
    ASSERT_TRUE(Passed(plugin));
    EXPECT_EQ(Field(SeenBy(tls_server_, std::string("inspect-tls-plugin-") + who), "x-creds"),
              "url=https://" + target + "/conduit.test.Greeter method=SayHello")
        << tls_server_->Output();
  }
}

// A client cancels a call whose server handler made a child call (ClientContext::
// FromServerContext: gRPC's default propagation): the child is cancelled too, whether it is
// carried by conduitd or native, and whether the parent is (a preloaded client) or is not
// (a plain client, served on the managed server's native listener), so the server at the
// end of the chain sees it cancelled long before its 4 s of work are over. The parent's
// deadline reaches a managed child of a native parent the same way.
TEST_F(RpcCallsTest, CancellationPropagatesToChildCalls) {
  struct Chain {
    int port;
    Subprocess** end_server;
    const char* name;
    bool preload;
    const char* how;
  };
  for (const Chain& c : {Chain{kRelayToManagedPort, &sync_server_, "chain-managed", true, "cancel"},
                         Chain{kRelayToNativePort, &native_server_, "chain-native", true, "cancel"},
                         Chain{kRelayToManagedPort, &sync_server_, "chain-plain-parent", false, "cancel"},
                         Chain{kRelayToManagedPort, &sync_server_, "chain-plain-deadline", false, "deadline"}}) {
    const bool cancel = std::string(c.how) == "cancel";
    // The parent is cancelled (or its deadline passes) 1 s into the call: by then the child
    // call has reached the end server (tens of ms here), even on a loaded machine (sanitizer
    // runs beside other tests). The end server would answer after 10 s.
    std::vector<std::string> args = {"--case", c.how, "--name", c.name, "--delay-ms", "10000"};
    if (cancel) {
      args.insert(args.end(), {"--cancel-after-ms", "1000", "--expect", "1"});
    } else {
      args.insert(args.end(), {"--deadline-ms", "1000", "--expect", "4"});
    }
    ClientRun run = rig_->RunClient(0, rig_->Target(1, c.port), args, c.preload);
    EXPECT_TRUE(Passed(run)) << c.name;
    std::string line = std::string("server: SayHello ") + c.name + " was cancelled";
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(8000);
    while ((*c.end_server)->Output().find(line) == std::string::npos && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_NE((*c.end_server)->Output().find(line), std::string::npos)
        << c.name << ": the child call was not cancelled with its parent\n" << (*c.end_server)->Output();
  }
}

TEST_F(RpcCallsTest, NativeBaselineWithoutPreload) {
  for (std::vector<std::string> args : std::vector<std::vector<std::string>>{
           {"--case", "unary"},
           {"--case", "server_stream"},
           {"--case", "client_stream"},
           {"--case", "client_stream", "--mode", "async"},
           {"--case", "client_stream", "--mode", "callback"},
           {"--case", "bidi"},
           {"--case", "bidi", "--mode", "async"},
           {"--case", "bidi", "--mode", "callback"},
           {"--case", "unary", "--bytes", k16MiB},
           {"--case", "unary", "--fail-code", "5", "--expect", "5"}}) {
    ClientRun run = rig_->RunClient(0, rig_->Target(1, kNativePort), args, /*preload=*/false);
    EXPECT_TRUE(run.passed()) << run.output;
  }
}

// A managed server also listens natively on its port (conduitd without --rpc-managed-only),
// so clients without the preload reach it while preloaded ones go through conduitd: both
// kinds at once against a server of each style (the async one matches both kinds of call
// to the same requests of the program), and every call type from a plain client.
TEST_F(RpcCallsTest, ManagedServerAlsoServesPlainClients) {
  for (auto [port, style] : {std::pair{kSyncPort, "sync"}, std::pair{kAsyncPort, "async"},
                             std::pair{kCallbackPort, "callback"}}) {
    SCOPED_TRACE(style);
    std::string target = rig_->Target(1, port);
    Subprocess& plain = rig_->StartClient(0, target, {"--case", "burst", "--count", "400", "--inflight", "16"},
                                          /*preload=*/false);
    ExpectManagedPass(port, {"--case", "burst", "--count", "400", "--inflight", "16"});
    ASSERT_TRUE(plain.Wait(std::chrono::seconds(60))) << plain.Output();
    EXPECT_EQ(plain.exit_code(), 0) << plain.Output();
    EXPECT_NE(plain.Output().find("code0=400"), std::string::npos) << plain.Output();
    for (std::vector<std::string> args : std::vector<std::vector<std::string>>{
             {"--case", "unary", "--mode", "async"},
             {"--case", "server_stream", "--count", "10"},
             {"--case", "client_stream", "--mode", "callback", "--count", "10", "--bytes", "1000"},
             {"--case", "bidi", "--count", "10", "--bytes", "1000"},
             {"--case", "unary", "--fail-code", "5", "--expect", "5"}}) {
      ClientRun run = rig_->RunClient(0, target, args, /*preload=*/false);
      EXPECT_TRUE(Passed(run)) << args[1];
    }
  }
  // What the server sees of a plain caller is gRPC's own: its socket's address.
  ClientRun run = rig_->RunClient(0, rig_->Target(1, kSyncPort), {"--case", "unary", "--name", "inspect-plain"},
                                  /*preload=*/false);
  ASSERT_TRUE(Passed(run));
  std::string seen = SeenBy(sync_server_, "inspect-plain");
  EXPECT_EQ(Field(seen, "peer").rfind("ipv4:" + cluster_->Ip(0) + ":", 0), 0u) << sync_server_->Output();
}

TEST_F(RpcCallsTest, UnaryInEveryClientStyle) {
  for (const char* mode : {"sync", "async", "callback"}) {
    SCOPED_TRACE(mode);
    ExpectManagedPass(kSyncPort, {"--case", "unary", "--mode", mode});
  }
}

TEST_F(RpcCallsTest, ServerClientAndBidiStreaming) {
  for (const char* mode : {"sync", "async", "callback"}) {
    SCOPED_TRACE(mode);
    ExpectManagedPass(kSyncPort, {"--case", "server_stream", "--mode", mode, "--count", "20"});
    ExpectManagedPass(kSyncPort, {"--case", "client_stream", "--mode", mode, "--count", "20"});
    ExpectManagedPass(kSyncPort, {"--case", "bidi", "--mode", mode, "--count", "50"});
  }
}

// Every call type against servers in the completion-queue and callback styles, from
// clients in every style.
TEST_F(RpcCallsTest, AsyncAndCallbackServers) {
  for (int port : {kAsyncPort, kCallbackPort}) {
    for (const char* mode : {"sync", "async", "callback"}) {
      SCOPED_TRACE(std::to_string(port) + " " + mode);
      ExpectManagedPass(port, {"--case", "unary", "--mode", mode});
      ExpectManagedPass(port, {"--case", "server_stream", "--mode", mode, "--count", "10"});
      ExpectManagedPass(port, {"--case", "client_stream", "--mode", mode, "--count", "10", "--bytes", "1000"});
      ExpectManagedPass(port, {"--case", "bidi", "--mode", mode, "--count", "10", "--bytes", "1000"});
    }
  }
}

TEST_F(RpcCallsTest, SixteenMiBMessagesBothWays) {
  ExpectManagedPass(kSyncPort, {"--case", "unary", "--bytes", k16MiB});
  ExpectManagedPass(kAsyncPort, {"--case", "unary", "--mode", "async", "--bytes", k16MiB});
  // Streams larger than the flow-control window, in both directions.
  ExpectManagedPass(kSyncPort, {"--case", "client_stream", "--count", "6", "--bytes", "3000000"});
  ExpectManagedPass(kSyncPort, {"--case", "server_stream", "--count", "6", "--bytes", "3000000"});
  ExpectManagedPass(kSyncPort, {"--case", "bidi", "--count", "4", "--bytes", "1048576"});
}

TEST_F(RpcCallsTest, DeadlineExceededAndTheServerNotices) {
  ClientRun run = rig_->RunClient(0, rig_->Target(1, kSyncPort),
                                  {"--case", "deadline", "--name", "late", "--delay-ms", "4000", "--deadline-ms", "300",
                                   "--expect", "4"},
                                  /*preload=*/true);
  EXPECT_TRUE(run.passed()) << run.output;
  EXPECT_TRUE(run.managed()) << run.output;
  // The server's handler sees its call cancelled (it polls IsCancelled).
  bool noticed = false;
  for (int i = 0; i < 100 && !noticed; ++i) {
    noticed = cluster_->Describe().find("SayHello late was cancelled") != std::string::npos;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(noticed) << cluster_->Describe();
}

TEST_F(RpcCallsTest, CancelledByTheClient) {
  for (const char* mode : {"sync", "async", "callback"}) {
    SCOPED_TRACE(mode);
    ClientRun run = rig_->RunClient(0, rig_->Target(1, kSyncPort),
                                    {"--case", "cancel", "--mode", mode, "--delay-ms", "4000", "--expect", "1"},
                                    /*preload=*/true);
    EXPECT_TRUE(run.passed()) << run.output;
  }
}

TEST_F(RpcCallsTest, ServerErrorKeepsCodeDetailsAndTrailers) {
  for (const char* mode : {"sync", "async", "callback"}) {
    SCOPED_TRACE(mode);
    ExpectManagedPass(kSyncPort, {"--case", "unary", "--mode", mode, "--fail-code", "5", "--expect", "5"});
  }
  ExpectManagedPass(kSyncPort, {"--case", "server_stream", "--count", "3", "--fail-code", "9", "--expect", "9"});
}

TEST_F(RpcCallsTest, ManyCallsInFlight) {
  ClientRun run = rig_->RunClient(0, rig_->Target(1, kSyncPort),
                                  {"--case", "burst", "--count", "3000", "--inflight", "128"}, /*preload=*/true);
  EXPECT_TRUE(run.passed()) << run.output;
  EXPECT_NE(run.output.find("code0=3000"), std::string::npos) << run.output;
}

TEST_F(RpcCallsTest, ProgramsOnTheSameHost) {
  // The daemon connects the two programs directly; no link is involved.
  for (std::string target : {rig_->Target(1, kSyncPort), std::string("127.0.0.1:") + std::to_string(kSyncPort)}) {
    SCOPED_TRACE(target);
    ClientRun run = rig_->RunClient(1, target, {"--case", "bidi", "--count", "10", "--bytes", "100000"}, true);
    EXPECT_TRUE(run.passed()) << run.output;
    EXPECT_TRUE(run.managed()) << run.output;
  }
}

TEST_F(RpcCallsTest, LinksBetweenTheDaemonsAreSealed) {
  ExpectManagedPass(kSyncPort, {"--case", "unary", "--bytes", "100000"});
  // The accepting daemon names every RPC link it serves, and whether it is sealed.
  std::string log = cluster_->daemon(1).Output();
  EXPECT_NE(log.find("RPC link from daemon " + cluster_->PeerAddr(0)), std::string::npos) << log;
  EXPECT_NE(log.find(", sealed) is up"), std::string::npos) << log;
}

TEST_F(RpcCallsTest, PreloadedClientOfANativeServerFallsBack) {
  ClientRun run = rig_->RunClient(0, rig_->Target(1, kNativePort), {"--case", "bidi"}, /*preload=*/true);
  EXPECT_TRUE(run.passed()) << run.output;
  EXPECT_NE(run.output.find("uses native gRPC"), std::string::npos) << run.output;
  EXPECT_FALSE(run.managed()) << run.output;
}

}  // namespace
}  // namespace conduit::it
