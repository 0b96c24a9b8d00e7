#include "objects/access.h"

#include <unistd.h>

#include <algorithm>

#include "objects/messages.h"

namespace conduit::objects {

bool IsOperatorUid(uint32_t uid, const std::vector<int>& operator_uids) {
  if (uid == 0 || uid == static_cast<uint32_t>(geteuid())) return true;
  return std::any_of(operator_uids.begin(), operator_uids.end(),
                     [uid](int u) { return u >= 0 && static_cast<uint32_t>(u) == uid; });
}

bool InGroup(const Caller& caller, uint32_t gid) {
  return caller.gid == gid || std::find(caller.groups.begin(), caller.groups.end(), gid) != caller.groups.end();
}

bool MayRead(const Caller& caller, const objproto::Owner& owner) {
  if (caller.is_operator) return true;
  switch (owner.access) {
    case objproto::kAccessWorld: return true;
    case objproto::kAccessGroup: return caller.uid == owner.uid || InGroup(caller, owner.gid);
    case objproto::kAccessOwner: return caller.uid == owner.uid;
    default: return false;  // unknown owner: only operators
  }
}

bool MayDelete(const Caller& caller, const objproto::Owner& owner) {
  return caller.is_operator || (owner.access != objproto::kAccessDefault && caller.uid == owner.uid);
}

Status ReadDenied(const std::string& id, const Caller& caller, const objproto::Owner& owner) {
  return Err(objproto::kPermissionDenied,
             "uid %u may not read object %s: it belongs to uid %u (gid %u) and is readable by %s", caller.uid,
             Printable(id).c_str(), owner.uid, owner.gid,
             owner.access == objproto::kAccessGroup   ? "its owner and group"
             : owner.access == objproto::kAccessOwner ? "its owner only"
                                                      : "nobody yet");
}

Status DeleteDenied(const std::string& id, uint32_t caller_uid, const objproto::Owner& owner) {
  return Err(objproto::kPermissionDenied,
             "uid %u may not delete object %s: it belongs to uid %u (only its owner or an operator may delete it)",
             caller_uid, Printable(id).c_str(), owner.uid);
}

Status OwnerFor(const Caller& caller, uint32_t requested, uint32_t default_access, objproto::Owner* out) {
  if (requested > objproto::kAccessWorld) {
    return Err(objproto::kInvalid, "unknown object access %u (0 default, 1 owner, 2 group, 3 world)", requested);
  }
  *out = objproto::Owner{};
  out->uid = caller.uid;
  out->gid = caller.gid;
  out->access = requested == objproto::kAccessDefault ? default_access : requested;
  return Status::Ok();
}

const char* AccessName(uint32_t access) {
  switch (access) {
    case objproto::kAccessDefault: return "default";
    case objproto::kAccessOwner: return "owner";
    case objproto::kAccessGroup: return "group";
    case objproto::kAccessWorld: return "world";
  }
  return "unknown";
}

bool ParseAccess(const std::string& name, uint32_t* access) {
  for (uint32_t a = objproto::kAccessOwner; a <= objproto::kAccessWorld; ++a) {
    if (name == AccessName(a)) {
      *access = a;
      return true;
    }
  }
  return false;
}

}  // namespace conduit::objects
