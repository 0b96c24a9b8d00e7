#include "server/program_policy.h"

#include <algorithm>

namespace conduit {

Status ProgramPolicy::CheckAdmission(const std::string& exe) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!deny_exe_.empty() && exe == kUnknownExe) {
    return InvalidUsage("conduitd cannot tell which executable this program runs (its pid is outside conduitd's pid "
                        "namespace, or its /proc/PID/exe is unreadable), so cannot apply its deny_exe list");
  }
  if (std::find(deny_exe_.begin(), deny_exe_.end(), exe) != deny_exe_.end()) {
    return InvalidUsage("program '%s' is refused by this daemon's admission policy (deny_exe)", exe.c_str());
  }
  return Status::Ok();
}

std::vector<std::string> ProgramPolicy::denied() const {
  std::lock_guard<std::mutex> lock(mu_);
  return deny_exe_;
}

void ProgramPolicy::set_denied(std::vector<std::string> deny_exe, bool from_admin_api) {
  std::lock_guard<std::mutex> lock(mu_);
  deny_exe_ = std::move(deny_exe);
  denied_from_api_ = from_admin_api;
}

bool ProgramPolicy::denied_from_api() const {
  std::lock_guard<std::mutex> lock(mu_);
  return denied_from_api_;
}

}  // namespace conduit
