// Runs the hoplite Python package's tests (tests/objects/python/test_hoplite.py) against
// real daemons on 2 hosts. Skips where the system Python has no numpy.
#include "../integration/integration_env.h"
#include "object_cluster.h"

namespace conduit::it {
namespace {

constexpr char kPython[] = "/usr/bin/python3";

TEST(ObjectsPython, PackageCallsAgainstRealDaemons) {
  CONDUIT_SKIP_UNLESS_CLUSTER();
  std::string out;
  if (RunCommand({kPython, "-c", "import numpy"}, &out) != 0) GTEST_SKIP() << kPython << " has no numpy: " << out;
  ObjectCluster oc("opy", "10.85.0", 2);
  std::string error;
  ASSERT_TRUE(oc.Start(&error)) << error;
  std::string src = CONDUIT_SOURCE_DIR;
  Subprocess p({kPython, src + "/tests/objects/python/test_hoplite.py"},
               {"PYTHONPATH=" + src + "/libhoplite/python", std::string("HOPLITE_LIBRARY=") + HOPLITE_LIBRARY_PATH,
                "HOPLITE_SOCKETS=" + oc.cluster().Socket(0) + "," + oc.cluster().Socket(1)},
               oc.cluster().dir() + "/python.log");
  ASSERT_TRUE(p.Wait(std::chrono::seconds(120))) << "python tests hung:\n" << p.Output();
  EXPECT_EQ(p.exit_code(), 0) << p.Output();
  EXPECT_NE(p.Output().find("OK"), std::string::npos) << p.Output();
}

}  // namespace
}  // namespace conduit::it
