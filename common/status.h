// Status: the one error model of the daemon and the client libraries: a canonical code
// (gRPC's and Abseil's codes, same names and numbers) plus a message a human can act on.
//
// Code decides on codes, never on message text: predicates below name the conditions code
// branches on (a peer that hung up between messages, a named thing that does not exist).
// Each edge maps the canonical code once: NcclResultOf for the NCCL shim (and
// ncclGetLastError gets the text), GrpcStatusOf for gRPC programs, the admin API's
// HttpStatusOf (admin/admin_api.h). A status made from an ncclResult_t (the NCCL-flavoured
// makers below, or one read off the wire) keeps that exact result for the NCCL edge.
#ifndef CONDUIT_DAEMON_COMMON_STATUS_H_
#define CONDUIT_DAEMON_COMMON_STATUS_H_

#include <cstdint>
#include <string>
#include <utility>

#include "nccl.h"

namespace conduit {

enum class StatusCode : int32_t {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  // Here: a stream ended where a message could have begun (the other end hung up between
  // messages, a normal end for a connection), never a range error.
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
  kUnauthenticated = 16,
};

// The NCCL result a canonical code reports at the NCCL edge, and the code an NCCL result
// (from the wire, or made by the NCCL-flavoured makers) stands for.
ncclResult_t NcclResultOf(StatusCode code);
StatusCode CanonicalOf(ncclResult_t result);
// gRPC's status code for a canonical code: the same number.
constexpr int32_t GrpcStatusOf(StatusCode code) { return static_cast<int32_t>(code); }
const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode canonical, std::string message)
      : canonical_(canonical), code_(NcclResultOf(canonical)), message_(std::move(message)) {}
  Status(ncclResult_t code, std::string message)
      : canonical_(CanonicalOf(code)), code_(code), message_(std::move(message)) {}
  // With an edge protocol's own finer code under the canonical one (`detail`), kept so that
  // edge reports it exactly where two of its codes share a canonical code (the object
  // protocol's out-of-memory and over-quota are both kResourceExhausted:
  // objects/obj_status.h). Code inside decides on canonical(), never on detail().
  Status(StatusCode canonical, int32_t detail, std::string message)
      : canonical_(canonical), code_(NcclResultOf(canonical)), detail_(detail), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return canonical_ == StatusCode::kOk; }
  StatusCode canonical() const { return canonical_; }
  // The result the NCCL edge reports (ncclGetLastError gets message()).
  ncclResult_t code() const { return code_; }
  // The edge's finer code it was made with; 0 when none.
  int32_t detail() const { return detail_; }
  const std::string& message() const { return message_; }

 private:
  StatusCode canonical_ = StatusCode::kOk;
  ncclResult_t code_ = ncclSuccess;
  int32_t detail_ = 0;
  std::string message_;
};

inline bool IsNotFound(const Status& st) { return st.canonical() == StatusCode::kNotFound; }
inline bool IsDeadlineExceeded(const Status& st) { return st.canonical() == StatusCode::kDeadlineExceeded; }
inline bool IsUnavailable(const Status& st) { return st.canonical() == StatusCode::kUnavailable; }
inline bool IsAborted(const Status& st) { return st.canonical() == StatusCode::kAborted; }
inline bool IsDataLoss(const Status& st) { return st.canonical() == StatusCode::kDataLoss; }
inline bool IsResourceExhausted(const Status& st) { return st.canonical() == StatusCode::kResourceExhausted; }
inline bool IsPermissionDenied(const Status& st) { return st.canonical() == StatusCode::kPermissionDenied; }
// The other end closed the connection before the first byte of a message: how a program
// or a probe that is done hangs up, not an error worth a warning.
inline bool IsEndOfStream(const Status& st) { return st.canonical() == StatusCode::kOutOfRange; }

// printf-style makers. The NCCL-flavoured ones (canonical code in brackets) carry the
// results the daemon has always reported: SystemError (kUnknown), RemoteError (kUnavailable),
// InvalidArgument (kInvalidArgument), InvalidUsage (kFailedPrecondition), InternalError
// (kInternal).
Status NotFound(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
Status EndOfStream(const char* fmt, ...) __attribute__((format(printf, 1, 2)));  // ncclSystemError at the edge
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
