// The configuration file reader (common/config_file.h): the grammar of good files,
// every error naming file and line, the file-type checks and the size cap.
#include "common/config_file.h"
#include "tests/unit/temp_dir.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace conduit {
namespace {

class ConfigFileTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& text) { return temp_.Write(name, text); }

  // Reads `path`, collecting every entry.
  Status Read(const std::string& path) {
    entries_.clear();
    return ReadConfigFile(path, [this](const ConfigEntry& e) {
      entries_.push_back(e);
      return Status::Ok();
    });
  }
  Status Parse(const std::string& text) {
    entries_.clear();
    return ParseConfigText(text, "test.conf", [this](const ConfigEntry& e) {
      entries_.push_back(e);
      return Status::Ok();
    });
  }

  conduit::test::TempDir temp_{"config_file_test"};
  const std::string dir_ = temp_.path();
  std::vector<ConfigEntry> entries_;
};

void ExpectEntry(const ConfigEntry& e, const std::string& name, const std::string& value, int line) {
  EXPECT_EQ(e.name, name);
  EXPECT_EQ(e.value, value);
  EXPECT_EQ(e.line, line);
}

TEST_F(ConfigFileTest, ReadsSettingsCommentsAndBlankLines) {
  std::string path = Write("good.conf",
                           "# conduitd settings\n"
                           "\n"
                           "listen = 0.0.0.0:7650\n"
                           "  cluster-key=/etc/conduit/cluster.key   # the shared key\n"
                           "\t\n"
                           "deny-exe = bad\n"
                           "deny-exe\t=\tworse\n"
                           "insecure-peers = false\n"
                           "object-peers = 10.0.0.1:7650,10.0.0.2:7650\n"
                           "log-level = debug");  // no newline at the end
  ASSERT_TRUE(Read(path).ok());
  ASSERT_EQ(entries_.size(), 7u);
  ExpectEntry(entries_[0], "listen", "0.0.0.0:7650", 3);
  ExpectEntry(entries_[1], "cluster-key", "/etc/conduit/cluster.key", 4);
  ExpectEntry(entries_[2], "deny-exe", "bad", 6);  // repeated names are kept, in order
  ExpectEntry(entries_[3], "deny-exe", "worse", 7);
  ExpectEntry(entries_[4], "insecure-peers", "false", 8);
  ExpectEntry(entries_[5], "object-peers", "10.0.0.1:7650,10.0.0.2:7650", 9);
  ExpectEntry(entries_[6], "log-level", "debug", 10);
}

TEST_F(ConfigFileTest, AcceptsEmptyFilesCrlfAndValuesWithEqualsOrUtf8) {
  ASSERT_TRUE(Read(Write("empty.conf", "")).ok());
  EXPECT_TRUE(entries_.empty());
  ASSERT_TRUE(Read(Write("comments.conf", "# nothing\n   # at all\n\n")).ok());
  EXPECT_TRUE(entries_.empty());
  ASSERT_TRUE(Parse("topology = /etc/conduit/topo=1.json\r\nsocket = /run/c\xc3\xa9/s.sock\r\n").ok());
  ASSERT_EQ(entries_.size(), 2u);
  ExpectEntry(entries_[0], "topology", "/etc/conduit/topo=1.json", 1);
  ExpectEntry(entries_[1], "socket", "/run/c\xc3\xa9/s.sock", 2);
}

TEST_F(ConfigFileTest, FollowsASymlinkToARegularFile) {
  std::string target = Write("real.conf", "log-level = warn\n");
  std::string link = dir_ + "/link.conf";
  ASSERT_EQ(symlink(target.c_str(), link.c_str()), 0);
  ASSERT_TRUE(Read(link).ok());
  ASSERT_EQ(entries_.size(), 1u);
}

