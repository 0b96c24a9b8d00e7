// Child processes for the integration harness: fork/exec with stdout+stderr into a file,
// bounded waits (a test must never hang), and SIGKILL. Output goes to files rather than
// pipes so a chatty child can never block on a full pipe while we wait for it.
#ifndef CONDUIT_TESTS_INTEGRATION_SUBPROCESS_H_
#define CONDUIT_TESTS_INTEGRATION_SUBPROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace conduit::it {

class Subprocess {
 public:
  // Starts argv[0] (a path) with the current environment plus `env` ("K=V") entries.
  Subprocess(std::vector<std::string> argv, std::vector<std::string> env, std::string output_path);
  ~Subprocess();  // kills the child if it still runs
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }
  bool started() const { return pid_ > 0; }
  // True once the child exited (reaps it); polls without blocking.
  bool Poll();
  // Waits up to `timeout`; on timeout kills the child, waits for it and returns false.
  bool Wait(std::chrono::milliseconds timeout);
  void Kill(int sig);
  bool exited() const { return done_; }
  // Exit code, or 128 + signal for a signal death, or -1 while running.
  int exit_code() const { return exit_code_; }
  bool timed_out() const { return timed_out_; }
  std::chrono::steady_clock::time_point exit_time() const { return exit_time_; }
  std::string Output() const;  // what the child has written so far
  const std::string& output_path() const { return output_path_; }
  std::string CommandLine() const;

 private:
  std::vector<std::string> argv_;
  std::string output_path_;
  pid_t pid_ = -1;
  bool done_ = false;
  bool timed_out_ = false;
  int exit_code_ = -1;
  std::chrono::steady_clock::time_point exit_time_{};
};

// Runs a command to completion (bounded) and returns its exit code; output into *output.
int RunCommand(const std::vector<std::string>& argv, std::string* output,
               std::chrono::milliseconds timeout = std::chrono::seconds(60));

std::string ReadFile(const std::string& path);

// Whether a process, ours or not, has ended: gone from /proc, or a zombie (state Z), which is
// what an orphan that nobody reaps stays as.
bool ProcessEnded(pid_t pid);

}  // namespace conduit::it

#endif  // CONDUIT_TESTS_INTEGRATION_SUBPROCESS_H_
