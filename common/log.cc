#include "common/log.h"

#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <ctime>

namespace conduit {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
const char* g_tag = "conduit";
const char kLetters[] = "DIWE";
std::atomic<LogPrefix> g_prefix{nullptr};
std::atomic<int> g_fd{STDERR_FILENO};

// "tag: L hh:mm:ss.mmm [pid] ": greppable by tag, sortable by time.
int DefaultPrefix(char* buf, size_t cap, LogLevel level) {
  timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  tm parts;
  localtime_r(&now.tv_sec, &parts);
  return snprintf(buf, cap, "%s: %c %02d:%02d:%02d.%03ld [%d] ", g_tag, kLetters[static_cast<int>(level)],
                  parts.tm_hour, parts.tm_min, parts.tm_sec, now.tv_nsec / 1000000, getpid());
}

void Write(LogLevel level, const char* fmt, va_list args) {
  char line[2048];
  const LogPrefix prefix = g_prefix.load();
  int n = (prefix != nullptr ? prefix : DefaultPrefix)(line, sizeof(line) / 2, level);
  if (n < 0) n = 0;
  if (n > static_cast<int>(sizeof(line) / 2) - 1) n = sizeof(line) / 2 - 1;
  n += vsnprintf(line + n, sizeof(line) - n - 1, fmt, args);
  if (n > static_cast<int>(sizeof(line)) - 2) n = sizeof(line) - 2;
  line[n++] = '\n';
  // One write per line keeps lines from different threads whole.
  ssize_t ignored = write(g_fd.load(), line, n);
  (void)ignored;
}
}  // namespace

void SetLogPrefix(LogPrefix prefix) { g_prefix.store(prefix); }
void SetLogFd(int fd) { g_fd.store(fd); }

void SetLogLevel(LogLevel level) { g_level = static_cast<int>(level); }
void SetLogTag(const char* tag) { g_tag = tag; }
bool LogEnabled(LogLevel level) { return static_cast<int>(level) >= g_level.load(); }

bool ParseLogLevel(const char* text, LogLevel* level) {
  static const char* const kNames[] = {"debug", "info", "warn", "error"};
  for (int i = 0; i < 4; ++i) {
    if (strcmp(text, kNames[i]) == 0) {
      *level = static_cast<LogLevel>(i);
      return true;
    }
  }
  return false;
}

void Logf(LogLevel level, const char* fmt, ...) {
  if (!LogEnabled(level)) return;
  va_list args;
  va_start(args, fmt);
  Write(level, fmt, args);
  va_end(args);
}

void LogfAlways(LogLevel level, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  Write(level, fmt, args);
  va_end(args);
}

}  // namespace conduit
