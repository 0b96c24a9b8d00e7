// The object service's results in the daemon's one error model (common/status.h): a Status
// with a canonical code, made here from the object protocol's code, which the status keeps
// as its detail() so that libhoplite is handed exactly the code it was made with (two object
// codes share a canonical code: kOutOfMemory and kOverQuota are both kResourceExhausted,
// kRefused and kPermissionDenied both kPermissionDenied). Code inside decides on canonical
// codes through common/status.h's predicates; the object codes appear only where a status
// is made and at the object edge (ToWire, FromWire).
#ifndef CONDUIT_DAEMON_OBJECTS_OBJ_STATUS_H_
#define CONDUIT_DAEMON_OBJECTS_OBJ_STATUS_H_

#include <string>

#include "common/status.h"
#include "protocol/object_protocol.h"

namespace conduit::objects {

using objproto::Code;

// The canonical code an object code stands for.
StatusCode CanonicalOf(Code code);
// The object code a status reports at the object edge: the one it was made with, else its
// canonical code's nearest (a shared helper's I/O failure is kUnavailable, say).
Code ObjectCodeOf(const Status& st);

Status ObjectStatus(Code code, std::string message);
Status Err(Code code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
// A failure of the shared I/O helpers, under `code`.
Status FromConduit(const Status& st, Code code);
const char* CodeName(Code code);

objproto::Status ToObjectWire(const Status& st);
Status FromObjectWire(const objproto::Status& wire);

}  // namespace conduit::objects

#endif  // CONDUIT_DAEMON_OBJECTS_OBJ_STATUS_H_
