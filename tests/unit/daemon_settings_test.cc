// conduitd's settings table (daemon/settings/daemon_settings.h): every setting has its help
// and a default that its own parser takes, --help shows each with that default, and the
// command line, the configuration file and the environment combine as documented
// (docs/configuration.md). The daemon's handling of bad files and SIGHUP is
// integration.ops_test.
#include "settings/daemon_settings.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "admin/admin_socket.h"
#include "protocol/shim_protocol.h"
#include "tests/unit/temp_dir.h"
#include "transport/congestion.h"

namespace conduit {
namespace {

Status Parse(std::vector<const char*> args, CommandLine* cli) {
  args.insert(args.begin(), "conduitd");
  return ParseCommandLine(static_cast<int>(args.size()), args.data(), cli);
}

// The settings from a command line (and the file it names), as the daemon loads them.
Status Load(std::vector<const char*> args, DaemonSettings* out) {
  CommandLine cli;
  CONDUIT_RETURN_IF_ERROR(Parse(std::move(args), &cli));
  return LoadDaemonSettings(cli, out);
}

// Neither the test's environment nor a developer's decides the defaults checked here.
class DaemonSettingsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    unsetenv(shimproto::kSocketEnv);
    unsetenv(kAdminSocketEnv);
  }
  std::string WriteConfig(const std::string& text) { return temp_.Write("conduitd.conf", text); }
  conduit::test::TempDir temp_{"daemon_settings_test"};
};

TEST_F(DaemonSettingsTest, EverySettingHasHelpAndADefaultItsParserTakes) {
  std::set<std::string> names;
  for (const SettingSpec& spec : DaemonSettingSpecs()) {
    SCOPED_TRACE(spec.name);
    EXPECT_TRUE(names.insert(spec.name).second) << "named twice";
    EXPECT_FALSE(spec.name.starts_with("-"));
    EXPECT_FALSE(spec.help.empty());
    EXPECT_FALSE(spec.default_value.empty() && spec.default_note.empty()) << "--help must say the default";
    EXPECT_EQ(spec.value_name.empty(), spec.kind == SettingKind::kSwitch);
    EXPECT_EQ(spec.clear != nullptr, spec.kind == SettingKind::kList);
    ASSERT_NE(spec.set, nullptr);
    if (!spec.default_value.empty()) {
      DaemonSettings s;
      Status st = spec.set(s, spec.default_value);
      EXPECT_TRUE(st.ok()) << "the default '" << spec.default_value << "' is refused: " << st.message();
    }
  }
  EXPECT_EQ(names.count("config"), 0u) << "--config is the file, not a setting";
}

TEST_F(DaemonSettingsTest, HelpListsEverySettingWithItsDefault) {
  const std::string usage = DaemonUsage();
  for (const SettingSpec& spec : DaemonSettingSpecs()) {
    SCOPED_TRACE(spec.name);
    const size_t at = usage.find("\n  --" + spec.name + (spec.value_name.empty() ? "\n" : " " + spec.value_name));
    ASSERT_NE(at, std::string::npos) << usage;
    // Its help follows, indented, up to the next flag; the default is in it.
    const size_t next = usage.find("\n  --", at + 1);
    std::string entry = usage.substr(at, next == std::string::npos ? std::string::npos : next - at);
    std::string flat;
    for (char c : entry) {
      if (c != '\n' && !(c == ' ' && !flat.empty() && flat.back() == ' ')) flat += c;
      if (c == '\n' && !flat.empty() && flat.back() != ' ') flat += ' ';
    }
    const std::string shown = spec.default_note.empty() ? spec.default_value : spec.default_note;
    EXPECT_NE(flat.find("(default " + shown), std::string::npos) << flat;
  }
  EXPECT_NE(usage.find("(default 68719476736 = 64 GiB)"), std::string::npos) << "--max-shm-bytes in binary units";
  for (const char* heading : {"object store (libhoplite):", "RPC service (libmrpc-grpc):"}) {
    EXPECT_NE(usage.find(heading), std::string::npos) << heading;
  }
  size_t start = 0;
  while (start < usage.size()) {
    const size_t end = usage.find('\n', start);
    EXPECT_LE(end - start, 96u) << usage.substr(start, end - start);
    start = end + 1;
  }
}

