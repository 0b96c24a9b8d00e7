#include "objects/obj_status.h"

#include <cstdarg>
#include <cstdio>

#include "common/frame.h"

namespace conduit::objects {

StatusCode CanonicalOf(Code code) {
  switch (code) {
    case objproto::kOk: return StatusCode::kOk;
    case objproto::kTimeout: return StatusCode::kDeadlineExceeded;
    case objproto::kNotFound: return StatusCode::kNotFound;
    case objproto::kExists: return StatusCode::kAlreadyExists;
    case objproto::kOutOfMemory: return StatusCode::kResourceExhausted;
    case objproto::kInvalid: return StatusCode::kInvalidArgument;
    case objproto::kLost: return StatusCode::kDataLoss;
    case objproto::kUnavailable: return StatusCode::kUnavailable;
    // Retry means "the shard moved, ask again": ABORTED is the code gRPC gives a call to be
    // retried at a higher level.
    case objproto::kRetry: return StatusCode::kAborted;
    case objproto::kInternal: return StatusCode::kInternal;
    case objproto::kRefused:
    case objproto::kPermissionDenied: return StatusCode::kPermissionDenied;
    case objproto::kOverQuota: return StatusCode::kResourceExhausted;
  }
  return StatusCode::kInternal;
}

Code ObjectCodeOf(const Status& st) {
  const int32_t made_with = st.detail();
  if (made_with > objproto::kOk && made_with <= objproto::kLastCode &&
      CanonicalOf(static_cast<Code>(made_with)) == st.canonical()) {
    return static_cast<Code>(made_with);
  }
  switch (st.canonical()) {
    case StatusCode::kOk: return objproto::kOk;
    case StatusCode::kDeadlineExceeded: return objproto::kTimeout;
    case StatusCode::kNotFound: return objproto::kNotFound;
    case StatusCode::kAlreadyExists: return objproto::kExists;
    case StatusCode::kResourceExhausted: return objproto::kOutOfMemory;
    case StatusCode::kInvalidArgument: return objproto::kInvalid;
    case StatusCode::kDataLoss: return objproto::kLost;
    case StatusCode::kAborted: return objproto::kRetry;
    case StatusCode::kPermissionDenied: return objproto::kPermissionDenied;
    case StatusCode::kUnauthenticated: return objproto::kRefused;
    // A lost connection (end of stream, a system error) or a peer gone.
    case StatusCode::kUnavailable:
    case StatusCode::kOutOfRange:
    case StatusCode::kUnknown:
    case StatusCode::kCancelled: return objproto::kUnavailable;
    default: return objproto::kInternal;
  }
}

Status ObjectStatus(Code code, std::string message) {
  if (code == objproto::kOk) return Status::Ok();
  return Status(CanonicalOf(code), code, std::move(message));
}

Status Err(Code code, const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  return ObjectStatus(code, buf);
}

Status FromConduit(const Status& st, Code code) {
  return st.ok() ? Status::Ok() : ObjectStatus(code, st.message());
}

const char* CodeName(Code code) {
  switch (code) {
    case objproto::kOk: return "ok";
    case objproto::kTimeout: return "timeout";
    case objproto::kNotFound: return "not found";
    case objproto::kExists: return "exists";
    case objproto::kOutOfMemory: return "out of memory";
    case objproto::kInvalid: return "invalid";
    case objproto::kLost: return "lost";
    case objproto::kUnavailable: return "unavailable";
    case objproto::kRetry: return "retry";
    case objproto::kInternal: return "internal";
    case objproto::kRefused: return "refused";
    case objproto::kPermissionDenied: return "permission denied";
    case objproto::kOverQuota: return "over quota";
  }
  return "unknown";
}

objproto::Status ToObjectWire(const Status& st) {
  objproto::Status w{};
  w.code = ObjectCodeOf(st);
  CopyCString(w.message, st.message().c_str());
  return w;
}

Status FromObjectWire(const objproto::Status& wire) {
  if (wire.code < objproto::kOk || wire.code > objproto::kLastCode) {
    return Err(objproto::kInternal, "peer sent unknown object status code %d", wire.code);
  }
  return ObjectStatus(static_cast<Code>(wire.code), FromCString(wire.message));
}

}  // namespace conduit::objects
