// rpc_bench_server: the benchmark's gRPC server (sync API), an ordinary program.
//   rpc_bench_server --listen 0.0.0.0:50061
#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <cstdio>
#include <cstring>
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

}  // namespace

int main(int argc, char** argv) {
  const char* usage =
      "usage: conduit-rpc-bench-server [--listen IP:PORT (0.0.0.0:50061)]\n"
      "the RPC benchmark's gRPC server: answers conduit-rpc-bench's calls until SIGTERM or SIGINT\n";
  conduit::tools::ExitWithUsageIfAsked(argc, argv, usage);
  std::string listen = "0.0.0.0:50061";
  for (int i = 1; i < argc; i += 2) {
    if (strcmp(argv[i], "--listen") != 0 || i + 1 >= argc) {
      fprintf(stderr, "rpc_bench_server: bad argument %s\n%s", argv[i], usage);
      return 2;
    }
    listen = argv[i + 1];
  }
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  BenchService service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &port);
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
