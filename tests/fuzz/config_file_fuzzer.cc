// ParseConfigText, the tokenizer of conduitd's configuration file (--config, re-read on
// SIGHUP; docs/configuration.md). Besides not crashing: every entry it hands on has a
// setting name (a lower-case letter, then lower-case letters, digits and '-'), a value with
// no surrounding blanks, no '#' and no control character but tab, and a line number that
// grows within the text's line count; and the entries written back one per line as
// "name = value" tokenize again to the same entries.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/config_file.h"
#include "fuzz_check.h"

namespace {

using conduit::ConfigEntry;
using conduit::Status;

std::vector<ConfigEntry> Tokenize(std::string_view text, Status* st) {
  std::vector<ConfigEntry> entries;
  *st = conduit::ParseConfigText(text, "fuzz.conf", [&](const ConfigEntry& e) {
    entries.push_back(e);
    return Status::Ok();
  });
  return entries;
}

bool IsNameChar(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  Status st;
  const std::vector<ConfigEntry> entries = Tokenize(text, &st);
  if (!st.ok()) {
    FUZZ_CHECK(st.message().rfind("fuzz.conf", 0) == 0, "an error that does not name the file: %s",
               st.message().c_str());
    return 0;
  }
  size_t lines = 0;
  for (char c : text) lines += c == '\n';
  if (!text.empty() && text.back() != '\n') ++lines;
  int last_line = 0;
  std::string again;
  for (const ConfigEntry& e : entries) {
    FUZZ_CHECK(e.line > last_line && static_cast<size_t>(e.line) <= lines, "line %d after %d of %zu", e.line,
               last_line, lines);
    last_line = e.line;
    FUZZ_CHECK(!e.name.empty() && e.name[0] >= 'a' && e.name[0] <= 'z', "bad name '%s'", e.name.c_str());
    for (char c : e.name) FUZZ_CHECK(IsNameChar(c), "bad name '%s'", e.name.c_str());
    FUZZ_CHECK(!e.value.empty(), "empty value for %s", e.name.c_str());
    FUZZ_CHECK(e.value.front() != ' ' && e.value.front() != '\t' && e.value.back() != ' ' && e.value.back() != '\t',
               "value of %s keeps blanks", e.name.c_str());
    for (unsigned char c : e.value) {
      FUZZ_CHECK(c != '#' && ((c >= 0x20 && c != 0x7f) || c == '\t'), "value of %s holds 0x%02x", e.name.c_str(),
                 static_cast<unsigned>(c));
    }
    again += e.name + " = " + e.value + "\n";
  }
  const std::vector<ConfigEntry> reparsed = Tokenize(again, &st);
  FUZZ_CHECK(st.ok(), "the entries written back are refused: %s\n%s", st.message().c_str(), again.c_str());
  FUZZ_CHECK(reparsed.size() == entries.size(), "%zu entries became %zu", entries.size(), reparsed.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    FUZZ_CHECK(reparsed[i].name == entries[i].name && reparsed[i].value == entries[i].value,
               "entry %zu changed: %s = %s", i, reparsed[i].name.c_str(), reparsed[i].value.c_str());
  }
  return 0;
}
