// Last-error text (ncclGetLastError) and the shim's log lines.
#ifndef CONDUIT_LIBMCCS_NCCL_SHIM_LOG_H_
#define CONDUIT_LIBMCCS_NCCL_SHIM_LOG_H_

#include <string>

#include "common/status.h"
#include "nccl.h"

namespace conduit {

// Records a failed call's status for ncclGetLastError, logs one actionable line naming
// the call, and returns the code for the program.
ncclResult_t Fail(const char* call, const Status& status);
ncclResult_t Fail(const char* call, ncclResult_t code, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
const char* LastErrorText();

}  // namespace conduit

#endif  // CONDUIT_LIBMCCS_NCCL_SHIM_LOG_H_
