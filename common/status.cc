#include "common/status.h"

#include <cstdarg>
#include <cstdio>

namespace conduit {
namespace {
template <typename Code>
Status Make(Code code, const char* fmt, va_list args) {
  char text[1024];
  vsnprintf(text, sizeof(text), fmt, args);
  return Status(code, text);
}
}  // namespace

ncclResult_t NcclResultOf(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return ncclSuccess;
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kAlreadyExists: return ncclInvalidArgument;
    case StatusCode::kFailedPrecondition:
    case StatusCode::kPermissionDenied:
    case StatusCode::kUnauthenticated:
    case StatusCode::kUnimplemented: return ncclInvalidUsage;
    case StatusCode::kUnavailable:
    case StatusCode::kAborted:
    case StatusCode::kDeadlineExceeded:
    case StatusCode::kCancelled:
    case StatusCode::kDataLoss: return ncclRemoteError;
    case StatusCode::kInternal: return ncclInternalError;
    case StatusCode::kUnknown:
    case StatusCode::kResourceExhausted:
    case StatusCode::kOutOfRange: return ncclSystemError;  // a lost connection, as before
  }
  return ncclSystemError;
}

StatusCode CanonicalOf(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return StatusCode::kOk;
    case ncclInvalidArgument: return StatusCode::kInvalidArgument;
    case ncclInvalidUsage: return StatusCode::kFailedPrecondition;
    case ncclRemoteError: return StatusCode::kUnavailable;
    case ncclInternalError: return StatusCode::kInternal;
    case ncclUnhandledCudaError: return StatusCode::kInternal;
    default: return StatusCode::kUnknown;  // ncclSystemError, ncclInProgress, anything else
  }
}

const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kCancelled: return "CANCELLED";
    case StatusCode::kUnknown: return "UNKNOWN";
    case StatusCode::kInvalidArgument: return "INVALID_ARGUMENT";
    case StatusCode::kDeadlineExceeded: return "DEADLINE_EXCEEDED";
    case StatusCode::kNotFound: return "NOT_FOUND";
    case StatusCode::kAlreadyExists: return "ALREADY_EXISTS";
    case StatusCode::kPermissionDenied: return "PERMISSION_DENIED";
    case StatusCode::kResourceExhausted: return "RESOURCE_EXHAUSTED";
    case StatusCode::kFailedPrecondition: return "FAILED_PRECONDITION";
    case StatusCode::kAborted: return "ABORTED";
    case StatusCode::kOutOfRange: return "OUT_OF_RANGE";
    case StatusCode::kUnimplemented: return "UNIMPLEMENTED";
    case StatusCode::kInternal: return "INTERNAL";
    case StatusCode::kUnavailable: return "UNAVAILABLE";
    case StatusCode::kDataLoss: return "DATA_LOSS";
    case StatusCode::kUnauthenticated: return "UNAUTHENTICATED";
  }
  return "UNKNOWN";
}

#define CONDUIT_DEFINE_STATUS_MAKER(Name, code) \
  Status Name(const char* fmt, ...) {           \
    va_list args;                               \
    va_start(args, fmt);                        \
    Status st = Make(code, fmt, args);          \
    va_end(args);                               \
    return st;                                  \
  }
CONDUIT_DEFINE_STATUS_MAKER(NotFound, StatusCode::kNotFound)
CONDUIT_DEFINE_STATUS_MAKER(EndOfStream, StatusCode::kOutOfRange)
CONDUIT_DEFINE_STATUS_MAKER(SystemError, ncclSystemError)
CONDUIT_DEFINE_STATUS_MAKER(RemoteError, ncclRemoteError)
CONDUIT_DEFINE_STATUS_MAKER(InvalidArgument, ncclInvalidArgument)
CONDUIT_DEFINE_STATUS_MAKER(InvalidUsage, ncclInvalidUsage)
CONDUIT_DEFINE_STATUS_MAKER(InternalError, ncclInternalError)
#undef CONDUIT_DEFINE_STATUS_MAKER

const char* ResultName(ncclResult_t code) {
  switch (code) {
    case ncclSuccess: return "ncclSuccess";
    case ncclUnhandledCudaError: return "ncclUnhandledCudaError";
    case ncclSystemError: return "ncclSystemError";
    case ncclInternalError: return "ncclInternalError";
    case ncclInvalidArgument: return "ncclInvalidArgument";
    case ncclInvalidUsage: return "ncclInvalidUsage";
    case ncclRemoteError: return "ncclRemoteError";
    case ncclInProgress: return "ncclInProgress";
    default: return "ncclUnknownResult";
  }
}

}  // namespace conduit