// What the daemon runs with when nothing is given: the table's defaults, which agree with
// the defaults of the parts' own option structs (used by tests and other callers).
TEST_F(DaemonSettingsTest, DefaultsAreTheTablesAndAgreeWithThePartsDefaults) {
  DaemonSettings s;
  ASSERT_TRUE(Load({}, &s).ok());
  EXPECT_EQ(s.socket_path, shimproto::kDefaultSocketPath);
  EXPECT_EQ(s.admin_socket, AdminSocketFor(shimproto::kDefaultSocketPath));
  EXPECT_EQ(s.admin_mode, 0660u);
  EXPECT_EQ(s.listen, "0.0.0.0:7650");
  EXPECT_EQ(s.max_shm_bytes, 64ull << 30);
  EXPECT_EQ(s.shutdown_grace_ms, 2000);
  EXPECT_EQ(s.busy_poll_us, -1) << "busy_poll.h decides";
  EXPECT_EQ(s.peer_busy_poll_us, -1) << "busy_poll.h decides";
  EXPECT_EQ(s.peer_congestion, kDefaultPeerCongestion);
  EXPECT_FALSE(s.insecure_peers);
  EXPECT_TRUE(s.given.empty()) << "defaults are not given settings: a reload compares only what was given";
  const CommOptions comm;
  EXPECT_EQ(s.comm.timeout_ms, comm.timeout_ms);
  EXPECT_EQ(s.comm.chunk_bytes, comm.chunk_bytes);
  EXPECT_EQ(s.comm.allreduce_algo, comm.allreduce_algo);
  EXPECT_EQ(s.comm.rd_max_bytes, comm.rd_max_bytes);
  EXPECT_FALSE(s.comm.rd_max_bytes.has_value()) << "auto: the communicator's hosts and protocol version decide";
  EXPECT_EQ(s.comm.rd_latency_bytes, comm.rd_latency_bytes);
  EXPECT_EQ(s.comm.rh_max_bytes, comm.rh_max_bytes);
  EXPECT_FALSE(s.comm.rh_max_bytes.has_value()) << "auto: the communicator's protocol version decides";
  const objects::ObjectOptions objects;
  EXPECT_EQ(s.objects.memory_bytes, objects.memory_bytes);
  EXPECT_EQ(s.objects.block_bytes, objects.block_bytes);
  EXPECT_EQ(s.objects.default_access, objects.default_access);
  EXPECT_EQ(s.objects.quota_objects, objects.quota_objects);
  EXPECT_EQ(s.flows.assignment, FlowPolicy{}.assignment);
  EXPECT_EQ(s.ring.order, RingPolicy{}.order);
  EXPECT_EQ(s.log_level, LogLevel::kInfo);
}

// The all-reduce algorithms' limits: a number, or auto (unset: the communicator's hosts and
// protocol version decide, RecursiveDoublingMaxBytes and HalvingDoublingMaxBytes).
TEST_F(DaemonSettingsTest, AlgorithmLimitsAreANumberOrAuto) {
  const std::pair<std::string, std::optional<size_t> CommOptions::*> limits[] = {
      {"--rd-max-bytes", &CommOptions::rd_max_bytes}, {"--rh-max-bytes", &CommOptions::rh_max_bytes}};
  for (const auto& [flag, field] : limits) {
    DaemonSettings s;
    ASSERT_TRUE(Load({flag.c_str(), "0"}, &s).ok()) << flag;
    EXPECT_EQ(s.comm.*field, std::optional<size_t>(0)) << flag;
    ASSERT_TRUE(Load({flag.c_str(), "1048576"}, &s).ok()) << flag;
    EXPECT_EQ(s.comm.*field, std::optional<size_t>(1048576)) << flag;
    ASSERT_TRUE(Load({flag.c_str(), "auto"}, &s).ok()) << flag;
    EXPECT_FALSE((s.comm.*field).has_value()) << flag;
    for (const char* bad : {"1M", "-1"}) {
      Status st = Load({flag.c_str(), bad}, &s);
      EXPECT_FALSE(st.ok()) << flag << " " << bad;
      EXPECT_NE(st.message().find(flag.substr(2)), std::string::npos) << st.message();
    }
  }
}

TEST_F(DaemonSettingsTest, TheEnvironmentNamesTheSocketsUnlessAFlagDoes) {
  setenv(shimproto::kSocketEnv, "/tmp/env.sock", 1);
  DaemonSettings s;
  ASSERT_TRUE(Load({}, &s).ok());
  EXPECT_EQ(s.socket_path, "/tmp/env.sock");
  EXPECT_EQ(s.admin_socket, AdminSocketFor("/tmp/env.sock"));
  setenv(kAdminSocketEnv, "/tmp/env-admin.sock", 1);
  ASSERT_TRUE(Load({"--socket", "/tmp/flag.sock"}, &s).ok());
  EXPECT_EQ(s.socket_path, "/tmp/flag.sock");
  EXPECT_EQ(s.admin_socket, "/tmp/env-admin.sock");
  unsetenv(shimproto::kSocketEnv);
  unsetenv(kAdminSocketEnv);
}

