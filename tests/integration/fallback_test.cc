// Fallback: a program the daemon will not serve (no daemon, or --deny-exe) must still work
// through the native NCCL, and the shim must say so on stderr.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "integration_env.h"

namespace conduit::it {
namespace {

constexpr char kNativeNccl[] = "/usr/local/cuda/lib/libnccl.so.2";

// What the native library itself reports, so the test does not hard-code a release.
int NativeVersion(const std::string& path) {
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return -1;
  using GetVersion = int (*)(int*);
  auto fn = reinterpret_cast<GetVersion>(dlsym(lib, "ncclGetVersion"));
  int version = -1;
  if (fn == nullptr || fn(&version) != 0) version = -1;
  dlclose(lib);
  return version;
}

// The shim's line must name the native library; /usr/local/cuda/lib64 and lib are the same
// directory, so compare the files, not the spellings.
bool NamesLibrary(const std::string& line, const std::string& path) {
  std::error_code ec;
  std::string want = std::filesystem::canonical(path, ec).string();
  size_t at = line.find('/');
  while (at != std::string::npos) {
    size_t end = line.find_first_of(" \t:;,()'\"", at);
    std::string token = line.substr(at, end == std::string::npos ? std::string::npos : end - at);
    if (token == path || (!want.empty() && std::filesystem::canonical(token, ec).string() == want)) return true;
    at = line.find('/', at + 1);
  }
  return false;
}

// The shim's one stderr line about the fallback (any line starting with "conduit").
std::string ConduitLine(const std::string& out) {
  size_t at = out.rfind("conduit", 0) == 0 ? 0 : out.find("\nconduit");
  if (at == std::string::npos) return "";
  if (at != 0) ++at;
  return out.substr(at, out.find('\n', at) - at);
}

void ExpectNativeProbe(const std::string& out, int rc, const std::string& native) {
  EXPECT_EQ(rc, 0) << out;
  std::string line = ConduitLine(out);
  EXPECT_FALSE(line.empty()) << "no line from the shim on stderr:\n" << out;
  EXPECT_EQ(line.rfind("conduit:", 0), 0u) << "the interface promises a line starting with \"conduit:\":\n" << line;
  EXPECT_TRUE(NamesLibrary(line, native)) << "the conduit: line does not name " << native << ":\n" << line;
  int version = NativeVersion(native);
  ASSERT_GT(version, 0) << "cannot load " << native << " in the test itself";
  EXPECT_NE(out.find("ncclGetVersion=0 version=" + std::to_string(version)), std::string::npos)
      << "want the native version " << version << ":\n"
      << out;
  EXPECT_NE(out.find("ncclGetUniqueId=0"), std::string::npos) << out;
}

std::string ProbePath() { return Cluster::BinPath("fallback_probe"); }

TEST(FallbackTest, NoDaemonUsesNativeNccl) {
  if (::access(kNativeNccl, R_OK) != 0) GTEST_SKIP() << kNativeNccl << " is not installed";
  std::string out;
  // The probe runs directly (no namespace needed); the socket path names nothing.
  int rc = RunCommand({"/usr/bin/env", "CONDUIT_SOCKET=/nonexistent/conduit-it.sock", ProbePath()}, &out);
  ExpectNativeProbe(out, rc, kNativeNccl);
}

TEST(FallbackTest, NativeLibraryOverride) {
  std::error_code ec;
  std::string real = std::filesystem::canonical(kNativeNccl, ec).string();
  if (real.empty()) GTEST_SKIP() << kNativeNccl << " is not installed";
  std::string out;
  int rc = RunCommand(
      {"/usr/bin/env", "CONDUIT_SOCKET=/nonexistent/conduit-it.sock", "CONDUIT_NATIVE_NCCL=" + real, ProbePath()},
      &out);
  ExpectNativeProbe(out, rc, real);
}

// A program whose own library names its NCCL in its RUNPATH, as PyTorch's libtorch_cuda.so
// names pip's nvidia/nccl/lib, falls back to that NCCL (before /usr/local/cuda's): the one
// it would have loaded without the shim. The shim is preloaded, as users run it.
TEST(FallbackTest, FallbackIsTheNcclTheProgramsRunpathNames) {
#if defined(CONDUIT_IT_ASAN) || defined(CONDUIT_IT_TSAN)
  GTEST_SKIP() << "a preloaded sanitized shim would precede the sanitizer runtime";
#endif
  if (::access(kNativeNccl, R_OK) != 0) GTEST_SKIP() << kNativeNccl << " is not installed";
  const std::filesystem::path dir = std::filesystem::path(Cluster::BinPath("runpath_probe")).parent_path() / "runpath_nccl";
  std::filesystem::create_directories(dir);
  std::filesystem::remove(dir / "libnccl.so.2");
  std::filesystem::create_symlink(kNativeNccl, dir / "libnccl.so.2");
  std::string out;
  int rc = RunCommand({"/usr/bin/env", "CONDUIT_SOCKET=/nonexistent/conduit-it.sock",
                       "LD_PRELOAD=" CONDUIT_SHIM_PATH, Cluster::BinPath("runpath_probe")},
                      &out);
  ExpectNativeProbe(out, rc, kNativeNccl);
  EXPECT_NE(ConduitLine(out).find((dir / "libnccl.so.2").string()), std::string::npos)
      << "the fallback should be the NCCL in the program's RUNPATH, " << (dir / "libnccl.so.2") << ":\n"
      << out;
  std::filesystem::remove_all(dir);
}

TEST(FallbackTest, DeniedProgramUsesNativeNccl) {
  CONDUIT_SKIP_UNLESS_CLUSTER();
  if (::access(kNativeNccl, R_OK) != 0) GTEST_SKIP() << kNativeNccl << " is not installed";
  ClusterConfig c;
  c.prefix = "fb";
  c.subnet = "10.231.17";
  c.hosts = 1;
  c.daemon_args = {"--deny-exe", "fallback_probe"};
  Cluster cluster(c);
  CONDUIT_START_CLUSTER(cluster);
  Subprocess& probe = cluster.Launch(0, "fallback_probe", {ProbePath()});
  ASSERT_TRUE(probe.Wait(std::chrono::seconds(60))) << cluster.Describe();
  ExpectNativeProbe(probe.Output(), probe.exit_code(), kNativeNccl);
  EXPECT_NE(ConduitLine(probe.Output()).find("den"), std::string::npos)
      << "the conduit: line should say the daemon denied the program:\n"
      << probe.Output();
  EXPECT_TRUE(cluster.DaemonAlive(0)) << cluster.Describe();
}

// On the managed path NCCL's variables are not silently dropped: NCCL_DEBUG sets the shim's
// log level (TRACE: the debug line naming the daemon), and the tuning ones are named once,
// in one line, as ignored.
TEST(FallbackTest, ManagedPathNamesTheNcclVariablesItIgnores) {
  CONDUIT_SKIP_UNLESS_CLUSTER();
  ClusterConfig c;
  c.prefix = "fv";
  c.subnet = "10.231.46";
  c.hosts = 1;
  Cluster cluster(c);
  CONDUIT_START_CLUSTER(cluster);
  Subprocess& probe = cluster.Launch(0, "fallback_probe", {ProbePath()},
                                     {"NCCL_ALGO=Ring", "NCCL_SOCKET_IFNAME=eth0", "NCCL_DEBUG=TRACE"});
  ASSERT_TRUE(probe.Wait(std::chrono::seconds(60))) << cluster.Describe();
  const std::string out = probe.Output();
  EXPECT_EQ(probe.exit_code(), 0) << out;
  EXPECT_NE(out.find("ncclGetUniqueId=0"), std::string::npos) << out;
  // The managed path's debug line: the daemon serves the program, and TRACE shows it.
  EXPECT_NE(out.find("using conduitd at"), std::string::npos) << "NCCL_DEBUG=TRACE should show debug lines:\n" << out;
  size_t at = out.find("ignoring ");
  ASSERT_NE(at, std::string::npos) << out;
  const std::string line = out.substr(at, out.find('\n', at) - at);
  EXPECT_NE(line.find("NCCL_ALGO"), std::string::npos) << line;
  EXPECT_NE(line.find("NCCL_SOCKET_IFNAME"), std::string::npos) << line;
  EXPECT_EQ(line.find("NCCL_DEBUG"), std::string::npos) << "NCCL_DEBUG is honoured, not ignored: " << line;
  EXPECT_EQ(out.find("ignoring ", at + 1), std::string::npos) << "named more than once:\n" << out;
}

}  // namespace
}  // namespace conduit::it
