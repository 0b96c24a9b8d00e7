// rpc_bench_server: the benchmark's gRPC server (sync API), an ordinary program.
//   rpc_bench_server --listen 0.0.0.0:50061 [--tls-cert FILE --tls-key FILE]
#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "bench.grpc.pb.h"
#include "cli/usage.h"

namespace {

class BenchService final : public conduit::bench::Bench::Service {
  grpc::Status Call(grpc::ServerContext*, const conduit::bench::BenchRequest* req,
                    conduit::bench::BenchReply* rep) override {
    rep->mutable_data()->assign(static_cast<size_t>(req->reply_bytes()), 'r');
    return grpc::Status::OK;
  }
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

int main(int argc, char** argv) {
  const char* usage =
      "usage: conduit-rpc-bench-server [--listen IP:PORT (0.0.0.0:50061)] [--tls-cert FILE --tls-key FILE]\n"
      "the RPC benchmark's gRPC server: answers conduit-rpc-bench's calls until SIGTERM or SIGINT;\n"
      "with --tls-cert and --tls-key (PEM) over TLS\n";
  conduit::tools::ExitWithUsageIfAsked(argc, argv, usage);
  std::string listen = "0.0.0.0:50061", cert, key;
  for (int i = 1; i < argc; i += 2) {
    std::string a = argv[i];
    if (i + 1 >= argc || (a != "--listen" && a != "--tls-cert" && a != "--tls-key")) {
      fprintf(stderr, "rpc_bench_server: bad argument %s\n%s", argv[i], usage);
      return 2;
    }
    (a == "--listen" ? listen : a == "--tls-cert" ? cert : key) = argv[i + 1];
  }
  std::shared_ptr<grpc::ServerCredentials> creds = grpc::InsecureServerCredentials();
  if (!cert.empty() || !key.empty()) {
    grpc::SslServerCredentialsOptions tls;
    tls.pem_key_cert_pairs.push_back({ReadFile(key), ReadFile(cert)});
    creds = grpc::SslServerCredentials(tls);
  }
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  BenchService service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(listen, creds, &port);
  builder.SetMaxReceiveMessageSize(64 << 20);
  builder.RegisterService(&service);
  auto server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    fprintf(stderr, "rpc_bench_server: cannot listen on %s\n", listen.c_str());
    return 1;
  }
  printf("rpc_bench_server listening on port %d\n", port);
  fflush(stdout);
  int sig;
  sigwait(&stop, &sig);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  return 0;
}
