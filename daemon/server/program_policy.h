// What this daemon allows the programs that connect to it, whatever service they use:
// admission by program name (a refused program falls back to its native library) and a
// cap on the shared memory one connection may map. The deny list can change at run time
// (admin API), so reads and writes are locked.
#ifndef CONDUIT_DAEMON_SERVER_PROGRAM_POLICY_H_
#define CONDUIT_DAEMON_SERVER_PROGRAM_POLICY_H_

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"

namespace conduit {

// The executable of a program the kernel does not name (ProgramExe in server/service_router.h).
inline constexpr char kUnknownExe[] = "?";

class ProgramPolicy {
 public:
  ProgramPolicy() = default;
  ProgramPolicy(std::vector<std::string> deny_exe, uint64_t max_shm_bytes)
      : deny_exe_(std::move(deny_exe)), max_shm_bytes_(max_shm_bytes) {}

  // Ok, or why the program named `exe` (its basename) is refused. With a deny list, a
  // program whose executable is unknown (kUnknownExe) is refused: the list cannot be applied.
  Status CheckAdmission(const std::string& exe) const;
  std::vector<std::string> denied() const;
  // from_admin_api: set by the operator at run time (a live upgrade carries it over), not
  // by the configuration.
  void set_denied(std::vector<std::string> deny_exe, bool from_admin_api = false);
  bool denied_from_api() const;
  uint64_t max_shm_bytes() const { return max_shm_bytes_; }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> deny_exe_;
  bool denied_from_api_ = false;
  const uint64_t max_shm_bytes_ = 64ull << 30;
};

}  // namespace conduit

#endif  // CONDUIT_DAEMON_SERVER_PROGRAM_POLICY_H_
