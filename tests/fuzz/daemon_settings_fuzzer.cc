// conduitd's settings (daemon/settings): a configuration file's text applied through every
// setting's parser, as at start and on SIGHUP. Besides not crashing:
// - a refusal names the file and the line ("fuzz.conf:N: ...");
// - the same text applied twice gives the same settings (no parser keeps state);
// - the file and the command line accept and refuse the same values: each entry alone,
//   as `name = value` on defaults and as `--name value` (`--name` for a switch set to
//   true) on defaults, is taken by both or by neither, and both record the same value;
// - text that is taken goes through FinishDaemonSettings (the checks across settings).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/config_file.h"
#include "fuzz_check.h"
#include "settings/daemon_settings.h"

namespace {

using conduit::ConfigEntry;
using conduit::DaemonSettings;
using conduit::Status;

constexpr char kSource[] = "fuzz.conf";

// The file's path for one entry alone: a refusal says so, acceptance records its value.
Status ViaFile(const ConfigEntry& e, DaemonSettings* s) {
  return conduit::ApplyConfigText(e.name + " = " + e.value + "\n", kSource, *s);
}

Status ViaCommandLine(const conduit::SettingSpec& spec, const std::string& value, DaemonSettings* s) {
  const std::string flag = "--" + spec.name;
  std::vector<const char*> argv = {"conduitd", flag.c_str()};
  if (spec.kind != conduit::SettingKind::kSwitch) argv.push_back(value.c_str());
  conduit::CommandLine cli;
  Status st = conduit::ParseCommandLine(static_cast<int>(argv.size()), argv.data(), &cli);
  FUZZ_CHECK(st.ok(), "a known flag with a value is refused by the parser: %s", st.message().c_str());
  return conduit::ApplyCommandLine(cli, *s);
}

void CheckFileAgreesWithCommandLine(const ConfigEntry& e) {
  const conduit::SettingSpec* spec = conduit::FindDaemonSetting(e.name);
  if (spec == nullptr) return;
  // A switch on the command line can only say true.
  if (spec->kind == conduit::SettingKind::kSwitch && e.value != "true") return;
  DaemonSettings from_file = conduit::DefaultDaemonSettings();
  DaemonSettings from_flags = conduit::DefaultDaemonSettings();
  const Status file = ViaFile(e, &from_file);
  const Status flags = ViaCommandLine(*spec, e.value, &from_flags);
  FUZZ_CHECK(file.ok() == flags.ok(), "%s = '%s': the file says '%s', the command line '%s'", e.name.c_str(),
             e.value.c_str(), file.message().c_str(), flags.message().c_str());
  if (!file.ok()) {
    FUZZ_CHECK(flags.message().find("--" + e.name) != std::string::npos, "the flag's refusal does not name it: %s",
               flags.message().c_str());
    return;
  }
  FUZZ_CHECK(from_file.given == from_flags.given, "%s = '%s' is recorded differently by the file and the flags",
             e.name.c_str(), e.value.c_str());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  DaemonSettings first = conduit::DefaultDaemonSettings();
  const Status st = conduit::ApplyConfigText(text, kSource, first);
  DaemonSettings second = conduit::DefaultDaemonSettings();
  const Status again = conduit::ApplyConfigText(text, kSource, second);
  FUZZ_CHECK(st.ok() == again.ok() && st.message() == again.message(), "the same text: '%s', then '%s'",
             st.message().c_str(), again.message().c_str());
  FUZZ_CHECK(first.given == second.given, "the same text gave other settings");
  if (!st.ok()) {
    FUZZ_CHECK(st.message().rfind(std::string(kSource) + ":", 0) == 0, "a refusal that does not name the file: %s",
               st.message().c_str());
  } else {
    (void)conduit::FinishDaemonSettings(first);
  }
  // Every entry the tokenizer hands on (up to a refused line), file against flags.
  std::vector<ConfigEntry> entries;
  (void)conduit::ParseConfigText(text, kSource, [&](const ConfigEntry& e) {
    entries.push_back(e);
    return Status::Ok();
  });
  for (const ConfigEntry& e : entries) CheckFileAgreesWithCommandLine(e);
  return 0;
}
