// Configuration files: one "name = value" setting per line (docs/configuration.md).
//
// This file only reads and tokenizes; what a name means and whether its value is good is
// the caller's business (conduitd runs every entry through the same setter as the command
// line's flag of that name). Every error, the caller's included, names the file and, for a
// line's error, the line, so an operator can go straight to it.
//
// The file is an input like any other: it must be a regular file (not a FIFO that would
// block the daemon, not a directory), at most kMaxConfigFileBytes, and every line must
// follow the grammar; anything else is an error, never a guess.
#ifndef CONDUIT_DAEMON_COMMON_CONFIG_FILE_H_
#define CONDUIT_DAEMON_COMMON_CONFIG_FILE_H_

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace conduit {

inline constexpr size_t kMaxConfigFileBytes = 1 << 20;

struct ConfigEntry {
  std::string name;   // e.g. "listen": a command-line flag without its "--"
  std::string value;  // surrounding blanks removed; never empty
  int line = 0;       // 1-based
};

// Called for every entry in file order; an error stops the reading and comes back as
// "FILE:LINE: " + its message.
using ConfigEntrySink = std::function<Status(const ConfigEntry&)>;

// Tokenizes `text` (the contents of `path`, which only names it in messages).
Status ParseConfigText(std::string_view text, const std::string& path, const ConfigEntrySink& sink);
// Reads `path` (checked as above) and tokenizes it.
Status ReadConfigFile(const std::string& path, const ConfigEntrySink& sink);

}  // namespace conduit

#endif  // CONDUIT_DAEMON_COMMON_CONFIG_FILE_H_
