#include "server/program_policy.h"

#include <algorithm>

namespace conduit {

Status CheckAdmission(const ProgramPolicy& policy, const std::string& exe) {
  const auto& deny = policy.deny_exe;
  if (std::find(deny.begin(), deny.end(), exe) != deny.end()) {
    return InvalidUsage("program '%s' is refused by this daemon's policy (--deny-exe)", exe.c_str());
  }
  return Status::Ok();
}

}  // namespace conduit
