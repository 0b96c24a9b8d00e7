// Running tools/conduitctl against one daemon of a test cluster, optionally as another user.
#ifndef CONDUIT_TESTS_INTEGRATION_CONDUITCTL_RUN_H_
#define CONDUIT_TESTS_INTEGRATION_CONDUITCTL_RUN_H_

#include <string>
#include <vector>

#include "cluster.h"

namespace conduit::it {

struct CtlResult {
  int rc;
  std::string out;
};

// conduitctl --socket <host's admin socket> ARGS; `as_uid` >= 0 runs it as that user (setpriv).
CtlResult Ctl(const Cluster& cluster, int host, std::vector<std::string> args, int as_uid = -1);

}  // namespace conduit::it

#endif  // CONDUIT_TESTS_INTEGRATION_CONDUITCTL_RUN_H_
