#include "shim_log.h"

#include <cstdarg>
#include <cstdio>
#include <mutex>

#include "common/log.h"

namespace conduit {
namespace {
std::mutex g_mu;
std::string g_last_error;
}  // namespace

ncclResult_t Fail(const char* call, const Status& status) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_last_error = std::string(call) + ": " + status.message();
  }
  CLOG_WARN("%s failed: %s: %s", call, ResultName(status.code()), status.message().c_str());
  return status.code();
}

ncclResult_t Fail(const char* call, ncclResult_t code, const char* fmt, ...) {
  char text[1024];
  va_list args;
  va_start(args, fmt);
  vsnprintf(text, sizeof(text), fmt, args);
  va_end(args);
  return Fail(call, Status(code, text));
}

const char* LastErrorText() {
  // NCCL hands out a pointer it owns; a per-thread copy keeps ours stable for the caller.
  thread_local std::string copy;
  std::lock_guard<std::mutex> lock(g_mu);
  copy = g_last_error;
  return copy.c_str();
}

}  // namespace conduit
