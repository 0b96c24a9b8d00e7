#include "common/config_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fd_io.h"

namespace conduit {
namespace {

std::string_view TrimBlanks(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Names are command-line flags without "--": a lower-case letter, then lower-case
// letters, digits and '-'.
bool IsSettingName(std::string_view name) {
  if (name.empty() || name.front() < 'a' || name.front() > 'z') return false;
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return true;
}

// A name as it may appear in a message: the file is the operator's, but a message must
// stay one readable line whatever it holds.
std::string Shown(std::string_view s) {
  std::string out;
  for (unsigned char c : s.substr(0, 64)) out.push_back(c >= 0x20 && c < 0x7f ? static_cast<char>(c) : '?');
  if (s.size() > 64) out += "...";
  return out;
}

// One line without its end; Ok with *entry->name empty for a blank or comment line.
Status ParseLine(std::string_view line, ConfigEntry* entry) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);  // a file written on Windows
  for (unsigned char c : line) {
    if ((c < 0x20 && c != '\t') || c == 0x7f) {
      return InvalidArgument("control character 0x%02x in the line", static_cast<unsigned>(c));
    }
  }
  line = TrimBlanks(line.substr(0, line.find('#')));
  if (line.empty()) return Status::Ok();
  size_t eq = line.find('=');
  if (eq == std::string_view::npos) {
    return InvalidArgument("expected 'name = value', got '%s'", Shown(line).c_str());
  }
  std::string_view name = TrimBlanks(line.substr(0, eq));
  std::string_view value = TrimBlanks(line.substr(eq + 1));
  if (name.substr(0, 2) == "--") {
    return InvalidArgument("write the setting's name without the leading '--' ('%s')", Shown(name.substr(2)).c_str());
  }
  if (!IsSettingName(name)) {
    return InvalidArgument("'%s' is not a setting name (lower-case letters, digits and '-')", Shown(name).c_str());
  }
  if (value.empty()) return InvalidArgument("'%s' has no value", std::string(name).c_str());
  entry->name = std::string(name);
  entry->value = std::string(value);
  return Status::Ok();
}

}  // namespace

Status ParseConfigText(std::string_view text, const std::string& path, const ConfigEntrySink& sink) {
  if (text.size() > kMaxConfigFileBytes) {
    return InvalidArgument("%s: %zu bytes, over the %zu-byte limit of a configuration file", path.c_str(), text.size(),
                           kMaxConfigFileBytes);
  }
  int line_no = 0;
  while (!text.empty()) {
    ++line_no;
    size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    ConfigEntry entry;
    entry.line = line_no;
    Status st = ParseLine(line, &entry);
    if (st.ok() && !entry.name.empty()) st = sink(entry);
    if (!st.ok()) return Status(st.code(), path + ":" + std::to_string(line_no) + ": " + st.message());
  }
  return Status::Ok();
}

Status ReadConfigFile(const std::string& path, const ConfigEntrySink& sink) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; the type check below refuses it.
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (!fd.valid()) return SystemError("cannot open configuration file %s: %s", path.c_str(), strerror(errno));
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) {
    return SystemError("cannot stat configuration file %s: %s", path.c_str(), strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) return InvalidArgument("configuration file %s is not a regular file", path.c_str());
  if (static_cast<unsigned long long>(st.st_size) > kMaxConfigFileBytes) {
    return InvalidArgument("configuration file %s is %lld bytes, over the %zu-byte limit", path.c_str(),
                           static_cast<long long>(st.st_size), kMaxConfigFileBytes);
  }
  // Read one byte past the limit so a file that grew since fstat is caught too.
  std::string text(kMaxConfigFileBytes + 1, '\0');
  size_t have = 0;
  while (have < text.size()) {
    ssize_t n = read(fd.get(), text.data() + have, text.size() - have);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      return SystemError("cannot read configuration file %s: %s", path.c_str(), strerror(errno));
    }
    have += static_cast<size_t>(n);
  }
  if (have > kMaxConfigFileBytes) {
    return InvalidArgument("configuration file %s is over the %zu-byte limit", path.c_str(), kMaxConfigFileBytes);
  }
  text.resize(have);
  return ParseConfigText(text, path, sink);
}

}  // namespace conduit
