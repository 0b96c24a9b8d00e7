// conduitd's settings: every flag of the command line, which is also a `name = value` line
// of the configuration file (docs/configuration.md), defined once.
//
// One table (DaemonSettingSpecs) gives each setting its name, its value's syntax, its
// default, its help text, its parser and, where it can change while the daemon runs, how a
// reload applies it. The defaults are applied through the same parsers as the operator's
// values, `conduitd --help` is generated from the table, and the file and the command line
// accept and refuse exactly the same values.
//
// Why not Abseil flags (the declared flags library): an Abseil flag is named by its C++
// identifier, so it cannot be called --timeout-ms (hyphens; abseil-cpp issue #961, "unlikely
// to happen"): every operator's command line, configuration file, systemd unit and container
// manifest would change. Abseil's repeated flags keep only the last occurrence (a second
// --deny-exe would silently drop the first: a policy hole), and a configuration file that a
// SIGHUP re-reads and compares against the running values has no counterpart there.
#ifndef CONDUIT_DAEMON_SETTINGS_DAEMON_SETTINGS_H_
#define CONDUIT_DAEMON_SETTINGS_DAEMON_SETTINGS_H_

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "admin/admin_server.h"
#include "collectives/communicator.h"
#include "common/log.h"
#include "common/status.h"
#include "objects/object_api.h"
#include "policy/fabric.h"
#include "policy/placement_policy.h"
#include "server/program_policy.h"

namespace conduit {

// The values of every setting (what DaemonSettingSpecs parses into). Fields carry no
// defaults of their own that the daemon relies on: DefaultDaemonSettings applies the
// table's.
struct DaemonSettings {
  std::string socket_path;
  std::string listen;
  std::string advertise;
  std::string admin_socket;
  unsigned admin_mode = 0;
  AdminServerOptions admin;
  CommOptions comm;
  std::vector<std::string> deny_exe;
  uint64_t max_shm_bytes = 0;
  std::string topology;
  FlowPolicy flows;
  RingPolicy ring;
  objects::ObjectOptions objects;
  std::string object_peers;
  uint32_t rpc_inline_max = 0;
  int busy_poll_us = -1;  // -1: common/busy_poll.h's default
  int peer_busy_poll_us = -1;  // the same for collectives waiting for peer daemons' bytes
  std::string peer_congestion;  // transport/congestion.h: a kernel name, or "host"
  int shutdown_grace_ms = 0;  // how long programs have to hear why the daemon is going
  std::string cluster_key;
  bool insecure_peers = false;
  bool encrypt_peers = false;
  uint64_t rpc_link_assembly_bytes = 0;
  uint32_t rpc_link_version = 0;
  bool rpc_managed_only = false;
  LogLevel log_level = LogLevel::kInfo;
  std::string metrics_listen;  // "" = no metrics port
  // Every setting as given, configuration file first, then the command line on top:
  // name -> its values (one, or a repeatable flag's list). A reload compares these.
  std::map<std::string, std::vector<std::string>> given;
};

// The parts of a running daemon that settings can change without a restart.
struct LiveParts {
  Fabric* fabric;
  ProgramPolicy* policy;
};

enum class SettingKind {
  kValue,   // --name VALUE; once in a file (the last one counts)
  kSwitch,  // --name alone; "name = true|false" in a file
  kList,    // --name VALUE, repeatable; may repeat in a file too
};

// Where --help lists a setting.
enum class SettingGroup { kDaemon, kObjects, kRpc };

struct SettingSpec {
  std::string name = {};        // the flag without "--", the file's name
  SettingKind kind = SettingKind::kValue;
  SettingGroup group = SettingGroup::kDaemon;
  std::string value_name = {};  // how --help shows the value ("N", "PATH"); empty for a switch
  // The default, parsed by `set` like an operator's value; empty when there is none or
  // it is computed elsewhere (then `default_note` says what it is).
  std::string default_value = {};
  std::string default_env = {};   // when set and non-empty, this variable's value is the default
  std::string default_note = {};  // --help's "(default ...)" text, where the value alone does not say it
  std::string help = {};
  // Parses `value` into the settings; a refusal says why without naming the setting.
  Status (*set)(DaemonSettings& s, const std::string& value) = nullptr;
  // kList: empties the list (command-line values replace the file's).
  void (*clear)(DaemonSettings& s) = nullptr;
  // Applies the setting's new value to the running daemon (SIGHUP); null: needs a restart.
  void (*apply_live)(const DaemonSettings& fresh, const LiveParts& daemon) = nullptr;
};

// Every setting, in the order --help lists them.
std::span<const SettingSpec> DaemonSettingSpecs();
const SettingSpec* FindDaemonSetting(std::string_view name);

// What the command line says, flags in order; --config is kept apart because the file it
// names is read first and the other flags override it.
struct CommandLine {
  bool help = false;  // -h or --help
  std::string config;
  std::vector<std::pair<const SettingSpec*, std::string>> settings;
  // Set only by the daemon this one replaces (live upgrade, upgrade/handover.h): its end of
  // the handover socketpair. Not a setting: never in a file, never shown in --help.
  int take_over_fd = -1;
  // The command line as given, without argv[0] and --take-over-fd: what a live upgrade
  // starts the new daemon with.
  std::vector<std::string> args;
};

// Splits argv into settings (checked for a known name and a value, not yet parsed).
// Stops at --help.
Status ParseCommandLine(int argc, const char* const* argv, CommandLine* out);

// The --help text, generated from the table.
std::string DaemonUsage();

// Every setting at its default (environment included); nothing counts as given.
DaemonSettings DefaultDaemonSettings();
// The settings of the configuration file at `path` on top of `s`; errors name the file,
// the line and the setting.
Status ApplyConfigFile(const std::string& path, DaemonSettings& s);
// The same for a file's text already read (`source` names it in errors).
Status ApplyConfigText(std::string_view text, const std::string& source, DaemonSettings& s);
// The command line's settings on top of `s`: each replaces the file's value, and a
// repeatable flag's first occurrence drops the file's list. Errors name the flag.
Status ApplyCommandLine(const CommandLine& cli, DaemonSettings& s);
// Checks that need every setting, and the values that depend on others.
Status FinishDaemonSettings(DaemonSettings& s);
// Defaults, then the configuration file, then the command line, then the checks: what
// the daemon starts with and what a reload re-reads.
Status LoadDaemonSettings(const CommandLine& cli, DaemonSettings* out);

// SIGHUP: re-reads the configuration file (with the command line on top, as at start) and
// applies what changed and can change live; every other change is logged and waits for a
// restart. Settings nobody changed in the file are left alone, so what the admin API set
// at run time stays. Then the topology file is re-read. A file that does not load changes
// nothing.
void ReloadDaemonSettings(const CommandLine& cli, DaemonSettings* running, const LiveParts& daemon);

}  // namespace conduit

#endif  // CONDUIT_DAEMON_SETTINGS_DAEMON_SETTINGS_H_
