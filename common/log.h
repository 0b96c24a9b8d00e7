// Minimal leveled logging to stderr, one line per call, safe from many threads.
#ifndef CONDUIT_DAEMON_COMMON_LOG_H_
#define CONDUIT_DAEMON_COMMON_LOG_H_

#include <cstddef>

namespace conduit {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

void SetLogLevel(LogLevel level);
// Parses "debug", "info", "warn" or "error"; returns false for anything else.
bool ParseLogLevel(const char* text, LogLevel* level);
// Tag printed in front of every line ("conduitd", "conduit").
void SetLogTag(const char* tag);
bool LogEnabled(LogLevel level);
void Logf(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
// A line written whatever the level, labelled `level` (one the user asked for by other
// means, as NCCL_DEBUG=VERSION asks for the version line).
void LogfAlways(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// How each line starts, instead of "tag: L hh:mm:ss.mmm [pid] " (the NCCL shim writes
// NCCL's form under NCCL_DEBUG): writes at most `cap` bytes of prefix, returns its length.
using LogPrefix = int (*)(char* buf, size_t cap, LogLevel level);
void SetLogPrefix(LogPrefix prefix);
// Where lines go instead of stderr (NCCL_DEBUG_FILE); the caller keeps the descriptor open.
void SetLogFd(int fd);

}  // namespace conduit

#define CLOG_DEBUG(...) \
  do { if (::conduit::LogEnabled(::conduit::LogLevel::kDebug)) ::conduit::Logf(::conduit::LogLevel::kDebug, __VA_ARGS__); } while (0)
#define CLOG_INFO(...) ::conduit::Logf(::conduit::LogLevel::kInfo, __VA_ARGS__)
#define CLOG_WARN(...) ::conduit::Logf(::conduit::LogLevel::kWarn, __VA_ARGS__)
#define CLOG_ERROR(...) ::conduit::Logf(::conduit::LogLevel::kError, __VA_ARGS__)

#endif  // CONDUIT_DAEMON_COMMON_LOG_H_
