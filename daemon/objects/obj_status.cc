#include "objects/obj_status.h"

#include <cstdarg>
#include <cstdio>

#include "common/frame.h"

namespace conduit::objects {

ObjStatus Err(Code code, const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  return ObjStatus(code, buf);
}

ObjStatus FromConduit(const Status& st, Code code) {
  return st.ok() ? ObjStatus::Ok() : ObjStatus(code, st.message());
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

objproto::Status ToWire(const ObjStatus& st) {
  objproto::Status w{};
  w.code = st.code();
  CopyCString(w.message, st.message().c_str());
  return w;
}

ObjStatus FromWire(const objproto::Status& wire) {
  if (wire.code < objproto::kOk || wire.code > objproto::kLastCode) {
    return Err(objproto::kInternal, "peer sent unknown object status code %d", wire.code);
  }
  return ObjStatus(static_cast<Code>(wire.code), FromCString(wire.message));
}

}  // namespace conduit::objects
