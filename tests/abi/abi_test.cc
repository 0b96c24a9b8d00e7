// Checks that Conduit's nccl.h and libnccl.so.2 can stand in for NVIDIA's:
// the headers must agree on every value, layout and signature, and our
// library must export every symbol NVIDIA's does.

#include <stdio.h>

#include <map>
#include <set>
#include <sstream>
#include <string>

#include "abi_table.h"
#include "gtest/gtest.h"

namespace conduit_abi {
namespace {

std::map<std::string, std::string> ToMap(const AbiTable& table) {
  std::map<std::string, std::string> out;
  for (const AbiEntry& e : table) out[e.name] = e.value;
  return out;
}

TEST(AbiTableTest, ConduitHeaderMatchesNvidiaHeader) {
  const AbiTable nvidia = NvidiaAbiTable();
  const AbiTable conduit = ConduitAbiTable();
  // Both sides expand the same lists, so a size mismatch means the builder
  // itself is broken, not the header.
  ASSERT_EQ(nvidia.size(), conduit.size());
  ASSERT_GT(nvidia.size(), 300u);

  std::ostringstream diffs;
  int ndiff = 0;
  for (size_t i = 0; i < nvidia.size(); ++i) {
    ASSERT_EQ(nvidia[i].name, conduit[i].name);
    if (nvidia[i].value != conduit[i].value) {
      ++ndiff;
      diffs << "  " << nvidia[i].name << "\n    nvidia:  " << nvidia[i].value
            << "\n    conduit: " << conduit[i].value << "\n";
    }
  }
  EXPECT_EQ(ndiff, 0) << ndiff << " of " << nvidia.size()
                      << " ABI facts differ:\n"
                      << diffs.str();
}

// Parses `nm -D --defined-only` output into symbol names, dropping any
// @VERSION suffix.
std::set<std::string> DynamicSymbols(const std::string& library) {
  std::set<std::string> out;
  const std::string cmd =
      std::string(CONDUIT_ABI_NM) + " -D --defined-only '" + library + "'";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) {
    ADD_FAILURE() << "cannot run: " << cmd;
    return out;
  }
  char line[1024];
  while (fgets(line, sizeof(line), pipe) != nullptr) {
    std::istringstream fields(line);
    std::string addr, type, name;
    if (!(fields >> addr >> type >> name)) continue;
    name = name.substr(0, name.find('@'));
    out.insert(name);
  }
  const int status = pclose(pipe);
  EXPECT_EQ(status, 0) << cmd << " failed";
  EXPECT_FALSE(out.empty()) << cmd << " listed no symbols";
  return out;
}

bool IsNcclName(const std::string& s) {
  return s.rfind("nccl", 0) == 0 || s.rfind("pnccl", 0) == 0;
}

std::string Join(const std::set<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += "  " + n + "\n";
  return out;
}

TEST(SymbolTest, ConduitExportsEveryNvidiaSymbol) {
  const std::set<std::string> nvidia = DynamicSymbols(CONDUIT_ABI_NVIDIA_LIB);
  const std::set<std::string> conduit = DynamicSymbols(CONDUIT_ABI_CONDUIT_LIB);
  std::set<std::string> missing;
  for (const std::string& s : nvidia) {
    if (IsNcclName(s) && conduit.count(s) == 0) missing.insert(s);
  }
  EXPECT_TRUE(missing.empty())
      << CONDUIT_ABI_CONDUIT_LIB << " lacks " << missing.size()
      << " symbols exported by " << CONDUIT_ABI_NVIDIA_LIB << ":\n"
      << Join(missing);
}

TEST(SymbolTest, ConduitExportsNothingElse) {
  const std::set<std::string> nvidia = DynamicSymbols(CONDUIT_ABI_NVIDIA_LIB);
  const std::set<std::string> conduit = DynamicSymbols(CONDUIT_ABI_CONDUIT_LIB);
  std::set<std::string> foreign;     // Would leak into user programs.
  std::set<std::string> extra_nccl;  // Harmless, but worth knowing about.
  for (const std::string& s : conduit) {
    if (s.empty() || s[0] == '_') continue;
    if (!IsNcclName(s)) {
      foreign.insert(s);
    } else if (nvidia.count(s) == 0) {
      extra_nccl.insert(s);
    }
  }
  EXPECT_TRUE(foreign.empty()) << CONDUIT_ABI_CONDUIT_LIB
                               << " exports non-NCCL symbols (check "
                                  "libnccl.map):\n"
                               << Join(foreign);
  if (!extra_nccl.empty()) {
    printf("note: nccl symbols exported only by Conduit:\n%s",
           Join(extra_nccl).c_str());
  }
}

// Guards the lists in abi_lists.h: a function that a newer NVIDIA library
// exports but the lists do not name would otherwise go unchecked.
TEST(SymbolTest, AbiListsCoverEveryNvidiaFunction) {
  const std::map<std::string, std::string> table = ToMap(NvidiaAbiTable());
  std::set<std::string> unlisted;
  for (const std::string& s : DynamicSymbols(CONDUIT_ABI_NVIDIA_LIB)) {
    // Declared in no NVIDIA header, so there is no signature to compare.
    if (s == "ncclResetDebugInitInternal") continue;
    if (IsNcclName(s) && table.count("&" + s) == 0) unlisted.insert(s);
  }
  EXPECT_TRUE(unlisted.empty()) << "add to tests/abi/abi_lists.h:\n"
                                << Join(unlisted);
}

}  // namespace
}  // namespace conduit_abi
