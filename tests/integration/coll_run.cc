#include "coll_run.h"

namespace conduit::it {

std::vector<Subprocess*> LaunchCollCheck(Cluster& cluster, const CollLaunch& launch) {
  int hosts = launch.hosts > 0 ? launch.hosts : cluster.config().hosts;
  int nranks = hosts * launch.ranks_per_host;
  std::string id_file = launch.id_file.empty() ? cluster.NewIdFile() : launch.id_file;
  std::vector<Subprocess*> procs;
  for (int h = 0; h < hosts; ++h) {
    int per_proc = launch.threads ? launch.ranks_per_host : 1;
    for (int local = 0; local < launch.ranks_per_host; local += per_proc) {
      int rank = h * launch.ranks_per_host + local;
      std::vector<std::string> argv = {launch.binary.empty() ? Cluster::CollCheckPath() : launch.binary,
                                       "--rank",
                                       std::to_string(rank),
                                       "--nranks",
                                       std::to_string(nranks),
                                       "--id-file",
                                       id_file,
                                       "--threads",
                                       std::to_string(per_proc)};
      argv.insert(argv.end(), launch.args.begin(), launch.args.end());
      procs.push_back(&cluster.Launch(h, "coll_check-r" + std::to_string(rank), argv, launch.env));
    }
  }
  return procs;
}

std::string WaitCollCheck(Cluster& cluster, const std::vector<Subprocess*>& procs, std::chrono::seconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string bad;
  for (Subprocess* p : procs) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    bool exited = p->Wait(left.count() > 0 ? left : std::chrono::milliseconds(1));
    std::string out = p->Output();
    if (!exited) {
      bad += "TIMED OUT (killed): " + p->CommandLine() + "\n";
    } else if (p->exit_code() != 0) {
      bad += "exit " + std::to_string(p->exit_code()) + ": " + p->CommandLine() + "\n";
    } else if (out.find(", 0 failed") == std::string::npos) {
      bad += "no '0 failed' summary: " + p->CommandLine() + "\n";
    }
  }
  return bad.empty() ? "" : bad + cluster.Describe();
}

}  // namespace conduit::it
