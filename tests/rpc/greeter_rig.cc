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

bool MakeTestCertificates(const std::string& dir, const std::string& server_ip, std::string* error) {
  std::string script =
      "set -e; rm -rf " + dir + "; mkdir -p " + dir + "; cd " + dir + "\n"
      "ca() { openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=$1 "
      "-keyout $1.key -out $1.pem 2>/dev/null; }\n"
      "leaf() { openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=$2 -keyout $2.key "
      "-out $2.csr 2>/dev/null; printf 'subjectAltName=%s\\n' \"$3\" > $2.ext; openssl x509 -req -in $2.csr "
      "-CA $1.pem -CAkey $1.key -CAcreateserial -days 2 -extfile $2.ext -out $2.pem 2>/dev/null; }\n"
      "ca ca; ca rogue-ca\n"
      "leaf ca server 'IP:" + server_ip + ",IP:127.0.0.1'\n"
      "leaf ca client 'DNS:greeter-client'\n"
      "leaf rogue-ca rogue 'DNS:greeter-client'\n";
  std::string out;
  if (RunCommand({"/bin/sh", "-c", script}, &out) != 0) {
    *error = "cannot make the TLS certificates: " + out;
    return false;
  }
  return true;
}

}  // namespace conduit::it