// Every malformed line is refused with "FILE:LINE: why", and nothing after it is read.
TEST_F(ConfigFileTest, MalformedLinesNameFileAndLine) {
  struct Case {
    std::string text;
    int line;
    std::string why;
    size_t entries_before = 0;  // handed out before the bad line
  };
  const std::vector<Case> cases = {
      {"listen = 0.0.0.0:1\nlisten 0.0.0.0:2\n", 2, "expected 'name = value'", 1},
      {"--listen = 0.0.0.0:1\n", 1, "without the leading '--'"},
      {"Listen = x\n", 1, "not a setting name"},
      {"log_level = info\n", 1, "not a setting name"},
      {"1listen = x\n", 1, "not a setting name"},
      {"= x\n", 1, "not a setting name"},
      {"\n\nlog-level =   # nothing\n", 3, "'log-level' has no value"},
      {"log-level = in\x01" "fo\n", 1, "control character 0x01"},
      {std::string("socket = /a\0b\n", 14), 1, "control character 0x00"},
      {"socket = /a\rb\n", 1, "control character 0x0d"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    Status st = Parse(c.text);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.code(), ncclInvalidArgument);
    EXPECT_EQ(st.message().rfind("test.conf:" + std::to_string(c.line) + ": ", 0), 0u) << st.message();
    EXPECT_NE(st.message().find(c.why), std::string::npos) << st.message();
    EXPECT_EQ(entries_.size(), c.entries_before);
  }
}

// The caller's verdict on an entry (an unknown name, a bad value) gets the same place.
TEST_F(ConfigFileTest, TheCallersErrorsNameFileAndLineToo) {
  std::string path = Write("unknown.conf", "log-level = info\n# fine so far\nno-such-setting = 1\nlisten = x:1\n");
  std::vector<std::string> seen;
  Status st = ReadConfigFile(path, [&](const ConfigEntry& e) {
    seen.push_back(e.name);
    if (e.name == "no-such-setting") return InvalidArgument("unknown setting '%s'", e.name.c_str());
    return Status::Ok();
  });
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), path + ":3: unknown setting 'no-such-setting'");
  EXPECT_EQ(seen, (std::vector<std::string>{"log-level", "no-such-setting"}));  // stopped there
}

TEST_F(ConfigFileTest, RefusesMissingFilesAndFilesThatAreNotRegular) {
  Status st = Read(dir_ + "/missing.conf");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(dir_ + "/missing.conf"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("No such file"), std::string::npos) << st.message();

  st = Read(dir_);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(dir_ + " is not a regular file"), std::string::npos) << st.message();

  // A FIFO with no writer: refused at once instead of blocking the daemon.
  std::string fifo = dir_ + "/fifo.conf";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  st = Read(fifo);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("not a regular file"), std::string::npos) << st.message();

  st = Read("/dev/null");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("not a regular file"), std::string::npos) << st.message();
}

TEST_F(ConfigFileTest, CapsTheSize) {
  // Exactly at the cap: read (a long comment line, then one setting).
  std::string tail = "\nlog-level = info\n";
  // Built by appending: `"#" + std::string(...)` draws GCC 12's false -Wrestrict at -O3.
  std::string at_cap(1, '#');
  at_cap.append(kMaxConfigFileBytes - 1 - tail.size(), 'x').append(tail);
  ASSERT_EQ(at_cap.size(), kMaxConfigFileBytes);
  ASSERT_TRUE(Read(Write("at-cap.conf", at_cap)).ok());
  ASSERT_EQ(entries_.size(), 1u);
  EXPECT_EQ(entries_[0].line, 2);

  // One byte over: refused before anything is handed out.
  std::string path = Write("over-cap.conf", at_cap + "#");
  Status st = Read(path);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(path), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("limit"), std::string::npos) << st.message();
  EXPECT_TRUE(entries_.empty());

  st = Parse(at_cap + "#");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("limit"), std::string::npos) << st.message();
  EXPECT_TRUE(entries_.empty());
}

}  // namespace
}  // namespace conduit
