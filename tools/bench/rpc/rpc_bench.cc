// rpc_bench: the benchmark's gRPC client, an ordinary program. Keeps `inflight` unary calls
// outstanding (async API, one thread) for `seconds` after a warm-up and prints one line:
//
//   calls N seconds S rps R median_us M p99_us P goodput_gbps G errors E
//
// Latency is per call, from start to completion. Goodput counts request payload bytes.
//   rpc_bench --target HOST:PORT [--request-bytes 64] [--reply-bytes 8] [--inflight 1]
//             [--seconds 5] [--warmup 1] [--user alice]
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "bench.grpc.pb.h"
#include "cli/usage.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Call {
  grpc::ClientContext ctx;
  conduit::bench::BenchReply reply;
  grpc::Status status;
  std::unique_ptr<grpc::ClientAsyncResponseReader<conduit::bench::BenchReply>> rpc;
  Clock::time_point start;
};

}  // namespace

constexpr char kUsage[] =
    "usage: conduit-rpc-bench --target HOST:PORT [--request-bytes 64] [--reply-bytes 8]\n"
    "                         [--inflight 1] [--seconds 5] [--warmup 1] [--user alice]\n"
    "                         [--tls-roots FILE [--tls-name NAME]]\n"
    "unary calls to conduit-rpc-bench-server, `inflight` outstanding; prints calls, RPC/s,\n"
    "median and P99 latency, goodput and errors on one line; with --tls-roots (PEM) over TLS,\n"
    "the server's certificate checked for NAME (default: the target's host)\n";

int main(int argc, char** argv) {
  conduit::tools::ExitWithUsageIfAsked(argc, argv, kUsage);
  std::string target = "127.0.0.1:50061", user = "alice", roots_file, tls_name;
  int request_bytes = 64, reply_bytes = 8, inflight = 1;
  double seconds = 5, warmup = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i], v = argv[i + 1];
    if (a == "--target") target = v;
    else if (a == "--user") user = v;
    else if (a == "--tls-roots") roots_file = v;
    else if (a == "--tls-name") tls_name = v;
    else if (a == "--request-bytes") request_bytes = atoi(v.c_str());
    else if (a == "--reply-bytes") reply_bytes = atoi(v.c_str());
    else if (a == "--inflight") inflight = atoi(v.c_str());
    else if (a == "--seconds") seconds = atof(v.c_str());
    else if (a == "--warmup") warmup = atof(v.c_str());
    else {
      fprintf(stderr, "unknown option %s\n%s", a.c_str(), kUsage);
      return 2;
    }
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  if (!roots_file.empty()) {
    std::ifstream in(roots_file);
    std::ostringstream roots;
    roots << in.rdbuf();
    grpc::SslCredentialsOptions tls;
    tls.pem_root_certs = roots.str();
    creds = grpc::SslCredentials(tls);
    if (!tls_name.empty()) args.SetSslTargetNameOverride(tls_name);
  }
  auto stub = conduit::bench::Bench::NewStub(grpc::CreateCustomChannel(target, creds, args));
  conduit::bench::BenchRequest req;
  req.set_user(user);
  // 64-byte requests: the payload fills what the other fields leave.
  int overhead = static_cast<int>(req.ByteSizeLong()) + 2 + 2;
  req.set_data(std::string(std::max(0, request_bytes - overhead), 'q'));
  req.set_reply_bytes(reply_bytes);
  size_t wire_request = req.ByteSizeLong();

  grpc::CompletionQueue cq;
  auto begin = Clock::now();
  auto measure_from = begin + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(warmup));
  auto end = measure_from + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  std::vector<double> latencies;
  long calls = 0, errors = 0;
  int outstanding = 0;
  auto launch = [&] {
    auto* c = new Call;
    c->start = Clock::now();
    c->rpc = stub->AsyncCall(&c->ctx, req, &cq);
    c->rpc->Finish(&c->reply, &c->status, c);
    ++outstanding;
  };
  for (int i = 0; i < inflight; ++i) launch();
  while (outstanding > 0) {
    void* tag;
    bool ok;
    if (!cq.Next(&tag, &ok)) break;
    auto* c = static_cast<Call*>(tag);
    --outstanding;
    auto now = Clock::now();
    if (c->start >= measure_from && now <= end) {
      if (c->status.ok()) {
        ++calls;
        latencies.push_back(std::chrono::duration<double, std::micro>(now - c->start).count());
      } else {
        ++errors;
        if (errors == 1) fprintf(stderr, "rpc_bench: call failed: %d %s\n", c->status.error_code(), c->status.error_message().c_str());
      }
    }
    delete c;
    if (now < end) launch();
  }
  std::sort(latencies.begin(), latencies.end());
  double median = latencies.empty() ? 0 : latencies[latencies.size() / 2];
  double p99 = latencies.empty() ? 0 : latencies[std::min(latencies.size() - 1, latencies.size() * 99 / 100)];
  printf("calls %ld seconds %.2f rps %.0f median_us %.1f p99_us %.1f goodput_gbps %.3f errors %ld\n", calls, seconds,
         calls / seconds, median, p99, calls * static_cast<double>(wire_request) * 8 / seconds / 1e9, errors);
  return errors > 0 && calls == 0 ? 1 : 0;
}
