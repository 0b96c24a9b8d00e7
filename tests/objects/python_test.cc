// Runs the hoplite Python package's tests (tests/objects/python/test_hoplite.py) against
// real daemons on 2 hosts, with the package imported two ways (one ctest test each, by
// --gtest_filter; tests/objects/CMakeLists.txt):
//   SourceTree (objects.python_test): from libhoplite/python, PYTHONPATH and HOPLITE_LIBRARY
//     pointing into the source and build trees;
//   InstalledWheel (objects.python_wheel_test): from the wheel that objects.python_wheel_build
//     (python/build_wheel.py) built from this build's libhoplite, checked (platform tag, bundled
//     library) and installed into a fresh venv ($HOPLITE_TEST_VENV). The venv's Python runs
//     isolated (-I) from a scratch directory without PYTHONPATH or HOPLITE_LIBRARY, and the
//     script checks that hoplite and its libhoplite.so come from the venv's site-packages.
// Each has its own namespace prefix and subnet, so ctest may run them in parallel. Both skip
// where the system Python has no numpy.
#include <sys/stat.h>

#include <cstdlib>
#include <iostream>

#include "../integration/integration_env.h"
#include "object_cluster.h"

namespace conduit::it {
namespace {

constexpr char kPython[] = CONDUIT_TEST_PYTHON;

void SkipUnlessNumpy() {
  std::string out;
  if (RunCommand({kPython, "-c", "import numpy"}, &out) != 0) GTEST_SKIP() << kPython << " has no numpy: " << out;
}

// Runs test_hoplite.py with `argv` (the interpreter and how) and `env` against `oc`'s daemons.
void RunPythonTests(ObjectCluster& oc, std::vector<std::string> argv, std::vector<std::string> env) {
  argv.push_back(std::string(CONDUIT_SOURCE_DIR) + "/tests/objects/python/test_hoplite.py");
  env.push_back("HOPLITE_SOCKETS=" + oc.cluster().Socket(0) + "," + oc.cluster().Socket(1));
  Subprocess p(argv, env, oc.cluster().dir() + "/python.log");
  ASSERT_TRUE(p.Wait(std::chrono::seconds(120))) << "python tests hung:\n" << p.Output();
  EXPECT_EQ(p.exit_code(), 0) << p.Output();
  EXPECT_NE(p.Output().find("\nOK"), std::string::npos) << p.Output();
  if (!::testing::Test::HasFailure()) std::cout << p.Output();  // which tests ran, where hoplite came from
}

TEST(ObjectsPython, SourceTree) {
  CONDUIT_SKIP_UNLESS_CLUSTER();
  SkipUnlessNumpy();
  if (IsSkipped()) return;
  ObjectCluster oc("opy", "10.85.0", 2);
  std::string error;
  ASSERT_TRUE(oc.Start(&error)) << error;
  std::string src = CONDUIT_SOURCE_DIR;
  RunPythonTests(oc, {kPython},
                 {"PYTHONPATH=" + src + "/libhoplite/python", std::string("HOPLITE_LIBRARY=") + HOPLITE_LIBRARY_PATH});
}

TEST(ObjectsPython, InstalledWheel) {
  const char* venv = std::getenv("HOPLITE_TEST_VENV");
  if (venv == nullptr || *venv == '\0') {
    GTEST_SKIP() << "HOPLITE_TEST_VENV is unset: run `ctest -R objects.python_wheel_test`, whose setup "
                    "objects.python_wheel_build builds and installs the wheel";
  }
  CONDUIT_SKIP_UNLESS_CLUSTER();
  SkipUnlessNumpy();
  if (IsSkipped()) return;
  std::string python = std::string(venv) + "/bin/python";
  struct stat st;
  ASSERT_EQ(stat(python.c_str(), &st), 0) << "no venv at " << venv << " (objects.python_wheel_build failed?)";
  ObjectCluster oc("opw", "10.87.0", 2);
  std::string error;
  ASSERT_TRUE(oc.Start(&error)) << error;
  // env: nothing from the caller's environment may point Python at the source tree or a
  // library; -C: a scratch directory as the working directory; -I: neither it nor the
  // script's directory on sys.path, no PYTHON* variables, no user site.
  RunPythonTests(oc,
                 {"/usr/bin/env", "-u", "PYTHONPATH", "-u", "PYTHONHOME", "-u", "HOPLITE_LIBRARY", "-C",
                  oc.cluster().dir(), python, "-I"},
                 {std::string("HOPLITE_EXPECT_VENV=") + venv});
}

}  // namespace
}  // namespace conduit::it