TEST_F(DaemonSettingsTest, CommandLineOverridesTheFileAndRepeatableFlagsReplaceItsList) {
  const std::string config = WriteConfig(
      "timeout-ms = 10000\ndeny-exe = a\ndeny-exe = b\nadmin-uid = 7\nlog-level = debug\ninsecure-peers = true\n");
  DaemonSettings s;
  ASSERT_TRUE(Load({"--config", config.c_str()}, &s).ok());
  EXPECT_EQ(s.comm.timeout_ms, 10000);
  EXPECT_EQ(s.deny_exe, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(s.insecure_peers);
  EXPECT_EQ(s.given["deny-exe"], (std::vector<std::string>{"a", "b"}));

  ASSERT_TRUE(Load({"--config", config.c_str(), "--deny-exe", "c", "--timeout-ms", "20000", "--deny-exe", "d"}, &s)
                  .ok());
  EXPECT_EQ(s.comm.timeout_ms, 20000);
  EXPECT_EQ(s.deny_exe, (std::vector<std::string>{"c", "d"})) << "the command line's list replaces the file's";
  EXPECT_EQ(s.admin.operator_uids, (std::vector<int>{7}));
  EXPECT_EQ(s.objects.operator_uids, (std::vector<int>{7})) << "the object store's operators are the admin API's";
  EXPECT_EQ(s.log_level, LogLevel::kDebug);
  EXPECT_EQ(s.given["timeout-ms"], (std::vector<std::string>{"20000"}));
}

TEST_F(DaemonSettingsTest, BadCommandLinesAreRefusedWithWhatIsWrong) {
  struct Case {
    std::vector<const char*> args;
    std::string error;
  };
  const std::vector<Case> cases = {
      {{"--no-such-flag"}, "unknown flag --no-such-flag"},
      {{"timeout-ms", "5"}, "unknown flag timeout-ms"},
      {{"--timeout-ms"}, "missing value for --timeout-ms"},
      {{"--config"}, "missing value for --config"},
      {{"--timeout-ms", "soon"}, "--timeout-ms: 'soon' is not a number from 0 to 2147483647"},
      {{"--timeout-ms", "0"}, "timeout-ms must be positive"},
      {{"--admin-mode", "0999"}, "--admin-mode: '0999' is not a file mode"},
      {{"--busy-poll-us", "100001"}, "--busy-poll-us: must be at most 100000"},
      {{"--peer-congestion", "Cubic"}, "--peer-congestion: 'Cubic' is not a congestion control name"},
      {{"--allreduce-algo", "tree"}, "--allreduce-algo: must be auto, ring, rd or rh"},
      {{"--rpc-link-version", "1"}, "--rpc-link-version: must be 2 or 3"},
      {{"--metrics-listen", "nowhere"}, "--metrics-listen: 'nowhere' is not IP:PORT"},
      {{"--insecure-peers", "--cluster-key", "/k"}, "insecure-peers and cluster-key exclude each other"},
      {{"--encrypt-peers"}, "encrypt-peers needs cluster-key"},
      {{"--object-block-bytes", "100"}, "object-block-bytes must be at least 4096"},
      {{"--object-store-copy-bytes", "65536"}, "object-store-copy-bytes must be below 65536"},
      {{"--take-over-fd=2"}, "bad --take-over-fd"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args[0]);
    DaemonSettings s;
    Status st = Load(c.args, &s);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.canonical(), StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find(c.error), std::string::npos) << st.message();
  }
}

TEST_F(DaemonSettingsTest, HelpStopsTheParseAndTheUpgradeDescriptorIsNotAnArgument) {
  CommandLine cli;
  ASSERT_TRUE(Parse({"--timeout-ms", "5", "--help", "--no-such-flag"}, &cli).ok());
  EXPECT_TRUE(cli.help);
  ASSERT_TRUE(Parse({"--take-over-fd=9", "--listen", "127.0.0.1:1", "--rpc-managed-only"}, &cli).ok());
  EXPECT_FALSE(cli.help);
  EXPECT_EQ(cli.take_over_fd, 9);
  EXPECT_EQ(cli.args, (std::vector<std::string>{"--listen", "127.0.0.1:1", "--rpc-managed-only"}))
      << "what a live upgrade starts the next daemon with";
  ASSERT_EQ(cli.settings.size(), 2u);
  EXPECT_EQ(cli.settings[1].second, "true") << "a switch given is true";
}

}  // namespace
}  // namespace conduit
