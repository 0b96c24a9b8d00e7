// conduit-perf run for real, with nccl-tests command lines, against a conduitd of
// its own (a private socket, no peers): the table it prints has nccl-tests' columns,
// one row per size, every result checked and right. Skips when no daemon starts.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

std::string Dir(const std::string& path) { return path.substr(0, path.rfind('/')); }

struct Result {
  int status = -1;  // exit status, or -1 when killed
  std::string out;  // stdout
  std::string err;  // stderr
};

std::string Slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Runs `args` (args[0] is the program) with stdout and stderr in files under `dir`.
Result RunProgram(const std::string& dir, const std::vector<std::string>& args) {
  static std::atomic<int> seq{0};
  const std::string out = dir + "/out." + std::to_string(++seq), err = out + ".err";
  const pid_t pid = fork();
  if (pid == 0) {
    const int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(o, 1);
    dup2(e, 2);
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  Result r;
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = Slurp(out);
  r.err = Slurp(err);
  return r;
}

std::vector<std::vector<std::string>> Rows(const std::string& out) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    std::vector<std::string> row;
    for (std::string w; words >> w;) row.push_back(w);
    rows.push_back(row);
  }
  return rows;
}

// Every row: size count type redop root, then time algbw busbw #wrong out of place
// and in place (nccl-tests' 13 columns), no wrong element.
void ExpectGoodTable(const Result& r, size_t rows_wanted, const std::string& type, const std::string& redop,
                     bool in_place_checked = true) {
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("#       size         count      type   redop    root     time   algbw   busbw  #wrong     "
                       "time   algbw   busbw  #wrong"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("# Out of bounds values : 0 OK"), std::string::npos) << r.out;
  const auto rows = Rows(r.out);
  EXPECT_EQ(rows.size(), rows_wanted) << r.out;
  for (const auto& row : rows) {
    ASSERT_EQ(row.size(), 13u) << r.out;
    EXPECT_EQ(row[2], type) << r.out;
    EXPECT_EQ(row[3], redop) << r.out;
    EXPECT_EQ(row[8], "0") << r.out;
    EXPECT_EQ(row[12], in_place_checked ? "0" : "N/A") << r.out;
    EXPECT_GT(std::stod(row[5]), 0) << r.out;
  }
}

class PerfRun : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/conduit-perf-test.XXXXXX";
    dir_ = mkdtemp(tmpl);
    const std::string sock = dir_ + "/conduitd.sock";
    daemon_ = fork();
    if (daemon_ == 0) {
      const int log = open((dir_ + "/conduitd.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(log, 1);
      dup2(log, 2);
      execl(CONDUITD_PATH, CONDUITD_PATH, "--socket", sock.c_str(), "--listen", "127.0.0.1:0", "--log-level", "warn",
            static_cast<char*>(nullptr));
      _exit(127);
    }
    for (int i = 0; i < 100; ++i) {
      struct stat st;
      if (stat(sock.c_str(), &st) == 0) {
        setenv("CONDUIT_SOCKET", sock.c_str(), 1);
        return;
      }
      if (waitpid(daemon_, nullptr, WNOHANG) == daemon_) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    skip_ = "conduitd did not start: " + Slurp(dir_ + "/conduitd.log");
  }

  static void TearDownTestSuite() {
    if (daemon_ > 0) {
      kill(daemon_, SIGTERM);
      waitpid(daemon_, nullptr, 0);
    }
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
  }

  // The nccl-tests binary names are symlinks beside conduit-perf.
  static std::string Bin(const std::string& name) { return Dir(CONDUIT_PERF_PATH) + "/" + name; }

  static std::string dir_;
  static pid_t daemon_;
  static std::string skip_;
};

std::string PerfRun::dir_;
pid_t PerfRun::daemon_ = -1;
std::string PerfRun::skip_;

// The command line of the issue, through the all_reduce_perf name (128M cut to 4M
// to keep the test short): 20 rows from 8 bytes doubling.
TEST_F(PerfRun, AllReducePerfWithNcclTestsFlags) {
  const Result r = RunProgram(
      dir_, {Bin("all_reduce_perf"), "-b", "8", "-e", "4M", "-f", "2", "-o", "max", "-d", "int32", "-c", "1"});
  ExpectGoodTable(r, 20, "int32", "max");
  EXPECT_NE(r.out.find("# Collective test starting: all_reduce_perf"), std::string::npos);
  EXPECT_NE(r.out.find("minBytes 8 maxBytes 4194304 step: 2(factor) warmup iters: 1 iters: 20"), std::string::npos);
  const auto rows = Rows(r.out);
  ASSERT_FALSE(rows.empty());
  EXPECT_EQ(rows.front()[0], "8");
  EXPECT_EQ(rows.front()[1], "2");
  EXPECT_EQ(rows.back()[0], "4194304");
  EXPECT_EQ(rows.back()[4], "-1");  // all_reduce has no root
}

// -t: ranks as threads; -g: ranks per thread; -o all / -d all loop over every
// operator / type; default steps are -i bytes when -f is not given.
TEST_F(PerfRun, ThreadsAsRanksAndAllValues) {
  Result r = RunProgram(dir_, {CONDUIT_PERF_PATH, "-t", "2", "-g", "2", "-b", "1K", "-e", "3K", "-i", "1K", "-o", "all",
                               "-d", "half", "-n", "3", "-c", "2"});
  EXPECT_NE(r.out.find("# nThread 2 nGpus 2 minBytes 1024 maxBytes 3072 step: 1024(bytes)"), std::string::npos)
      << r.out;
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  const auto rows = Rows(r.out);
  ASSERT_EQ(rows.size(), 18u) << r.out;  // 6 operators x 3 sizes
  const char* ops[] = {"sum", "prod", "max", "min", "avg", "mulsum"};
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i][3], ops[i / 3]) << r.out;
    EXPECT_EQ(rows[i][8], "0") << r.out;
    EXPECT_EQ(rows[i][12], "0") << r.out;
  }

  r = RunProgram(dir_, {Bin("reduce_scatter_perf"), "-t", "3", "-b", "1K", "-e", "1K", "-d", "all", "-n", "2"});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_EQ(Rows(r.out).size(), 12u) << r.out;  // every type
  EXPECT_NE(r.out.find("f8e5m2"), std::string::npos);
}

