#include "common/status.h"

#include <cstdarg>
#include <cstdio>

namespace conduit {
namespace {
Status Make(ncclResult_t code, const char* fmt, va_list args) {
  char text[1024];
  vsnprintf(text, sizeof(text), fmt, args);
  return Status(code, text);
}
}  // namespace

#define CONDUIT_DEFINE_STATUS_MAKER(Name, code) \
  Status Name(const char* fmt, ...) {           \
    va_list args;                               \
    va_start(args, fmt);                        \
    Status st = Make(code, fmt, args);          \
    va_end(args);                               \
    return st;                                  \
  }
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
