// Status: an ncclResult_t code plus a message a human can act on.
//
// The daemon speaks NCCL's error vocabulary end to end so the shim can hand the code to
// the program unchanged and the text to ncclGetLastError.
#ifndef CONDUIT_DAEMON_COMMON_STATUS_H_
#define CONDUIT_DAEMON_COMMON_STATUS_H_

#include <string>
#include <utility>

#include "nccl.h"

namespace conduit {

class Status {
 public:
  Status() = default;
  Status(ncclResult_t code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == ncclSuccess; }
  ncclResult_t code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  ncclResult_t code_ = ncclSuccess;
  std::string message_;
};

// printf-style constructors for the common codes.
Status SystemError(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
Status RemoteError(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
Status InvalidArgument(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
Status InvalidUsage(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
Status InternalError(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

const char* ResultName(ncclResult_t code);

}  // namespace conduit

#define CONDUIT_RETURN_IF_ERROR(expr)       \
  do {                                      \
    ::conduit::Status _st = (expr);         \
    if (!_st.ok()) return _st;              \
  } while (0)

#endif  // CONDUIT_DAEMON_COMMON_STATUS_H_
