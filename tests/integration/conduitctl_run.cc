#include "conduitctl_run.h"

namespace conduit::it {

CtlResult Ctl(const Cluster& cluster, int host, std::vector<std::string> args, int as_uid) {
  std::vector<std::string> argv;
  if (as_uid >= 0) {
    argv = {"/usr/bin/setpriv", "--reuid=" + std::to_string(as_uid), "--regid=" + std::to_string(as_uid),
            "--clear-groups"};
  }
  argv.push_back(Cluster::ToolPath("conduitctl"));
  argv.push_back("--socket");
  argv.push_back(cluster.AdminSocket(host));
  argv.insert(argv.end(), args.begin(), args.end());
  CtlResult r;
  r.rc = RunCommand(argv, &r.out, std::chrono::seconds(30));
  return r;
}

}  // namespace conduit::it
