// Launching coll_check across a Cluster and judging the outcome, shared by the test files.
#ifndef CONDUIT_TESTS_INTEGRATION_COLL_RUN_H_
#define CONDUIT_TESTS_INTEGRATION_COLL_RUN_H_

#include <chrono>
#include <string>
#include <vector>

#include "cluster.h"

namespace conduit::it {

struct CollLaunch {
  int hosts = 0;  // 0: every host of the cluster
  int ranks_per_host = 1;
  bool threads = false;           // one process per host running its ranks as threads
  std::vector<std::string> args;  // coll_check flags besides --rank/--nranks/--id-file/--threads
  std::vector<std::string> env;
  std::string binary;  // a copy of coll_check under another name (tenant tests); "" = coll_check
  std::string id_file;  // where rank 0 writes the unique id; "" = a fresh one

  CollLaunch& OnHosts(int n) {
    hosts = n;
    return *this;
  }
  CollLaunch& AsThreads() {
    threads = true;
    return *this;
  }
};

inline CollLaunch Ranks(int ranks_per_host, std::vector<std::string> args) {
  CollLaunch l;
  l.ranks_per_host = ranks_per_host;
  l.args = std::move(args);
  return l;
}

// Global rank = host * ranks_per_host + local index.
std::vector<Subprocess*> LaunchCollCheck(Cluster& cluster, const CollLaunch& launch);

// Waits (bounded) for every process; "" when all exited 0 having printed "0 failed",
// otherwise a report naming the bad processes followed by everything's output.
std::string WaitCollCheck(Cluster& cluster, const std::vector<Subprocess*>& procs, std::chrono::seconds timeout);

}  // namespace conduit::it

#endif  // CONDUIT_TESTS_INTEGRATION_COLL_RUN_H_
