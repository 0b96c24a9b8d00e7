// Who may do what with an object, at the program edge of each daemon.
//
// An object is owned by the uid and primary gid of the program that created it (Put, or
// the Reduce whose target it is), as the kernel reported the program's connection
// (SO_PEERCRED); the creator chooses who else may read it (owner only, its group, everyone).
// The owner travels with the object (directory entries, Publish, Acquire replies, location
// events, local copies), so each daemon checks its own programs' requests:
//  * read (Get, Wait, use as a Reduce source): the owner; members of the owner's group
//    (primary or supplementary, SO_PEERGROUPS) when it grants group read; everyone when it
//    grants world read; operators always;
//  * delete: the owner uid or an operator.
// Operators are root, the daemon's effective uid and the uids the operator listed
// (conduitd --admin-uid). Nothing a program sends decides who it is.
#ifndef CONDUIT_DAEMON_OBJECTS_ACCESS_H_
#define CONDUIT_DAEMON_OBJECTS_ACCESS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "objects/obj_status.h"
#include "protocol/object_protocol.h"

namespace conduit::objects {

// A program connection's identity, as the kernel reports it.
struct Caller {
  int pid = -1;
  uint32_t uid = 0;
  uint32_t gid = 0;
  std::vector<uint32_t> groups;  // supplementary groups
  bool is_operator = false;
};

// Root, the daemon's effective uid, or one of `operator_uids`.
bool IsOperatorUid(uint32_t uid, const std::vector<int>& operator_uids);
bool InGroup(const Caller& caller, uint32_t gid);
bool MayRead(const Caller& caller, const objproto::Owner& owner);
bool MayDelete(const Caller& caller, const objproto::Owner& owner);

// kPermissionDenied naming the object, the caller's uid and the owner.
Status ReadDenied(const std::string& id, const Caller& caller, const objproto::Owner& owner);
Status DeleteDenied(const std::string& id, uint32_t caller_uid, const objproto::Owner& owner);

// The owner of an object `caller` creates with `requested` access (kAccessDefault: the
// daemon's `default_access`); kInvalid for an unknown access value.
Status OwnerFor(const Caller& caller, uint32_t requested, uint32_t default_access, objproto::Owner* out);

// "owner", "group", "world" (and "default" for kAccessDefault).
const char* AccessName(uint32_t access);
bool ParseAccess(const std::string& name, uint32_t* access);

}  // namespace conduit::objects

#endif  // CONDUIT_DAEMON_OBJECTS_ACCESS_H_