// Every nccl-tests binary name runs its collective; rooted ones print the root.
TEST_F(PerfRun, EveryBinaryName) {
  const std::pair<const char*, const char*> names[] = {
      {"all_reduce_perf", "sum"},     {"all_gather_perf", "none"}, {"broadcast_perf", "none"}, {"reduce_perf", "sum"},
      {"reduce_scatter_perf", "sum"}, {"alltoall_perf", "none"},   {"sendrecv_perf", "none"},  {"gather_perf", "none"},
      {"scatter_perf", "none"},       {"hypercube_perf", "none"},
  };
  for (const auto& [name, redop] : names) {
    SCOPED_TRACE(name);
    const Result r = RunProgram(dir_, {Bin(name), "-t", "4", "-b", "1K", "-e", "16K", "-f", "4", "-n", "3"});
    // nccl-tests does not check in-place sendrecv: send and receive share the buffer.
    ExpectGoodTable(r, 3, "float", redop, std::string(name) != "sendrecv_perf");
    EXPECT_NE(r.out.find(std::string("# Collective test starting: ") + name), std::string::npos);
  }
}

// -r -1 (all) runs every root in turn.
TEST_F(PerfRun, EveryRoot) {
  const Result r = RunProgram(dir_, {Bin("broadcast_perf"), "-t", "3", "-b", "4K", "-e", "4K", "-r", "all", "-n", "2"});
  ExpectGoodTable(r, 3, "float", "none");
  const auto rows = Rows(r.out);
  ASSERT_EQ(rows.size(), 3u);
  for (size_t i = 0; i < rows.size(); ++i) EXPECT_EQ(rows[i][4], std::to_string(i));
}

// Blocking modes, aggregation, cycles, per-iteration columns, timestamps and JSON.
TEST_F(PerfRun, TimingFlags) {
  ExpectGoodTable(RunProgram(dir_, {Bin("all_reduce_perf"), "-t", "2", "-b", "1K", "-e", "1K", "-z", "1", "-n", "4"}),
                  1, "float", "sum");
  ExpectGoodTable(RunProgram(dir_, {Bin("all_reduce_perf"), "-t", "2", "-b", "1K", "-e", "1K", "-z", "3", "-m", "4",
                                    "-n", "4", "-a", "0", "-N", "2"}),
                  2, "float", "sum");

  const std::string json = dir_ + "/r.json";
  const Result r = RunProgram(dir_, {Bin("all_gather_perf"), "-t", "2", "-b", "1K", "-e", "2K", "-f", "2", "-I", "1",
                                     "-S", "1", "-C", "1", "-M", "1", "-J", json});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("i_cv%"), std::string::npos);
  EXPECT_NE(r.out.find("cputime"), std::string::npos);
  EXPECT_NE(r.out.find("# Host memory usage"), std::string::npos);
  const auto rows = Rows(r.out);
  ASSERT_EQ(rows.size(), 2u) << r.out;
  EXPECT_EQ(rows[0].size(), 13u + 8u + 2u);  // 4 per-iteration columns per half, date and time
  const std::string doc = Slurp(json);
  EXPECT_EQ(doc.rfind("{\"version\":3,", 0), 0u) << doc;
  EXPECT_NE(doc.find("\"results\":[{\"size\":1024,"), std::string::npos) << doc;
  EXPECT_NE(doc.find("\"out_of_place_per_iter\":"), std::string::npos);
  EXPECT_NE(doc.find("\"out_of_bounds\":{\"count\":0,\"okay\":\"true\"}"), std::string::npos) << doc;
}

// Processes meet through --id-file; each holds -t ranks.
TEST_F(PerfRun, MultiProcess) {
  const std::string id = dir_ + "/perf.id";
  // Both processes run the same command line but for --rank.
  const auto args = [&](const char* rank) {
    return std::vector<std::string>{Bin("reduce_perf"), "--rank", rank, "--nranks", "2", "--id-file", id,
                                    "-t", "2", "-b", "1K", "-e", "4K", "-f", "4", "-r", "3", "-o", "min", "-n", "3"};
  };
  Result other;
  std::thread peer([&] { other = RunProgram(dir_, args("1")); });
  const Result r = RunProgram(dir_, args("0"));
  peer.join();
  ExpectGoodTable(r, 2, "float", "min");
  EXPECT_EQ(other.status, 0) << other.out << other.err;
  EXPECT_TRUE(Rows(other.out).empty());  // only rank 0's process prints
  for (const auto& row : Rows(r.out)) EXPECT_EQ(row[4], "3");
}

// What cannot be honoured is refused before anything runs.
TEST_F(PerfRun, RefusedCommandLines) {
  Result r = RunProgram(dir_, {CONDUIT_PERF_PATH, "-o", "allreduce"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("-o/--op"), std::string::npos) << r.err;
  r = RunProgram(dir_, {Bin("all_reduce_perf"), "-G", "1"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("CUDA graphs"), std::string::npos) << r.err;
}

}  // namespace
