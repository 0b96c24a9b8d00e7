#include "subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace conduit::it {

Subprocess::Subprocess(std::vector<std::string> argv, std::vector<std::string> env, std::string output_path)
    : argv_(std::move(argv)), output_path_(std::move(output_path)) {
  // Build everything before fork: only async-signal-safe calls are allowed in the child.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    bool overridden = false;
    for (const std::string& o : env)
      overridden = overridden || kv.substr(0, kv.find('=') + 1) == o.substr(0, o.find('=') + 1);
    if (!overridden) env_strings.push_back(kv);
  }
  env_strings.insert(env_strings.end(), env.begin(), env.end());
  std::vector<char*> cargv, cenv;
  for (std::string& a : argv_) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  for (std::string& e : env_strings) cenv.push_back(e.data());
  cenv.push_back(nullptr);

  int out = ::open(output_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out < 0) return;
  pid_ = ::fork();
  if (pid_ == 0) {
    ::dup2(out, STDOUT_FILENO);
    ::dup2(out, STDERR_FILENO);
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
    ::execve(cargv[0], cargv.data(), cenv.data());
    const char msg[] = "subprocess: execve failed\n";
    ssize_t ignored = ::write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)ignored;
    ::_exit(127);
  }
  ::close(out);
  if (pid_ < 0) pid_ = -1;
}

Subprocess::~Subprocess() {
  if (started() && !done_) {
    Kill(SIGKILL);
    Wait(std::chrono::seconds(10));
  }
}

bool Subprocess::Poll() {
  if (done_ || !started()) return done_;
  int status = 0;
  pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r != pid_) return false;
  done_ = true;
  exit_time_ = std::chrono::steady_clock::now();
  exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return true;
}

bool Subprocess::Wait(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!Poll()) {
    if (!started()) return false;
    if (std::chrono::steady_clock::now() >= deadline) {
      timed_out_ = true;
      Kill(SIGKILL);
      while (!Poll()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

void Subprocess::Kill(int sig) {
  if (started() && !done_) ::kill(pid_, sig);
}

std::string Subprocess::Output() const { return ReadFile(output_path_); }

std::string Subprocess::CommandLine() const {
  std::string s;
  for (const std::string& a : argv_) s += (s.empty() ? "" : " ") + a;
  return s;
}

int RunCommand(const std::vector<std::string>& argv, std::string* output, std::chrono::milliseconds timeout) {
  char path[] = "/tmp/conduit-it-cmd-XXXXXX";
  int fd = ::mkstemp(path);
  if (fd < 0) return -1;
  ::close(fd);
  int code;
  {
    Subprocess p(argv, {}, path);
    p.Wait(timeout);
    code = p.exit_code();
    if (output != nullptr) *output = p.Output();
  }
  ::unlink(path);
  return code;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool ProcessEnded(pid_t pid) {
  const std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  const size_t paren = stat.rfind(')');
  return paren == std::string::npos || paren + 2 >= stat.size() || stat[paren + 2] == 'Z';
}

}  // namespace conduit::it
