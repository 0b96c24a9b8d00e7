// ObjStatus: a result of the object service, with the object protocol's codes (which
// libhoplite hands to programs unchanged) and a message a human can act on.
#ifndef CONDUIT_DAEMON_OBJECTS_OBJ_STATUS_H_
#define CONDUIT_DAEMON_OBJECTS_OBJ_STATUS_H_

#include <string>

#include "common/status.h"
#include "protocol/object_protocol.h"

namespace conduit::objects {

using objproto::Code;

class ObjStatus {
 public:
  ObjStatus() = default;
  ObjStatus(Code code, std::string message) : code_(code), message_(std::move(message)) {}
  static ObjStatus Ok() { return ObjStatus(); }

  bool ok() const { return code_ == objproto::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  Code code_ = objproto::kOk;
  std::string message_;
};

ObjStatus Err(Code code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
// A failure of the shared I/O helpers, under `code`.
ObjStatus FromConduit(const Status& st, Code code);
const char* CodeName(Code code);

objproto::Status ToWire(const ObjStatus& st);
ObjStatus FromWire(const objproto::Status& wire);

}  // namespace conduit::objects

#define OBJ_RETURN_IF_ERROR(expr)                 \
  do {                                            \
    ::conduit::objects::ObjStatus _ost = (expr);  \
    if (!_ost.ok()) return _ost;                  \
  } while (0)

#endif  // CONDUIT_DAEMON_OBJECTS_OBJ_STATUS_H_
