#include "greeter_rig.h"

#include <cstdlib>

namespace conduit::it {

int ClientRun::status() const {
  size_t at = output.rfind("status ", 0) == 0 ? 0 : output.find("\nstatus ");
  if (at == std::string::npos) return -1;
  if (at != 0) ++at;
  return atoi(output.c_str() + at + 7);
}

std::string GreeterRig::ShimPath() { return MRPC_GRPC_PATH; }

std::vector<std::string> GreeterRig::ProgramEnv(std::vector<std::string> env, bool preload) {
  if (preload) env.push_back(PreloadEnv());
  // Under ThreadSanitizer, gRPC's own libraries (Debian's, not instrumented) are not ours to
  // check; only what is instrumented (the shim) is.
  std::string runtime = SANITIZER_RUNTIME;
  if (runtime.find("tsan") != std::string::npos) {
    const char* options = getenv("TSAN_OPTIONS");
    env.push_back(std::string("TSAN_OPTIONS=") + (options != nullptr ? std::string(options) + ":" : "") +
                  "ignore_noninstrumented_modules=1:report_thread_leaks=0");
  }
  return env;
}

std::string GreeterRig::PreloadEnv() {
  std::string runtime = SANITIZER_RUNTIME;
  return "LD_PRELOAD=" + (runtime.empty() ? "" : runtime + " ") + ShimPath();
}

Subprocess* GreeterRig::StartServer(int host, int port, const std::string& mode, bool preload, std::string* error,
                                    std::vector<std::string> env, std::vector<std::string> args) {
  return StartServerOn(host, "0.0.0.0:" + std::to_string(port), mode, preload, error, std::move(env),
                       std::move(args));
}

Subprocess* GreeterRig::StartServerOn(int host, const std::string& listen, const std::string& mode, bool preload,
                                      std::string* error, std::vector<std::string> env,
                                      std::vector<std::string> args) {
  env = ProgramEnv(std::move(env), preload);
  std::vector<std::string> argv = {Cluster::BinPath("greeter_server"), "--listen", listen, "--mode", mode};
  argv.insert(argv.end(), args.begin(), args.end());
  Subprocess& p = cluster_->Launch(host, "greeter_server", argv, env);
  if (!Cluster::WaitForOutput(p, "greeter_server listening", std::chrono::seconds(20))) {
    *error = "greeter_server did not start: " + p.Output();
    return nullptr;
  }
  return &p;
}

Subprocess& GreeterRig::StartClient(int host, const std::string& target, std::vector<std::string> args, bool preload,
                                    std::vector<std::string> env) {
  env = ProgramEnv(std::move(env), preload);
  std::vector<std::string> argv = {Cluster::BinPath("greeter_client"), "--target", target};
  argv.insert(argv.end(), args.begin(), args.end());
  return cluster_->Launch(host, "greeter_client", argv, env);
}

ClientRun GreeterRig::RunClient(int host, const std::string& target, std::vector<std::string> args, bool preload,
                                std::chrono::seconds timeout, std::vector<std::string> env) {
  auto start = std::chrono::steady_clock::now();
  Subprocess& p = StartClient(host, target, std::move(args), preload, std::move(env));
  ClientRun run;
  p.Wait(timeout);
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  run.exit_code = p.exit_code();
  run.timed_out = p.timed_out();
  run.output = p.Output();
  return run;
}

void SuiteCluster::Start(ClusterConfig config, const std::function<bool(GreeterRig&, std::string*)>& servers) {
  cluster = new Cluster(std::move(config));
  rig = new GreeterRig(cluster);
  if (!cluster->Start(&error) || !servers(*rig, &error)) {
    error += '\n';
    error += cluster->Describe();
    Stop();
  }
}

void SuiteCluster::Stop() {
  delete rig;
  rig = nullptr;
  delete cluster;
  cluster = nullptr;
}

}  // namespace conduit::it
